"""Per-submission environments, and finding and stopping tagged processes (no kernel, no Spark)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from streamlab.grading import kill_submission_processes, leftover_processes
from streamlab.grading.sandbox.isolation import TAG, run_isolated, submission_environment, submission_topic_prefix


def _tag(name: str) -> str:
    return f"unit{os.getpid()}-{name}"


def test_environment_of_a_submission(tmp_path, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setenv("JPY_PARENT_PID", "1")
    env = submission_environment("run1-Ana.Lopez@uni.edu", bootstrap="localhost:9999", workdir=tmp_path)
    assert env[TAG] == "run1-Ana.Lopez@uni.edu"
    assert env["STREAMLAB_TOPIC_PREFIX"].startswith("run1-ana.lopez-uni.edu-")  # + a hash of the exact id
    assert env["KAFKA_BOOTSTRAP_SERVERS"] == "localhost:9999"
    assert env["STREAMLAB_DATA_DIR"] == str(tmp_path / "data")
    assert env["SPARK_LOCAL_DIRS"] == str(tmp_path / "spark")
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    assert "NBGRADER_EXECUTION" not in env and "JPY_PARENT_PID" not in env
    assert os.environ["NBGRADER_EXECUTION"] == "autograde"  # the grader's own environment is untouched


def test_topic_prefix_is_a_valid_topic_name():
    assert re.fullmatch(r"grade-1a2b-jos-m-ller-[0-9a-f]{8}-", submission_topic_prefix("grade-1a2b-José Müller"))


def _once_started(tag: str, within_s: float = 10) -> list[str]:
    """``leftover_processes(tag)`` once the process carrying it shows its environment. Popen returns when the
    child's exec has begun, and Linux shows the new environment (/proc/PID/environ) a moment later: on a loaded
    machine, a look right away can find nothing."""
    deadline = time.monotonic() + within_s
    while not (found := leftover_processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def test_tagged_processes_are_found_and_killed():
    tag = _tag("detached")
    proc = subprocess.Popen(["sleep", "60"], env={**os.environ, TAG: tag}, start_new_session=True)
    try:
        assert _once_started(tag) == [f"{proc.pid} sleep"]
        assert leftover_processes(_tag("other")) == []
        assert kill_submission_processes(None, tag) == 1
        proc.wait(timeout=5)
        assert leftover_processes(tag) == []
    finally:
        proc.kill()


CHILD = """
import subprocess, sys, time
subprocess.Popen(["sleep", "60"], start_new_session=True)  # escapes the worker's process group
print("started", flush=True)
time.sleep(float(sys.argv[1]))
print("slept", flush=True)
"""


@pytest.mark.slow
def test_run_isolated_stops_the_worker_at_the_limit_and_what_it_left(tmp_path):
    tag = _tag("slow")
    env = {**os.environ, TAG: tag}
    outcome = run_isolated([sys.executable, "-c", CHILD, "60"], env=env, cwd=tmp_path,
                           log_path=tmp_path / "log", timeout_s=3, tag=tag)
    assert outcome.hit_limit and outcome.killed == 2
    assert leftover_processes(tag) == []
    log = (tmp_path / "log").read_text()
    assert "started" in log and "slept" not in log, "stopped at the limit, before its 60 s of sleep ended"


def test_run_isolated_cleans_up_after_a_worker_that_finished(tmp_path):
    tag = _tag("fast")
    outcome = run_isolated([sys.executable, "-c", CHILD, "0"], env={**os.environ, TAG: tag}, cwd=tmp_path,
                           log_path=tmp_path / "log", timeout_s=30, tag=tag)
    assert (outcome.returncode, outcome.hit_limit, outcome.killed) == (0, False, 1)
    assert leftover_processes(tag) == []


def test_topic_clean_up_says_what_failed_and_does_not_raise(monkeypatch, capsys):
    from streamlab.grading.sandbox import isolation

    def no_broker():
        raise ConnectionError("no broker at 127.0.0.1:1")

    monkeypatch.setattr(isolation, "list_topics", no_broker)
    isolation.delete_prefixed("run1-ana-")
    said = capsys.readouterr().err
    assert "could not delete the topics and groups run1-ana-*: ConnectionError: no broker at 127.0.0.1:1" in said
