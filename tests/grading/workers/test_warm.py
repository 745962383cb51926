"""streamlab.grading.workers.warm: one worker process serving submissions in turn, with per-student limits.

A stand-in worker (a few lines of Python speaking the same channel protocol) shows the grader's
side: reports matched by nonce, the time limit, a worker that dies, the sweep of a student's
processes. The real worker's serve loop is checked on requests it cannot grade.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import psutil
import pytest

from streamlab.grading.outputs.results import Status, WorkerReport
from streamlab.grading.sandbox.isolation import TAG, leftover_processes
from streamlab.grading.sandbox.limits import ControlGroups, ControlGroupsRefused, Limits, enforced_limits
from streamlab.grading.workers.context import SubmissionContext
from streamlab.grading.workers.warm import WORKER, WarmWorker

# Tags unique to this process: sweeps and leftover checks never see another test run's processes
RUN = f"t{os.getpid()}-warm"

FAKE_WORKER = r'''
import json, os, subprocess, sys, time
from multiprocessing.connection import Connection
channel = Connection(int(sys.argv[-1]))
while True:
    try:
        request = json.loads(channel.recv_bytes())
    except EOFError:
        break
    what = request["student"]
    report = json.dumps({"status": "graded", "score": 1.0, "max_score": 1.0})
    if what == "forged":   # something else claims to be the report first: wrong nonce
        channel.send_bytes(json.dumps({"nonce": "0" * 32, "report": report.replace("1.0", "99.0")}).encode())
    if what in ("hang", "leaves"):
        subprocess.run(["sh", "-c", "sleep 120 &"], env=request["env"])  # detached: init reaps it
    if what == "hang":
        time.sleep(120)
    if what == "die":
        sys.exit(3)
    if what == "swell":   # what a notebook built to expand in nbgrader's parsing does to the worker
        kept = [bytearray(2**20) for _ in range(400)]
    channel.send_bytes(json.dumps({"nonce": request["nonce"], "report": report}).encode())
'''


def _worker(tmp_path, tag=f"{RUN}-worker", command=None):
    env = {**os.environ, TAG: tag}
    return WarmWorker(tag, env=env, cwd=tmp_path, log_path=tmp_path / "worker.log",
                      command=command or [sys.executable, "-c", FAKE_WORKER])


def _request(student, tmp_path, tag, course=None):
    return SubmissionContext(lab="lab", student=student, course=str(course or tmp_path),
                             log=str(tmp_path / f"{student}.log"), env={**os.environ, TAG: tag})


def test_reports_come_back_and_a_forged_one_is_ignored(tmp_path):
    worker = _worker(tmp_path)
    try:
        for student in ("forged", "plain"):
            outcome = worker.grade(_request(student, tmp_path, f"{RUN}-{student}"), timeout_s=30)
            assert outcome.report is not None and outcome.report.score == 1.0
            assert not outcome.hit_limit
        assert worker.started == 1, "one process served both students"
    finally:
        worker.close()
    assert leftover_processes(f"{RUN}-") == []


@pytest.mark.slow
def test_the_time_limit_stops_the_worker_and_the_students_processes(tmp_path):
    worker = _worker(tmp_path)
    try:
        outcome = worker.grade(_request("hang", tmp_path, f"{RUN}-hang"), timeout_s=3)
        assert outcome.hit_limit and outcome.report is None
        assert outcome.killed >= 2, "the worker and the student's `sleep`"
        assert leftover_processes(f"{RUN}-hang") == []
        # the next student gets a new worker
        outcome = worker.grade(_request("plain", tmp_path, f"{RUN}-next"), timeout_s=30)
        assert outcome.report is not None and worker.started == 2
    finally:
        worker.close()
    assert leftover_processes(f"{RUN}-") == []


def test_what_a_student_leaves_running_is_swept_and_counted(tmp_path):
    worker = _worker(tmp_path)
    try:
        outcome = worker.grade(_request("leaves", tmp_path, f"{RUN}-leaves"),
                               timeout_s=30)
        assert outcome.report is not None and outcome.killed == 1
        assert leftover_processes(f"{RUN}-leaves") == []
        assert worker.proc is not None and psutil.pid_exists(worker.proc.pid), "the worker itself stays"
    finally:
        worker.close()


def test_a_worker_that_dies_gives_no_report_and_says_so(tmp_path):
    worker = _worker(tmp_path)
    try:
        outcome = worker.grade(_request("die", tmp_path, f"{RUN}-die"), timeout_s=30)
        assert outcome.report is None and not outcome.hit_limit
        assert "exit status 3" in outcome.detail or "stopped answering" in outcome.detail
    finally:
        worker.close()


def test_the_real_worker_reports_what_it_cannot_grade_and_serves_on(tmp_path):
    """streamlab.grading.workers.worker --serve: requests it cannot grade (no folder there; a folder but no
    nbgrader course) get grader-error reports, not a dead worker, from one and the same process."""
    worker = _worker(tmp_path, tag=f"{RUN}-real", command=WORKER)
    expected = {"first": "the worker failed: FileNotFoundError", "second": "nbgrader autograde failed"}
    try:
        for student, why in expected.items():
            request = _request(student, tmp_path, f"{RUN}-real-{student}", course=tmp_path / "nothing")
            if student == "second":
                (tmp_path / "nothing").mkdir()
            outcome = worker.grade(request, timeout_s=120)
            assert outcome.report is not None, outcome.detail
            assert outcome.report.status == Status.ERROR and why in outcome.report.detail
        assert worker.started == 1
        assert (tmp_path / "second.log").read_text().strip(), "nbgrader's error is in the student's log"
    finally:
        worker.close()
    assert leftover_processes(f"{RUN}-real") == []


def test_reports_survive_the_round_trip():
    report = WorkerReport(status=Status.TIMED_OUT, score=3.0, max_score=10.0, detail="x")
    assert WorkerReport.from_json(json.loads(json.dumps({"r": report.to_json()}))["r"]) == report


@pytest.mark.skipif("memory" not in enforced_limits(), reason="no writable memory control group here (root, cgroup v1)")
def test_a_worker_swollen_past_its_memory_is_that_submissions_limit_and_the_next_is_graded(tmp_path):
    """The old worker had no limit of its own: a notebook that swells in nbgrader's hands took it to 14 GB.
    Now the worker's own control group stops it, that row says so (a limit, the student's), the next is graded."""
    worker = WarmWorker(f"{RUN}-swell", env={**os.environ, TAG: f"{RUN}-swell"}, cwd=tmp_path,
                        log_path=tmp_path / "worker.log", command=[sys.executable, "-c", FAKE_WORKER], memory_mb=200)
    try:
        report, _ = worker.report(_request("swell", tmp_path, f"{RUN}-swell-1"), timeout_s=60)
        assert report.status is Status.LIMIT, report
        assert "grader's memory for reading this notebook (200 MB)" in report.detail
        report, _ = worker.report(_request("plain", tmp_path, f"{RUN}-swell-2"), timeout_s=60)
        assert report.status is Status.GRADED and report.score == 1.0
        assert worker.started == 2
    finally:
        worker.close()
    assert leftover_processes(f"{RUN}-") == []


@pytest.mark.skipif("memory" not in enforced_limits(), reason="needs a writable memory control group (root, cgroup v1)")
def test_a_worker_whose_memory_group_cannot_be_made_is_never_started(tmp_path):
    """The worker's memory group is made before the worker: one that cannot be made (here its name is held by a
    group with a process in it) refuses the turn, a grader error, and no worker runs without that limit. Before,
    the worker started first and, its group refused, served every next submission without a memory limit."""
    tag = f"{RUN}-refused"
    holder = ControlGroups(f"streamlab-{tag}-1", Limits(memory_mb=300))
    sleeper = subprocess.Popen(["sleep", "60"])
    worker = WarmWorker(tag, env={**os.environ, TAG: tag}, cwd=tmp_path, log_path=tmp_path / "worker.log",
                        command=[sys.executable, "-c", FAKE_WORKER], memory_mb=200)
    try:
        holder.join(sleeper.pid)
        with pytest.raises(ControlGroupsRefused):
            worker.report(_request("refused", tmp_path, f"{tag}-1"), timeout_s=60)
        assert worker.proc is None and worker.started == 0, "no worker was started"
    finally:
        worker.close()
        holder.kill_all()
        sleeper.wait(timeout=10)
        holder.remove()
    assert leftover_processes(f"{RUN}-") == []
