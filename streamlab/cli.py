"""The `streamlab` command: set up, run the broker, check the environment, open the course.

    streamlab fetch                 resolve the Java jars once (then everything works offline) and
                                    make the JVMs' start-up archives
    streamlab kafka start|stop|status|reset|serve
    streamlab kafka topics          every topic with its partitions and end offsets
    streamlab kafka read TOPIC      print a topic's records (partition, offset, key, value)
    streamlab kafka console producer|consumer|topics|groups ...   Kafka's own command-line tools
    streamlab cluster start|stop|status   a native Spark standalone cluster (then SPARK_MASTER=spark://...)
    streamlab doctor                check Java, pyspark, the connector, start-up archives, the broker, ports, memory
    streamlab lab [--instructor]    start the broker and open JupyterLab on the course (--instructor: with
                                    nbgrader's formgrader, course list and Create Assignment)
    streamlab grade LAB SUBMISSIONS autograde a folder of lab submissions (grades.csv + feedback + summary)
    streamlab check LAB_NOTEBOOK    a learner's self-check: run a lab as the grader will, part by part
    streamlab release-labs          regenerate the student labs in labs/ from solutions/
    streamlab release OUT           the course as students get it, without the answer key (to publish)
    streamlab site                  the course as a static website in build/site/ (lessons executed once)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .classroom.cli import add_classroom_commands
from .grading import add_grade_command
from .grading.cli import parse_grade_tool
from .grading.sandbox.box import unavailable_reason
from .grading.sandbox.limits import enforced_limits
from .site import build as site_build
from .site.mermaid import MermaidError
from .stack import (
    broker,
    cluster,
    console,
    jars,
    jupyter,
    jvm_archives,
    kafka,
    make_archives,
    translations,
)
from .stack.doctor import diagnose, report
from .stack.java import JavaError
from .stack.paths import project_root


def cmd_fetch(args) -> int:
    chosen = [name for name in jars.JAR_SETS if getattr(args, name)]
    sets = [] if args.archives and not chosen else chosen or list(jars.JAR_SETS)
    for name, found in jars.fetch_all(sets).items():
        if not args.quiet:
            print(f"{name}: {len(found)} jars in {jars.jar_dir(name)}")
    if args.archives or not chosen:  # `streamlab fetch`: the jars, then the JVMs' start-up archives
        kinds = None if args.archives in (None, "all") else args.archives.split(",")
        make_archives.make_for_quick_starts(kinds, quiet=args.quiet)
    return 0


def cmd_kafka(args) -> int:
    if args.action in ("topics", "read"):
        from kafka.errors import KafkaError  # kafka-python

        try:
            return _print_topics() if args.action == "topics" else _print_records(args.topic, args.limit)
        except KafkaError as err:
            print(f"streamlab: no answer from Kafka at {kafka.bootstrap_servers()} ({type(err).__name__}); "
                  "`streamlab kafka status` says whether the course's broker runs", file=sys.stderr)
            return 2
    if args.action == "console":
        console.exec_tool(args.tool, args.tool_args)
    if args.action == "start":
        if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
            print(f"Note: KAFKA_BOOTSTRAP_SERVERS={os.environ['KAFKA_BOOTSTRAP_SERVERS']} is set, "
                  "so notebooks use that Kafka, not this broker.")
        started = time.monotonic()
        state = broker.start(args.port)
        print(f"Kafka is ready at {state.bootstrap_servers} ({time.monotonic() - started:.1f}s). "
              f"Log: {broker.log_file()}")
        return 0
    if args.action == "serve":
        try:
            broker.serve()  # does not return: the broker takes this process's place
        except broker.BrokerError as err:
            print(f"streamlab: {err}", file=sys.stderr)
            return 2
    if args.action == "stop":
        if not broker.stop():
            print("The broker was not running.")
        return 0
    if args.action == "reset":
        broker.reset()
        return 0
    state = broker.status()
    print(state.detail)
    if state.running:
        print(f"bootstrap servers: {state.bootstrap_servers}")
    return 0 if state.running else 1


def _table(header: list[str], rows: list[list]) -> str:
    cells = [header, *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def _print_topics() -> int:
    topics = kafka.topics_with_offsets()
    print(f"Kafka at {kafka.bootstrap_servers()}: {len(topics)} topic(s)")
    if topics:
        rows = [[topic, len(ends), " ".join(f"{p}:{o}" for p, o in ends.items())] for topic, ends in topics.items()]
        print(_table(["topic", "partitions", "end offsets (partition:offset)"], rows))
    return 0


def _print_records(topic: str, limit: int) -> int:
    try:
        records = kafka.read_topic(topic, limit=limit)
    except kafka.TopicNotFoundError as err:
        print(f"streamlab: {err} (`streamlab kafka topics` lists the topics)", file=sys.stderr)
        return 1
    rows = [[r["partition"], r["offset"], _show(r["key"]), _show(r["value"])] for r in records]
    print(_table(["partition", "offset", "key", "value"], rows) if rows else f"{topic} is empty.")
    if len(records) >= limit:
        print(f"(stopped after {limit}: --limit N shows more)")
    return 0


def _show(value) -> str:
    if value is None:
        return "null"
    return value if isinstance(value, str) else json.dumps(value)


def cmd_cluster(args) -> int:
    if args.action == "start":
        state = cluster.start(args.port, args.ui_port)
        print(state.detail)
        print(f"Run the notebooks on it: SPARK_MASTER={state.master_url} make lab "
              "(or set SPARK_MASTER before the first sl.spark()). Stop it with `streamlab cluster stop`.")
        return 0
    if args.action == "stop":
        if not cluster.stop():
            print("The cluster was not running.")
        return 0
    state = cluster.status()
    print(state.detail)
    return 0 if state.running else 1


def cmd_doctor(args) -> int:
    findings = diagnose(with_spark=not args.quick)
    language = args.language or jupyter.course_language()
    print(report(findings, language))
    print(grading_sandbox_line())
    failed = [c for c in findings if not c.ok]
    if language == "zh":
        print("\n全部正常。" if not failed else f"\n有 {len(failed)} 项有问题：请看上面的提示（->）。")
    else:
        print("\nAll checks passed." if not failed else f"\n{len(failed)} check(s) failed: see the hints above.")
    return 1 if failed else 0


def grading_sandbox_line() -> str:
    """For instructors: whether `streamlab grade` can seal submissions off here, and which limits hold.
    Not a failed check: learners never need it."""
    why_not = unavailable_reason()
    if why_not:
        return f"\n(instructors) grading sandbox: not available: {why_not}"
    limits = enforced_limits()
    missing = {"memory", "processes", "CPU time", "disk"} - limits
    return ("\n(instructors) grading sandbox: available; limits enforced: " + (", ".join(sorted(limits)) or "none")
            + (f"; not here: {', '.join(sorted(missing))} (they need root and writable control groups)"
               if missing else ""))


def cmd_lab(args) -> int:
    jars.fetch_all(["connector", "kafka"])
    # the start-up archives a lesson's JVMs use, and PySpark compiled for Spark's workers (made once; a no-op after
    # `make setup`)
    own_broker = not os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    make_archives.make_for_quick_starts(["spark-driver", *(["kafka-broker", "kafka-tools"] if own_broker else [])],
                                        quiet=True)
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        print(f"Using Kafka at {os.environ['KAFKA_BOOTSTRAP_SERVERS']} (KAFKA_BOOTSTRAP_SERVERS).")
    else:
        state = broker.start()
        print(f"Kafka is ready at {state.bootstrap_servers}. Stop it later with `streamlab kafka stop`.")
    language = args.language or jupyter.course_language()
    command = jupyter.lab_command(project_root(), args.jupyter_args, language=language)
    if args.instructor:
        print("Opening JupyterLab for an instructor: nbgrader's formgrader, course list and Create Assignment too")
    if language == "zh":
        print("正在打开 JupyterLab：从 zh/notebooks/00_setup.ipynb 开始（English: streamlab lab --language en）")
    else:
        print("Opening JupyterLab on the course: start with notebooks/00_setup.ipynb "
              "(in Chinese: streamlab lab --language zh)")
    os.execve(sys.executable, command, jupyter.lab_environment(instructor=args.instructor))


def cmd_site(args) -> int:
    started = time.monotonic()
    out = site_build.build_course(args.out, args.repository)
    pages, chinese = len(list(out.glob("*.html"))), len(list(out.glob("zh/*.html")))
    print(f"The site: {pages} pages in {out}, {chinese} in Chinese in {out / 'zh'} "
          f"({time.monotonic() - started:.0f} s). Read it with no server "
          f"(open {out / 'index.html'}) or serve it: cd {out} && python -m http.server")
    return 0


def cmd_translate(args) -> int:
    if args.stub:
        for name in args.stub:
            print(f"for a translator: {translations.stub(Path(name))}")
        return 0
    late = [line for source in translations.sources() for line in translations.behind(source)]
    written = translations.build()
    print(f"The course in {translations.NAME}: {len(written)} files in {translations.project_root() / 'zh'}")
    if late:
        print(f"{len(late)} English text(s) changed or added since they were translated (`streamlab translate --stub "
              f"FILE` writes what to translate into its i18n/zh/ file):\n  " + "\n  ".join(late))
    return 1 if late else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="streamlab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    fetch = sub.add_parser("fetch", help="resolve and cache the jars (Spark Kafka connector, Kafka broker)")
    fetch.add_argument("--connector", action="store_true", help="only the Spark Kafka connector")
    fetch.add_argument("--kafka", action="store_true", help="only the Kafka broker")
    fetch.add_argument("--tools", action="store_true", help="only Kafka's command-line tools")
    fetch.add_argument("--archives", nargs="?", const="all", metavar="KINDS",
                       help="only the JVMs' start-up archives missing for this JDK and these jars (all, or "
                            "some of: " + ",".join(jvm_archives.KINDS) + ")")
    fetch.add_argument("--quiet", action="store_true", help="print nothing unless something is made")
    fetch.set_defaults(func=cmd_fetch)

    kafka_cmd = sub.add_parser("kafka", help="the native Kafka broker, and a look at the topics of the Kafka in use")
    actions = kafka_cmd.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start", help="start the native broker (or say where it runs)")
    start.add_argument("--port", type=int, default=None,
                       help="preferred port (default: the previous one, else 9092; "
                            "another is chosen if it is taken)")
    actions.add_parser("serve", help="run the broker in the foreground, its network from STREAMLAB_KAFKA_* variables "
                                     "(the Docker stack's Kafka: docker/entrypoint.sh's kafka role)")
    actions.add_parser("stop", help="stop the native broker")
    actions.add_parser("status", help="is the native broker running, and where")
    actions.add_parser("reset", help="stop the native broker and delete all its topics")
    actions.add_parser("topics", help="every topic with its partitions and end offsets")
    read = actions.add_parser("read", help="print a topic's records: partition, offset, key, value")
    read.add_argument("topic")
    read.add_argument("--limit", type=int, default=20, help="print at most N records (default 20)")
    tool = actions.add_parser("console", help="run one of Kafka's own command-line tools (options as in Kafka's "
                                              "bin/kafka-console-producer.sh etc.; --bootstrap-server is filled in)")
    tool.add_argument("tool", choices=list(console.TOOLS),
                      help="; ".join(f"{name}: {script}" for name, (_, script) in console.TOOLS.items()))
    tool.add_argument("tool_args", nargs=argparse.REMAINDER, help="passed on to the tool")
    kafka_cmd.set_defaults(func=cmd_kafka)

    cluster_cmd = sub.add_parser("cluster", help="a native Spark standalone cluster on this machine (127.0.0.1)")
    cluster_actions = cluster_cmd.add_subparsers(dest="action", required=True)
    cluster_start = cluster_actions.add_parser("start", help="start a master and its worker(s); prints the master URL")
    cluster_start.add_argument("--port", type=int, default=None,
                               help=f"the master's port (default {cluster.CLUSTER_SETTINGS['master_port']})")
    cluster_start.add_argument("--ui-port", type=int, default=None,
                               help=f"the master's web UI (default {cluster.CLUSTER_SETTINGS['master_ui_port']}; "
                                    "the worker's is the next port)")
    cluster_actions.add_parser("stop", help="stop the worker(s), their executors and the master")
    cluster_actions.add_parser("status", help="what runs: master, workers, applications")
    cluster_cmd.set_defaults(func=cmd_cluster)

    doctor = sub.add_parser("doctor", help="check the environment and say how to fix problems")
    doctor.add_argument("--quick", action="store_true", help="skip the Spark-reads-Kafka check")
    doctor.add_argument("--language", choices=sorted(jupyter.START_PAGES), default=None,
                        help="en, or zh (Simplified Chinese); default: zh when the locale is Chinese, else en")
    doctor.set_defaults(func=cmd_doctor)

    lab = sub.add_parser("lab", help="start the broker and open JupyterLab on the course")
    lab.add_argument("--instructor", action="store_true",
                     help="with nbgrader's instructor tools (formgrader, course list, Create Assignment)")
    lab.add_argument("--language", choices=sorted(jupyter.START_PAGES), default=None,
                     help="the course's language: en, or zh (Simplified Chinese: zh/notebooks, zh/labs); "
                          "default: zh when the locale is Chinese (LANG=zh_CN.UTF-8), else en")
    lab.add_argument("jupyter_args", nargs="*", metavar="JUPYTER_LAB_OPTION",
                     help="any other option is passed on to `jupyter lab` as it is (--no-browser, --port=8899)")
    lab.set_defaults(func=cmd_lab)

    site = sub.add_parser("site", help="build the course's website (executed lessons, labs, glossary) in build/site/")
    site.add_argument("--out", type=Path, default=None, help="where to write it (default build/site/)")
    site.add_argument("--repository", default=None, metavar="OWNER/NAME",
                      help="the GitHub repository the pages link to (default: pyproject.toml's Repository)")
    site.set_defaults(func=cmd_site)

    translate = sub.add_parser("translate", help="build the course in Simplified Chinese (zh/) from the English and "
                                                  "i18n/zh/, and say what is not translated yet")
    translate.add_argument("--stub", nargs="+", metavar="FILE",
                           help="write the i18n/zh/ file of these English notebooks or texts for a translator: what "
                                "changed since, in English under a new marker, the rest as translated")
    translate.set_defaults(func=cmd_translate)

    add_grade_command(sub)
    add_classroom_commands(sub)
    return parser


LAB_OWN_OPTIONS = ("--instructor", "-h", "--help")
LAB_OWN_VALUED = ("--language",)  # with a value: --language zh, or --language=zh


def parse_lab(argv: list[str]) -> argparse.Namespace:
    """``streamlab lab [--instructor] [--language L] [JUPYTER_LAB_OPTION ...]``: the course's own options, and every
    other argument handed to `jupyter lab` unchanged and in order (a ``--`` before them is dropped, not passed on)."""
    rest = argv[1:]
    before, after = (rest[:rest.index("--")], rest[rest.index("--") + 1:]) if "--" in rest else (rest, [])
    own, theirs, at = [], [], 0
    while at < len(before):
        arg = before[at]
        if arg in LAB_OWN_VALUED:
            own += before[at:at + 2]
            at += 1
        elif arg in LAB_OWN_OPTIONS or arg.split("=", 1)[0] in LAB_OWN_VALUED:
            own.append(arg)
        else:
            theirs.append(arg)
        at += 1
    args = build_parser().parse_args(["lab", *own])
    args.jupyter_args = theirs + after
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_grade_tool(argv) or (parse_lab(argv) if argv[:1] == ["lab"] else build_parser().parse_args(argv))
    try:
        return args.func(args)
    except (JavaError, jars.FetchError, broker.BrokerError, cluster.ClusterError, MermaidError) as err:
        print(f"streamlab: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
