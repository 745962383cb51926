"""One submission, one box: what submissions used to share, and could spend or break for the others (no Spark).

The slot's log (a kernel's stdout and stderr), the grader's own files named like a student, words a student can
write deciding that the grader broke. The broker's family is ``test_kafka_requests`` (the door's budget) and
``test_tenancy``; the worker's memory ``test_bounds`` and ``test_warm``; all of them together, graded for real
with a reference after them, ``test_grade_hostile_data``.
"""
from __future__ import annotations

import io
import os
import sys
import time

import pytest

from streamlab.grading.hidden_checks import CheckResult, RuntimeBroke, run_checks
from streamlab.grading.sandbox.box import kernel_output, output_tail
from streamlab.grading.steps.bounded_kernel_manager import BoundedKernelManager
from streamlab.grading.workers.checks_runner import runtime_failure
from streamlab.grading.workers.worker import BoundedLog

WORDS = "java.lang.OutOfMemoryError Py4JNetworkError Connection refused SparkContext was shut down"


class _JavaObject:
    """Stands in for a py4j proxy of a Java throwable: its class name and its cause."""

    def __init__(self, name, cause=None, broken=False):
        self.name, self.cause, self.broken = name, cause, broken

    def getClass(self):  # noqa: N802 - Java's name
        if self.broken:
            from py4j.protocol import Py4JNetworkError
            raise Py4JNetworkError("Answer from Java side is empty")
        return self

    def getName(self):  # noqa: N802
        return self.name

    def getCause(self):  # noqa: N802
        return self.cause


def _java_error(java):
    from py4j.protocol import Py4JJavaError

    err = Py4JJavaError.__new__(Py4JJavaError)
    err.java_exception, err.errmsg, err.args = java, "An error occurred", ("An error occurred",)
    return err


def test_words_in_the_students_data_never_say_the_checks_broke():
    """A record holding 'java.lang.OutOfMemoryError' made its check's message say so, and the old runner,
    matching words, turned a 2/10 into a grader error on every run: now that message is just a failed part."""
    for err in (AssertionError(f"the output topic held {WORDS!r}"), ValueError(WORDS), KeyError(WORDS),
                _java_error(_JavaObject("org.apache.spark.sql.AnalysisException"))):
        assert runtime_failure(err) is None, err


def test_the_checks_runtime_failing_is_known_by_its_types():
    from kafka.errors import NoBrokersAvailable
    from py4j.protocol import Py4JNetworkError

    oom_inside = _JavaObject("org.apache.spark.SparkException", cause=_JavaObject("java.lang.OutOfMemoryError"))
    assert "broker" in runtime_failure(NoBrokersAvailable())
    assert "stopped answering" in runtime_failure(Py4JNetworkError("gone"))
    assert "java.lang.OutOfMemoryError" in runtime_failure(_java_error(oom_inside))
    assert "stopped answering" in runtime_failure(_java_error(_JavaObject("x", broken=True)))


def test_run_checks_gives_no_verdict_when_the_runtime_broke():
    from kafka.errors import NoBrokersAvailable

    from streamlab.grading import hidden_checks

    class Lab:
        @hidden_checks.check("test_a")
        def part_a(run):
            raise AssertionError(WORDS)

        @hidden_checks.check("test_b")
        def part_b(run):
            raise NoBrokersAvailable()

    artifacts = hidden_checks.Artifacts(data="/nonexistent", topic_prefix="p-", spark=None)
    module = type(sys)("lab_checks")
    module.__dict__.update({"part_a": Lab.part_a, "part_b": Lab.part_b})
    with pytest.raises(RuntimeBroke, match="part_b: the broker did not answer"):
        run_checks(module, artifacts, broke=runtime_failure)
    results = run_checks(module, artifacts)  # no judge of the runtime: both are failed parts
    assert [r.passed for r in results] == [False, False] and isinstance(results[0], CheckResult)


def test_a_kernels_own_output_goes_to_its_work_folder_never_the_workers(tmp_path, capfd):
    """A kernel's stdout and stderr went to the warm worker's log: 1 GB of stderr filled it, and every later
    kernel in that slot died at its first write (EFBIG). Now they go to a file in the submission's folder."""
    import asyncio

    output = kernel_output({"STREAMLAB_DATA_DIR": str(tmp_path / "work" / "data")})  # not made yet (a self-check's)
    manager = BoundedKernelManager(env={**os.environ}, output=str(output))

    async def run():
        await manager.start_kernel()
        client = manager.client()
        client.start_channels()
        await client.wait_for_ready(timeout=60)
        client.execute("import os; os.write(2, b'FLOOD-2 ' * 1000); os.write(1, b'FLOOD-1')")
        deadline = time.monotonic() + 30
        while b"FLOOD-1" not in (output.read_bytes() if output.exists() else b"") and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        client.stop_channels()
        await manager.shutdown_kernel(now=True)

    asyncio.run(run())
    written = output.read_bytes()
    assert b"FLOOD-1" in written and written.count(b"FLOOD-2") == 1000
    seen = capfd.readouterr()
    assert "FLOOD" not in seen.out + seen.err


def test_the_end_of_an_output_file_is_read_safely(tmp_path):
    path = tmp_path / "out.log"
    path.write_bytes(b"a" * 100_000 + b"THE END")
    tail = output_tail(path, max_bytes=1000)
    assert tail.endswith("THE END") and "the first 99007 bytes are left out" in tail
    os.mkfifo(tmp_path / "fifo")
    assert output_tail(tmp_path / "fifo") == ""  # never blocks on a pipe the student left
    (tmp_path / "link").symlink_to("/etc/passwd")
    assert output_tail(tmp_path / "link") == ""  # never follows a link out
    assert output_tail(tmp_path / "missing") == ""


def test_a_students_log_is_bounded():
    handle = io.StringIO()
    log = BoundedLog(handle, 100)
    for _ in range(50):
        log.write("x" * 30)
    assert handle.getvalue().count("x") == 100 and handle.getvalue().endswith("limited in size]\n")


def test_no_students_id_names_a_grader_file(tmp_path):
    """A student called worker1 truncated the slot's log, OUT/logs/worker1.log: the workers' logs are in a folder
    of the grader's own, which no student's id names."""
    from streamlab.grading.run.grader import Grader
    from streamlab.grading.run.submissions import name_problem

    grader = Grader("lab01_stateless_vs_stateful", tmp_path / "out", jobs=2, limits=None, bootstrap="127.0.0.1:1")
    grader._start_workers()  # no submission is graded here
    workers = []
    try:
        workers = [grader._workers.get() for _ in range(2)]
        assert {w.log_path.parent for w in workers} == {grader.grader_dir}
        assert grader.grader_dir not in (grader.logs_dir, grader.results_dir, grader.feedback_dir)
        for student in ("worker1", "worker2", "run", "summary", "grades", "grader"):
            assert name_problem(student) is None  # a plain id, graded under its own name...
            assert grader.logs_dir / f"{student}.log" not in {w.log_path for w in workers}  # ...and never these
        assert name_problem(".template") is not None  # the course's template folder
    finally:
        for worker in workers:
            grader._workers.put(worker)
        grader.close()
