"""What `streamlab doctor` examines: that everything the course needs is here, and how to fix what isn't.

Each ``examine_*`` returns a ``Finding`` (name, ok, detail, fix). ``diagnose()`` makes them all; the CLI prints them
as a table (``report``) and notebook 00 shows them as a DataFrame. (A *check*, in this package, is only ever one of the
grader's hidden checks of a lab.)
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, replace

from . import broker, jars, jvm_archives, kafka
from .java import JAVA_FIX, SUPPORTED_JAVA, find_java, java_version, missing_java
from .make_archives import states as archive_states
from .pins import pinned_version
from .session import spark as get_spark
from .translations import display_width


@dataclass
class Finding:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def examine_python() -> Finding:
    ok = sys.version_info >= (3, 11)
    return Finding("python", ok, f"{sys.version.split()[0]} at {sys.executable}",
                 "" if ok else "Use Python 3.11 (see environment.yml).")


def examine_java() -> Finding:
    java = find_java()  # the one Spark's launcher runs: $JAVA_HOME/bin/java if JAVA_HOME is set, else PATH's
    if java is None:
        return Finding("java", False, missing_java(), JAVA_FIX)
    version = java_version(java)
    if version is None or version < 17:
        return Finding("java", False, f"{java}: version {version}", JAVA_FIX)
    note = "" if version in SUPPORTED_JAVA else " (the course is tested on 17)"
    return Finding("java", True, f"Java {version} at {java}{note}")


def examine_pyspark() -> Finding:
    try:
        import pyspark
    except ImportError:
        return Finding("pyspark", False, "not installed", "Run `make setup` (or pip install -r requirements.txt).")
    want = pinned_version("pyspark")
    ok = pyspark.__version__ == want
    return Finding("pyspark", ok, pyspark.__version__,
                 "" if ok else f"The course pins pyspark=={want}: run `make setup`.")


def examine_connector() -> Finding:
    if not jars.is_cached("connector"):
        return Finding("kafka connector", False, "not downloaded yet",
                     "Run `streamlab fetch` once with network access (make lab does it).")
    import pyspark

    names = [j.name for j in jars.connector_jars()]
    detail = ", ".join(n for n in names if "kafka" in n)
    if jars.CONNECTOR_VERSION.split(".")[:2] != pyspark.__version__.split(".")[:2]:
        detail += f" ({jars.CONNECTOR_NOTE})"
    return Finding("kafka connector", True, detail)


def examine_archives() -> Finding:
    """The JVMs' start-up archives (``streamlab.stack.jvm_archives``): ready, or missing with the fix.
    Never a failure: without them every JVM works, only starts slower."""
    name = "start-up archives"
    if not jvm_archives.enabled():
        return Finding(name, True, "off (STREAMLAB_JVM_ARCHIVES=off): the JVMs start without them")
    found = archive_states()
    missing = [s.kind for s in found if not s.ready and s.path is not None]
    if not missing:
        size = sum(s.size_mb for s in found)
        return Finding(name, True, f"ready for {len(found)} kinds of JVM ({size:.0f} MB in {jvm_archives.folder()})")
    return Finding(name, True, f"missing for this JDK and these jars: {', '.join(missing)} (those JVMs start "
                 "about twice as slowly, and make theirs when they exit)",
                 "Run `streamlab fetch --archives` (about a minute and a half).")


def examine_memory() -> Finding:
    import psutil

    free_gb = psutil.virtual_memory().available / 2**30
    ok = free_gb >= 2
    return Finding("memory", ok, f"{free_gb:.1f} GiB available",
                 "" if ok else "Spark and Kafka need about 2 GiB: close other programs.")


def examine_broker() -> Finding:
    try:
        servers = kafka.bootstrap_servers(start=False)
    except kafka.NoBrokerError as err:
        return Finding("kafka broker", False, str(err), "Run `streamlab kafka start`.")
    ok, detail = kafka.ping(servers)
    return Finding("kafka broker", ok, f"{servers}: {detail}",
                 "" if ok else "Run `streamlab kafka status`; `streamlab kafka start` restarts a dead broker.")


def examine_port(port: int = 9092) -> Finding:
    state = broker.status()
    if state.running and state.port == port:
        return Finding(f"port {port}", True, "used by the course's broker")
    if broker.port_is_free(port):
        return Finding(f"port {port}", True, "free")
    return Finding(f"port {port}", True, "taken by another program: the course's broker will pick another port")


def examine_spark_reads_kafka(session=None) -> Finding:
    """The end-to-end check: Spark, through the connector, reads records a Python client wrote."""
    try:
        spark_session = session if session is not None else get_spark()
        topic = kafka.new_topic("doctor", partitions=1)
        kafka.produce(topic, [{"check": i} for i in range(3)])
        rows = (spark_session.read.format("kafka")
                .option("kafka.bootstrap.servers", kafka.bootstrap_servers())
                .option("subscribe", topic).load().count())
        kafka.delete_topic(topic)
    except Exception as err:  # noqa: BLE001 - the doctor reports any failure
        return Finding("spark reads kafka", False, f"{type(err).__name__}: {str(err).splitlines()[0][:200]}",
                     "Run `streamlab doctor` in a terminal for details.")
    ok = rows == 3
    return Finding("spark reads kafka", ok, f"read {rows} of 3 records")


def diagnose(*, with_spark: bool = False, session=None) -> list[Finding]:
    findings = [examine_python(), examine_java(), examine_pyspark(), examine_connector(), examine_archives(),
                examine_memory(), examine_port(), examine_broker()]
    if with_spark and all(f.ok for f in findings):
        findings.append(examine_spark_reads_kafka(session))
    return findings


def report(findings: list[Finding], language: str = "en") -> str:
    """The findings as ``streamlab doctor`` prints them, in ``language`` ("en", or "zh": ``in_chinese``)."""
    if language == "zh":
        findings = [in_chinese(f) for f in findings]
    width = max(display_width(c.name) for c in findings)
    lines = []
    for c in findings:
        lines.append(f"{'ok ' if c.ok else 'FAIL'} {c.name}{' ' * (width - display_width(c.name))}  {c.detail}")
        if c.fix:  # a failure's fix, or advice on what is fine
            lines.append(f"     {' ' * width}  -> {c.fix}")
    return "\n".join(lines)


# -- in Chinese (streamlab doctor --language zh, or a Chinese locale) ---------------------------------------------
# Each sentence the doctor can say, as a pattern over the English, and the Chinese it becomes: what it names of this
# machine (versions, paths, ports) is kept. tests/stack/test_doctor.py says every sentence of this module, of
# JAVA_FIX and of missing_java has its line here.
IN_CHINESE: list[tuple[str, str]] = [
    (r"python", "Python"), (r"java", "Java"), (r"pyspark", "pyspark"), (r"kafka connector", "Kafka 连接器"),
    (r"start-up archives", "启动归档"), (r"memory", "内存"), (r"kafka broker", "Kafka broker"),
    (r"port (\d+)", r"端口 \1"), (r"spark reads kafka", "Spark 读取 Kafka"),
    (r"(\S+) at (.+)", r"\1，位于 \2"),
    (r"Use Python 3\.11 \(see environment\.yml\)\.", "请使用 Python 3.11（见 environment.yml）。"),
    (r"(.+): version (.+)", r"\1：版本 \2"),
    (r"Java (\d+) at (.+) \(the course is tested on 17\)", r"Java \1，位于 \2（本课程在 17 上测试）"),
    (r"Java (\d+) at (.+)", r"Java \1，位于 \2"),
    (r"not installed", "没有安装"),
    (r"Run `make setup` \(or pip install -r requirements\.txt\)\.",
     "请运行 `make setup`（或 pip install -r requirements.txt）。"),
    (r"The course pins pyspark==(\S+): run `make setup`\.", r"本课程固定使用 pyspark==\1：请运行 `make setup`。"),
    (r"not downloaded yet", "还没有下载"),
    (r"Run `streamlab fetch` once with network access \(make lab does it\)\.",
     "请在能联网时运行一次 `streamlab fetch`（make lab 会做这件事）。"),
    (r"(.+) \(Spark's Kafka connector for 4\.3 is not on Maven Central yet: .+\)",
     r"\1（Spark 4.3 的 Kafka 连接器还没有发布到 Maven Central：本课程把 pyspark 4.3.0 与 4.2.0 的连接器搭配使用，"
     r"测试套件用它运行每一节课程和每一个实验）"),
    (r"off \(STREAMLAB_JVM_ARCHIVES=off\): the JVMs start without them",
     "已关闭（STREAMLAB_JVM_ARCHIVES=off）：JVM 不用它们启动"),
    (r"ready for (\d+) kinds of JVM \((\S+) MB in (.+)\)", r"已就绪，共 \1 种 JVM（\2 MB，位于 \3）"),
    (r"missing for this JDK and these jars: (.+) \(those JVMs start about twice as slowly, and make theirs when "
     r"they exit\)", r"这个 JDK 和这些 jar 还没有：\1（这些 JVM 启动会慢大约一倍，并在退出时生成自己的归档）"),
    (r"Run `streamlab fetch --archives` \(about a minute and a half\)\.",
     "请运行 `streamlab fetch --archives`（大约一分半钟）。"),
    (r"(\S+) GiB available", r"可用 \1 GiB"),
    (r"Spark and Kafka need about 2 GiB: close other programs\.", "Spark 和 Kafka 需要大约 2 GiB：请关闭其他程序。"),
    (r"Run `streamlab kafka start`\.", "请运行 `streamlab kafka start`。"),
    (r"Run `streamlab kafka status`; `streamlab kafka start` restarts a dead broker\.",
     "请运行 `streamlab kafka status`；`streamlab kafka start` 会重启已停止的 broker。"),
    (r"used by the course's broker", "被本课程的 broker 使用"), (r"free", "空闲"),
    (r"taken by another program: the course's broker will pick another port",
     "被其他程序占用：本课程的 broker 会换一个端口"),
    (r"Run `streamlab doctor` in a terminal for details\.", "请在终端里运行 `streamlab doctor` 查看详情。"),
    (r"read (\d+) of 3 records", r"读到 3 条记录中的 \1 条"),
    (r"Install a JDK 17 .+", "请安装 JDK 17（例如 `sudo apt install openjdk-17-jdk`、`brew install openjdk@17` 或 "
                            "`conda install -c conda-forge openjdk=17`），并把它放到 PATH 上或设置 JAVA_HOME。"
                            "也可以使用 Docker 环境（docker/README.md），它自带 Java。"),
    (r"JAVA_HOME is (.+), which has no bin/java: .+",
     r"JAVA_HOME 是 \1，其中没有 bin/java：Spark 运行的是 $JAVA_HOME/bin/java，所以请把 JAVA_HOME 指向一个 JDK 17，"
     r"或取消设置它以使用 PATH 上的 java。"),
    (r"No Java found \(looked at JAVA_HOME and PATH\)\.", "没有找到 Java（查看了 JAVA_HOME 和 PATH）。"),
]


def say_in_chinese(text: str) -> str:
    """``text`` (a name, detail or fix the doctor says) in Chinese: the first pattern of ``IN_CHINESE`` that matches it
    whole; a text no pattern matches (an error a library raised) stays as it is."""
    for pattern, chinese in IN_CHINESE:
        if re.fullmatch(pattern, text, re.S):
            return re.sub(pattern, chinese, text, count=1, flags=re.S)
    return text


def in_chinese(finding: Finding) -> Finding:
    return replace(finding, name=say_in_chinese(finding.name), detail=say_in_chinese(finding.detail),
                   fix=say_in_chinese(finding.fix) if finding.fix else "")

