"""The hidden checks' own process (``hidden.ChecksProcess``): a verdict, or ``ChecksBroken``, never a wrong grade.

Marker `slow`: most tests start the checks' Spark (10-20 s). The worker turns ``ChecksBroken`` into a grader
error (graded again by the next run); these tests show when it is raised and that a verdict comes back otherwise.
The checks' Spark starts only for a run that committed a batch: while the notebook runs, as soon as one appears.
"""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from streamlab.grading.workers.hidden import ChecksBroken, ChecksProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CHECKS = '''
from streamlab.grading.hidden_checks import check

@check("test_sees_the_student_data")
def sees(run):
    assert (run.data / "answer.txt").read_text() == "42", "the answer is not 42"

@check("test_cannot_write_it")
def read_only(run):
    try:
        (run.data / "answer.txt").write_text("43")
    except OSError:
        return
    WRITES
'''

KILLS_ITS_JVM = '''
from streamlab.grading.hidden_checks import check

@check("test_anything")
def dies(run):
    run.spark()._jvm.java.lang.System.exit(3)   # what a crafted checkpoint can do to the checks' JVM
'''


NEEDS_SPARK = '''
from streamlab.grading.hidden_checks import check

@check("test_counts")
def counts(run):
    assert run.spark().range(4).count() == 4, "Spark counted wrong"

@check("test_no_connector")
def no_connector(run):  # checks read topics with Python's client: their Spark starts without Kafka's connector
    assert run.spark().sparkContext.getConf().get("spark.jars", "") == "", "the checks' Spark was given jars"
'''


def _process(tmp_path: Path, source: str, *, sha: str | None = None, make_box=None, **env) -> ChecksProcess:
    checks = tmp_path / "hidden_checks.py"
    checks.write_text(source)
    student = tmp_path / "student" / "data"
    student.mkdir(parents=True)
    (student / "answer.txt").write_text("42")
    env = dict(os.environ, STREAMLAB_DATA_DIR=str(tmp_path / "checks" / "data"), **env)
    return ChecksProcess(checks, sha or hashlib.sha256(checks.read_bytes()).hexdigest(), student_data=student,
                         topic_prefix="checks-test-", env=env, log=tmp_path / "checks.log", make_box=make_box)


def test_a_verdict_comes_back(tmp_path):
    process = _process(tmp_path, CHECKS.replace("WRITES", "pass  # without a sandbox, the folder is writable"))
    try:
        verdicts = process.run()
    finally:
        process.close()
    assert [(o.name, o.passed) for o in verdicts] == [("sees", True), ("read_only", True)], verdicts
    assert not process.spark_before_checks  # the run committed no batch: no Spark was started for it


def _commit_a_batch(tmp_path: Path) -> None:
    """What a student's query writes in its checkpoint when it finishes a batch (``_process``'s student data)."""
    commits = tmp_path / "student" / "data" / "checkpoints" / "lab-query-0a1b2c" / "commits"
    commits.mkdir(parents=True)
    (commits / "0").write_text("v1\n{}\n")


def _java_under(process: ChecksProcess) -> list:
    import psutil

    try:
        return [p for p in psutil.Process(process.proc.pid).children(recursive=True) if p.name() == "java"]
    except psutil.Error:
        return []


def test_a_batch_committed_while_the_notebook_runs_starts_the_checks_spark_before_they_run(tmp_path):
    process = _process(tmp_path, NEEDS_SPARK)
    try:
        _commit_a_batch(tmp_path)  # as the student's query does, while the notebook runs
        deadline = time.monotonic() + 120
        while not _java_under(process) and time.monotonic() < deadline:  # no `go` sent: the notebook still runs
            time.sleep(0.2)
        assert _java_under(process), "the checks' Spark did not start when the run committed a batch"
        verdicts = process.run()
    finally:
        process.close()
    assert [(o.name, o.passed) for o in verdicts] == [("counts", True), ("no_connector", True)], verdicts
    assert process.spark_before_checks


def test_a_check_that_asks_for_spark_gets_it_even_without_a_committed_batch(tmp_path):
    process = _process(tmp_path, NEEDS_SPARK)
    try:
        verdicts = process.run()
    finally:
        process.close()
    assert [(o.name, o.passed) for o in verdicts] == [("counts", True), ("no_connector", True)], verdicts
    assert not process.spark_before_checks


def test_a_spark_that_cannot_start_for_a_check_is_broken_checks_not_a_failed_part(tmp_path):
    process = _process(tmp_path, NEEDS_SPARK, STREAMLAB_DRIVER_MEMORY="no-such-size")  # its JVM cannot start
    try:
        with pytest.raises(ChecksBroken, match="runtime broke.*Spark did not start"):
            process.run()
    finally:
        process.close()


def test_a_spark_that_cannot_start_beside_the_notebook_is_replaced_once_then_broken(tmp_path):
    process = _process(tmp_path, NEEDS_SPARK, STREAMLAB_DRIVER_MEMORY="no-such-size")
    _commit_a_batch(tmp_path)
    try:
        with pytest.raises(ChecksBroken, match="did not start"):
            process.run(ready_wait_s=120)
        assert process.started == 2
    finally:
        process.close()


def test_a_dead_jvm_is_broken_checks_not_a_failed_part(tmp_path):
    process = _process(tmp_path, KILLS_ITS_JVM)
    try:
        with pytest.raises(ChecksBroken, match="broke while checking|ended|stopped answering"):
            process.run()
    finally:
        process.close()


def test_checks_that_cannot_start_are_replaced_once_then_broken(tmp_path):
    process = _process(tmp_path, CHECKS, sha="0" * 64)  # the file is not the one the grader hashed
    try:
        with pytest.raises(ChecksBroken, match="did not start.*changed since the grader read it"):
            process.run(ready_wait_s=120)
        assert process.started == 2
    finally:
        process.close()


def test_in_their_sandbox_the_checks_read_the_student_data_and_cannot_change_it(tmp_path):
    from streamlab.grading.sandbox.box import Sandbox, unavailable_reason
    from streamlab.grading.sandbox.limits import Limits
    from streamlab.stack.kafka import bootstrap_servers

    if unavailable_reason():
        pytest.skip(f"no sandbox here: {unavailable_reason()}")
    student = tmp_path / "student" / "data"
    env = dict(os.environ, STREAMLAB_DATA_DIR=str(tmp_path / "checks" / "data"),
               KAFKA_BOOTSTRAP_SERVERS=bootstrap_servers(), STREAMLAB_TOPIC_PREFIX="checks-test-")
    checks = tmp_path / "hidden_checks.py"
    process = _process(tmp_path, CHECKS.replace("WRITES", "raise AssertionError('it wrote the student data')"),
                       make_box=lambda: Sandbox(env, Limits(memory_mb=3072, processes=512, cpu_seconds=300,
                                                           disk_mb=512),
                                               read_only=(str(checks), str(student))))
    try:
        verdicts = process.run()
    finally:
        process.close()
    assert [(o.name, o.passed, o.detail) for o in verdicts] == [("sees", True, ""), ("read_only", True, "")]
    assert (student / "answer.txt").read_text() == "42"
