"""streamlab.lessons.runs: a query's run to a known end survives a Python worker that starts too late."""
from __future__ import annotations

import stat
import sys

import pytest

import streamlab as sl
from streamlab.lessons.runs import worker_did_not_start
from streamlab.stack.session import STATE_STORES


def _slow_python(folder, seconds: int):
    """A Python that, the first time only, takes ``seconds`` to start: a machine too busy to start Spark's
    Python worker within the 10 s Spark waits for it."""
    flag = folder / "started-once"
    script = folder / "slow-python"
    script.write_text(f"#!/bin/sh\nif [ ! -e {flag} ]; then touch {flag}; sleep {seconds}; fi\n"
                      f"exec {sys.executable} \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, flag


@pytest.mark.slow
def test_a_worker_that_starts_late_costs_a_restart_not_the_run(spark, tmp_path, capsys):
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor

    class Count(StatefulProcessor):
        def init(self, handle):
            self.seen = handle.getValueState("seen", "n LONG")

        def handleInputRows(self, key, rows, timerValues):
            n = (self.seen.get()[0] if self.seen.exists() else 0) + sum(1 for _ in rows)
            self.seen.update((n,))
            yield Row(path=key[0], n=n)

    topic = sl.new_topic("late-worker")
    sl.produce(topic, sl.access_log(40))
    script, flag = _slow_python(tmp_path, 12)
    context = spark.sparkContext
    saved = (context.pythonExec, spark.conf.get("spark.sql.streaming.stateStore.providerClass"))
    context.pythonExec = str(script)  # the workers of queries planned from now on
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", STATE_STORES["rocksdb"])
    try:
        counts = (sl.kafka_stream(topic, sl.ACCESS_LOG_SCHEMA).groupBy("path")
                  .transformWithState(statefulProcessor=Count(), outputStructType="path STRING, n LONG",
                                      outputMode="Update", timeMode="None"))
        run = sl.run_to_end(counts, output_mode="update", checkpoint=sl.new_checkpoint("late-worker"))
    finally:
        context.pythonExec, provider = saved
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", provider)
    assert flag.exists(), "the slow Python was never started: the test proves nothing"
    assert "restarts from its checkpoint, attempt 2" in capsys.readouterr().out
    expected = {}
    for event in sl.access_log(40):
        expected[event["path"]] = expected.get(event["path"], 0) + 1
    assert sl.latest(run.rows, "path", "n") == expected


def test_only_a_late_worker_is_restarted():
    assert worker_did_not_start(RuntimeError("[STREAM_FAILED] ... Python worker failed to connect back."))
    assert not worker_did_not_start(RuntimeError("[STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE] ..."))
