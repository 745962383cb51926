"""The hidden checks' own process: one per submission, in a sandbox of its own (see ``hidden.ChecksProcess``).

    python -m streamlab.grading.workers.checks_runner CHECKS --sha256 H --student-data DIR --topic-prefix P

What a lab's checks read (the student's checkpoints, state files and topics) was made by the student, so
the checks run where that data can only hurt them: a fresh process and JVM per submission, inside its own
limits (memory, disk, processes, CPU time), with a read-only view of the student's data folder. Whatever a
crafted checkpoint does to this process, the next student gets a new one.

Their Spark starts only when it will be needed: as soon as the student's data folder holds a checkpoint with a
committed batch (``checkpoints/*/commits/*``), looked for while the notebook runs, so that Spark starts beside the
notebook's work. Every state a check reads comes from such a checkpoint (``Artifacts.checkpoint`` refuses one
without a committed batch before Spark is touched), so a blank, crashed or stopped submission costs no Spark at
all. A check that asks for Spark anyway gets one then (``Artifacts.spark``).

It talks to the worker in JSON lines on stdin and stdout; everything else it or its JVM prints goes to
stderr (file descriptor 1 is pointed there for the JVM):

    <- go                              the student's kernel is gone: check what it left
    -> {"ready": true, "spark": S}     the checks loaded; S: their Spark started and answered a query (the health
                                       check), false when the student's data holds no committed batch
       {"ready": false, "error": ...}  they could not start: not the student's doing (sent as soon as known,
                                       even before ``go``)
    -> {"verdicts": [...]}             one per check: name, cells, passed, detail
       {"error": ...}                  the checks' runtime broke while checking: not the student's doing
"""
from __future__ import annotations

import argparse
import json
import os
import select
import sys
from dataclasses import asdict
from pathlib import Path

from ...stack.session import spark as get_spark
from .. import bounds
from ..hidden_checks import Artifacts, RuntimeBroke, load_checks, run_checks

# Java's errors that mean the JVM itself is in trouble (``java.lang.VirtualMachineError`` and kin), by class name
# as the JVM reports a thrown object's class: never by a message, which can quote the student's data.
JVM_FAILURES = ("java.lang.OutOfMemoryError", "java.lang.StackOverflowError", "java.lang.InternalError",
                "java.lang.UnknownError", "java.lang.VirtualMachineError")


def healthy(session) -> str | None:
    """None when the checks' Spark answers a query; else why not."""
    try:
        return None if session.range(3).count() == 3 else "Spark counted wrong"
    except Exception as err:  # noqa: BLE001 - any failure means the runtime is not usable
        return f"{type(err).__name__}: {str(err).strip()[:200]}"


def runtime_failure(err: BaseException) -> str | None:
    """Why ``err``, raised by a check, is the checks' runtime failing rather than the part being wrong (None: it
    is not). Decided by types the grader's own code raises, and by the classes the JVM names: the checks' JVM
    gone or unreachable (py4j's network errors), a Java error of the JVM itself anywhere in the exception's
    causes, the broker not answering the checks' own clients. Never by an exception's message: a check's
    message can hold text the student wrote into a topic or a checkpoint."""
    from kafka.errors import KafkaConnectionError, NoBrokersAvailable
    from py4j.protocol import Py4JError, Py4JJavaError, Py4JNetworkError

    if isinstance(err, (NoBrokersAvailable, KafkaConnectionError)):
        return f"the broker did not answer the checks ({type(err).__name__})"
    if isinstance(err, Py4JNetworkError):
        return "the checks' JVM stopped answering"
    java = getattr(err, "java_exception", None) or getattr(err, "_origin", None)
    if isinstance(err, Py4JError) and not isinstance(err, Py4JJavaError) and java is None:
        return f"the checks' JVM failed ({type(err).__name__})"
    if java is not None:
        try:
            for _ in range(bounds.JAVA_CAUSES_FOLLOWED):
                if java is None:
                    break
                name = java.getClass().getName()
                if name in JVM_FAILURES:
                    return f"the checks' JVM failed ({name})"
                java = java.getCause()
        except Exception as asked:  # noqa: BLE001 - the JVM cannot even say what it threw
            return f"the checks' JVM stopped answering ({type(asked).__name__})"
    return None


def committed_batch_in(data: Path) -> bool:
    """Whether the student's data folder holds a checkpoint with a committed batch (``checkpoints/*/commits/*``),
    which the checks will read with Spark. Looks at no more than ``bounds.CHECKS_LOOK_ENTRIES`` checkpoint folders
    (past that: True, as if one had committed), follows no link among them and opens no file: the folder is the
    student's, and changes while it is looked at."""
    try:
        with os.scandir(data / "checkpoints") as folders:
            for seen, folder in enumerate(folders):
                if seen >= bounds.CHECKS_LOOK_ENTRIES:
                    return True
                try:
                    if not folder.is_dir(follow_symlinks=False):
                        continue
                    with os.scandir(os.path.join(folder.path, "commits")) as commits:
                        if next(commits, None) is not None:
                            return True
                except OSError:
                    continue
    except OSError:
        return False
    return False


CHECKS_SPARK = {"spark.jars": ""}
"""The checks' Spark settings beside the course's: no Kafka connector. Checks read topics with the course's Python
client (``Artifacts.records``), never through Spark, and a Spark given the connector's four jars copies and opens
them as it starts (0.4-0.5 CPU-s more for each submission's checks, in alternating runs on two cores)."""


def start_spark():
    """(the checks' Spark, None) once it answered a query; (None, why not) otherwise."""
    try:
        session = get_spark(app_name="streamlab-hidden-checks", **CHECKS_SPARK)
        problem = healthy(session)
    except BaseException as err:  # noqa: BLE001 - reported, never raised past the protocol
        return None, f"{type(err).__name__}: {str(err).strip()[:300]}"
    return (None, problem) if problem else (session, None)


def _started_or_broke():
    """Spark for a check that asks for it when none was started before ``go``: a failed start is the runtime's."""
    session, problem = start_spark()
    if problem:
        raise RuntimeBroke(f"the checks' Spark did not start: {problem}")
    return session


_pending = bytearray()


def next_line(wait_s: float) -> str | None:
    """The worker's next line on stdin, if one comes within ``wait_s`` (None if not yet); "" once stdin is closed."""
    while b"\n" not in _pending:
        ready, _, _ = select.select([0], [], [], wait_s)
        if not ready:
            return None
        chunk = os.read(0, 4096)
        if not chunk:
            return ""
        _pending.extend(chunk)
        if len(_pending) > 4096:
            return ""  # the worker only ever says "go"
    line, _, rest = bytes(_pending).partition(b"\n")
    _pending[:] = rest
    return line.decode("utf-8", "replace").strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamlab.grading.workers.checks_runner",
                                     description="Run a lab's hidden checks on one submission (started by the worker).")
    parser.add_argument("checks")
    parser.add_argument("--sha256", required=True)
    parser.add_argument("--student-data", required=True)
    parser.add_argument("--topic-prefix", required=True)
    args = parser.parse_args(argv)

    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the JVM inherits fd 1: whatever it prints goes to stderr, never into the channel
    sys.stdout = sys.stderr

    def send(message: dict) -> None:
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    try:
        checks = load_checks(args.checks, args.sha256)
    except BaseException as err:  # noqa: BLE001 - reported, never raised past the protocol
        send({"ready": False, "error": f"{type(err).__name__}: {str(err).strip()[:300]}"})
        return 1
    data, session, told = Path(args.student_data), None, None
    while True:  # until the worker says go (or goes away), looking for a committed batch; once more after it
        if session is None and committed_batch_in(data):
            session, problem = start_spark()
            if problem:
                send({"ready": False, "error": problem})
                return 1
        if told is not None:
            break
        told = next_line(bounds.CHECKS_LOOK_EVERY_S)
        if told not in (None, "go"):
            return 0  # the worker needs no checks after all (the submission stopped at a limit, say)
    send({"ready": True, "spark": session is not None})

    artifacts = Artifacts(data=args.student_data, topic_prefix=args.topic_prefix, spark=session,
                          start_spark=_started_or_broke)
    try:
        results = run_checks(checks, artifacts, broke=runtime_failure)
    except RuntimeBroke as err:
        send({"error": f"the checks' runtime broke while checking: {err}"})
        return 1
    if artifacts.spark_started:
        broke = healthy(artifacts.spark())  # the health probe again: a runtime that broke without saying so
        if broke:
            send({"error": f"the checks' Spark broke while checking: {broke}"})
            return 1
    send({"verdicts": [asdict(r) for r in results]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
