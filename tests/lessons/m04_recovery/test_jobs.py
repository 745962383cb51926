"""streamlab.lessons.m04_recovery: a streaming job in its own process, crashed on purpose, restarted, and cleaned up.

The quick tests use the rehearsal job ``streamlab.lessons.m04_recovery:tick`` (no Spark); the sinks are tested
with small in-memory batches against the real broker; the Spark job itself (a real SIGKILL
between the sink and the commit, then a restart) is marked ``notebooks`` (it starts two drivers).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter

import pandas as pd
import psutil
import pytest
from pyspark.sql import Row

import streamlab as sl
from streamlab.lessons.m04_recovery.jobs import JobFailed, StreamingJob


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _helper_pid(job: StreamingJob) -> int:
    return next(e["pid"] for e in job.events() if e["event"] == "helper")


def test_crash_at_kills_the_job_right_after_the_batch_and_leaves_nothing():
    job = StreamingJob("streamlab.lessons.m04_recovery:tick", batches=5, helper_process=True, timeout_s=60)
    crash = job.crash_at(batch=2)
    assert crash["exit_code"] == -signal.SIGKILL
    events = [(e["event"], e.get("batch")) for e in job.events() if e["event"] in ("sink", "frozen", "finished")]
    assert events == [("sink", 0), ("sink", 1), ("sink", 2), ("frozen", 2)]  # nothing after the crash point
    assert job.processes() == [] and not job.running
    assert not _alive(_helper_pid(job)), "the job's child process survived the kill"


def test_restart_runs_to_the_end_and_reports_per_run():
    job = StreamingJob("streamlab.lessons.m04_recovery:tick", batches=3, timeout_s=60)
    job.crash_at(batch=1)
    result = job.run_to_end()
    assert result["exit_code"] == 0 and result["run"] == 1 and result["batches"] == [0, 1, 2]
    assert job.sink_reports().values.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1], [1, 2]]
    assert job.exit_codes == [-signal.SIGKILL, 0]
    assert job.processes() == []


def test_a_batch_that_never_comes_times_out_and_kills_the_job():
    job = StreamingJob("streamlab.lessons.m04_recovery:tick", batches=2, helper_process=True, timeout_s=60)
    job.start(freeze_after_batch=1)
    job.wait_for_batch(1)  # frozen there: batch 7 will never come
    with pytest.raises(TimeoutError, match="did not reach its sink"):
        job.wait_for_batch(7, timeout_s=0.5)
    assert job.processes() == [] and not _alive(_helper_pid(job))


def test_a_failing_job_raises_with_its_log():
    job = StreamingJob("streamlab.lessons.m04_recovery:tick", batches=1, fail=True, timeout_s=60)
    with pytest.raises(JobFailed, match="failed, as asked"):
        job.run_to_end()
    with pytest.raises(JobFailed, match="ended"):
        job.start().wait_for_batch(5)


def test_a_notebook_function_is_refused():
    def local_job(ctx):
        pass

    with pytest.raises(ValueError, match="importable module"):
        StreamingJob(local_job)
    with pytest.raises(TypeError):
        StreamingJob("streamlab.lessons.m04_recovery:tick", not_json=object())


def test_a_job_whose_parent_dies_kills_itself():
    """SIGKILL the process that started a job (as when a notebook kernel dies): the job and its
    helper process go too, without anybody calling kill()."""
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from streamlab.lessons.m04_recovery.jobs import StreamingJob
        job = StreamingJob("streamlab.lessons.m04_recovery:tick", batches=3, helper_process=True, timeout_s=120)
        job.start(freeze_after_batch=0)
        job.wait_for_batch(0)
        helper = next(e["pid"] for e in job.events() if e["event"] == "helper")
        print(job.pid, helper, flush=True)
        time.sleep(300)
    """)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        job_pid, helper_pid = map(int, parent.stdout.readline().split())
        assert _alive(job_pid) and _alive(helper_pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 20
        while (_alive(job_pid) or _alive(helper_pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(job_pid) and not _alive(helper_pid)
    finally:
        if parent.poll() is None:
            parent.kill()


class _Batch:
    """Just enough of a DataFrame for a foreachBatch sink: columns, collect, persist."""

    def __init__(self, rows):
        self.rows = rows
        self.columns = list(rows[0].asDict()) if rows else []

    def collect(self):
        return self.rows


def test_sqlite_sink_replaces_a_replayed_batch(tmp_path):
    batch = _Batch([Row(path="/api/a", count=2), Row(path="/api/b", count=1)])
    idempotent = sl.m04.SqliteSink(tmp_path / "out.sqlite", "counts")
    appending = sl.m04.SqliteSink(tmp_path / "out.sqlite", "appended", idempotent=False)
    for _ in range(2):  # batch 4 written, then written again after a "crash"
        idempotent(batch, 4)
        appending(batch, 4)
    assert sorted(idempotent.frame().itertuples(index=False, name=None)) == [(4, "/api/a", 2), (4, "/api/b", 1)]
    assert len(appending.frame()) == 4


def test_transactional_sink_skips_a_committed_batch(kafka_bootstrap):
    out, batches = sl.new_topic("jobs-tx-out"), sl.new_topic("jobs-tx-batches", partitions=1)
    rows = _Batch([Row(path="/api/a", count=1)])

    def sink():  # a fresh sink each time: what a restarted driver has
        return sl.m04.TransactionalTopicSink(out, batches_topic=batches, transactional_id=f"{out}-tx")

    first = sink()
    first(rows, 0)
    first(rows, 1)
    first.close()
    again = sink()
    again(rows, 1)  # batch 1 replayed after a crash: recognised and skipped
    again(rows, 2)
    again.close()
    assert again.skipped == [1]
    assert sorted(r["value"]["batch_id"] for r in sl.m04.read_committed(out)) == [0, 1, 2]
    assert sl.m04.last_committed_batch(batches) == 2


def test_fail_after_batch_fails_once():
    seen = []
    crashing = sl.m04.fail_after_batch(lambda df, batch_id: seen.append(batch_id), batch=1)
    crashing(None, 0)
    with pytest.raises(sl.m04.InjectedCrash):
        crashing(None, 1)
    crashing(None, 1)
    assert seen == [0, 1, 1] and crashing.crashed()


@pytest.mark.notebooks
def test_spark_job_killed_before_its_commit_reruns_the_batch(spark):
    topic, out = sl.new_topic("jobs-requests"), sl.new_topic("jobs-out")
    events = sl.access_log(60, seed=5)
    sl.produce(topic, events, key="path")
    ckpt = sl.new_checkpoint("jobs-counts")
    job = StreamingJob("streamlab.lessons.m04_recovery:count_requests", topic=topic, checkpoint=ckpt.path,
                       out_topic=out, max_per_batch=20, timeout_s=240)
    job.crash_at(batch=1)
    assert job.processes() == []
    assert ckpt.commits()["batch"].tolist() == [0]          # batch 1 was planned ...
    assert sorted(set(ckpt.offsets()["batch"])) == [0, 1]    # ... and its offsets written
    planned = ckpt.offsets()
    job.run_to_end()
    assert job.processes() == []
    assert ckpt.offsets()[lambda f: f["batch"] <= 1].equals(planned)  # re-run with the same offsets
    rows = pd.DataFrame([r["value"] for r in sl.read_topic(out)])
    batch1 = rows[rows["batch_id"] == 1]
    assert len(batch1) == 2 * batch1["path"].nunique()          # the Kafka sink wrote batch 1 twice
    assert job.sink_reports().query("batch == 1")["run"].tolist() == [0, 1]
    assert sl.latest(rows, "path", "count") == dict(Counter(e["path"] for e in events))
    assert ckpt.state_dict(spark) == dict(Counter(e["path"] for e in events))


@pytest.mark.notebooks
def test_private_broker_stops_and_comes_back_with_its_topics(kafka_bootstrap):
    private = sl.m04.PrivateBroker()
    try:
        servers = private.start()
        assert servers != kafka_bootstrap and private.running()
        with private.as_default():
            topic = sl.new_topic("private", partitions=1)  # one partition: a defined order
            sl.produce(topic, [{"n": 1}, {"n": 2}])
        assert topic not in sl.list_topics()       # the shared broker never saw it
        private.stop()
        assert not private.running()
        assert private.start() == servers          # same port after a restart
        with private.as_default():
            assert [r["value"] for r in sl.read_topic(topic)] == [{"n": 1}, {"n": 2}]
    finally:
        private.close()
    assert not private.folder.exists()
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(private.folder) in " ".join(p.info["cmdline"] or [])]
