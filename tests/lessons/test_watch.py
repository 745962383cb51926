"""sl.watch: the state of a query, batch by batch.

Fast tests drive the view with progress reports and states given by hand. The heavy ones (marker
`notebooks`, with the session's Spark) run seeded queries and hold the view's numbers against what the
engine says by other means: the change feed of the state (``readChangeFeed``), the progress events, the state
reader's registered timers, and the query's own output.
"""
from __future__ import annotations

import base64
import json

import pandas as pd
import pytest

import streamlab as sl
from streamlab.lessons.watch import StateWatch


class Stopped:
    """A query that has run: its progress reports, as Spark keeps them."""

    name = "counts"
    isActive = False

    def __init__(self, progresses):
        self.recentProgress = progresses


def _progress(batch, rows, watermark=None, idle=False):
    report = {"batchId": batch, "numInputRows": rows, "durationMs": {"triggerExecution": 5},
              "stateOperators": [{"numRowsTotal": 2, "memoryUsedBytes": 100}]}
    if not idle:
        report["durationMs"]["addBatch"] = 3
    if watermark:
        report["eventTime"] = {"watermark": watermark, "max": "2026-01-01T09:00:30.000Z",
                               "min": "2026-01-01T09:00:00.000Z"}
    return report


def _watched(progresses, states):
    view = StateWatch(Stopped(progresses), spark=object(), key="ana", show=False)
    view.checkpoint = object()  # read through _state_as_of below
    view._state_as_of = lambda batch: states[batch]
    view._follow()
    return view


def test_added_updated_removed_are_the_difference_between_batches():
    states = {0: {"ana": 1, "ben": 1}, 1: {"ana": 2, "ben": 1, "cai": 1}, 2: {"cai": 1}}
    view = _watched([_progress(0, 2), _progress(1, 2), _progress(2, 0)], states)
    table = view.table()
    assert table[["state_keys", "added", "updated", "removed"]].values.tolist() == [[2, 2, 0, 0], [3, 1, 1, 0],
                                                                                    [1, 0, 0, 2]]
    assert view.history()["value"].tolist() == [1, 2, None]


def test_idle_reports_and_repeated_reports_are_not_batches():
    states = {0: {"ana": 1}, 1: {"ana": 1}}
    view = _watched([_progress(0, 1), _progress(1, 0, idle=True), _progress(0, 1), _progress(1, 0)], states)
    assert view.table().index.tolist() == [0, 1]


def test_the_first_watermark_is_no_watermark():
    states = {0: {}, 1: {}}
    view = _watched([_progress(0, 5, "1970-01-01T00:00:00.000Z"), _progress(1, 5, "2026-01-01T09:00:20.000Z")],
                    states)
    assert view.table()["watermark"].isna().tolist() == [True, False]


def test_the_view_renders_as_a_picture_with_the_keys_history_and_escapes_names():
    states = {0: {"ana": 1}, 1: {"ana": 2}}
    view = _watched([_progress(0, 1, "2026-01-01T09:00:10.000Z"), _progress(1, 1, "2026-01-01T09:00:20.000Z")],
                    states)
    view.name = "<b>counts</b>"
    bundle, metadata = view._repr_mimebundle_()
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    assert 'alt="state watch: &lt;b&gt;counts&lt;/b&gt;"' in bundle["text/html"]
    assert "after each batch" in bundle["text/html"] and metadata["streamlab"]["view"] == "state-watch"
    assert "stopped" in repr(view)


def test_without_a_checkpoint_only_the_progress_is_shown():
    view = StateWatch(Stopped([_progress(0, 3)]), spark=object(), show=False)
    view._follow()
    row = view.table().iloc[0]
    assert row["input_rows"] == 3 and row["state_rows"] == 2 and pd.isna(row["state_keys"])
    assert view.png().startswith(b"\x89PNG")


# ----------------------------------------------------------------------------- real queries

def _visits_processor():
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor

    class Visits(StatefulProcessor):
        """Lesson 02b's visits: clicks per user, output and cleared 30 s of event time after the last click."""

        def init(self, handle):
            self.handle = handle
            self.visit = handle.getValueState("visit", "clicks LONG, last_ms LONG")

        def handleInputRows(self, key, rows, timerValues):
            clicks, last = self.visit.get() if self.visit.exists() else (0, 0)
            for row in rows:
                clicks, last = clicks + 1, max(last, row.ts_ms)
            self.visit.update((clicks, last))
            for timer in list(self.handle.listTimers()):
                self.handle.deleteTimer(timer)
            self.handle.registerTimer(last + 30_000)
            return iter([])

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            clicks, _ = self.visit.get()
            self.visit.clear()
            yield Row(user=key[0], clicks=clicks)

    return Visits()


@pytest.mark.notebooks
def test_a_timers_query_watched_batch_by_batch(spark):
    from pyspark.sql import functions as F

    provider = "spark.sql.streaming.stateStore.providerClass"
    session = sl.spark(state_store="rocksdb")
    try:
        clicks = sl.m02.clicks(60, seed=7)
        topic = sl.new_topic("watch-visits", partitions=2)
        sl.produce(topic, clicks, key="user")
        stream = (sl.kafka_stream(topic, sl.m02.CLICK_SCHEMA, spark=session, maxOffsetsPerTrigger=15)
                  .withWatermark("ts", "10 seconds").withColumn("ts_ms", F.unix_millis("ts")))
        query = stream.groupBy("user").transformWithState(
            statefulProcessor=_visits_processor(), outputStructType="user STRING, clicks LONG",
            outputMode="Update", timeMode="EventTime")
        ckpt = sl.new_checkpoint("watch-visits")
        user = clicks[0]["user"]
        run = sl.run_to_end(query, output_mode="update", checkpoint=ckpt, watch_key=user, timeout_s=180)
        # Watching read the state from a thread of its own: the learner's session keeps its state store.
        assert session.conf.get(provider).endswith("RocksDBStateStoreProvider")

        view, table = run.watch, run.watch.table()
        reports = {p["batchId"]: p for p in run.progresses if "addBatch" in p["durationMs"]}
        assert table.index.tolist() == sorted(reports) and view.state_var == "visit"
        for batch, row in table.iterrows():
            report = reports[batch]
            assert row["input_rows"] == report["numInputRows"]
            assert row["state_keys"] == report["stateOperators"][0]["numRowsTotal"]   # a value state: a row a key
            assert row["output_rows"] == (run.rows["batch_id"] == batch).sum()
            stated = report.get("eventTime", {}).get("watermark", "1970-01-01T00:00:00.000Z")
            expected = None if stated.startswith("1970") else pd.Timestamp(stated)
            assert pd.isna(row["watermark"]) if expected is None else row["watermark"] == expected
            pending = sl.m02.timers(ckpt, session, batchId=int(batch))
            assert row["timers_pending"] == len(pending)
        # Every visit closed by a timer left the state: what was removed is what was output.
        assert table["removed"].sum() == len(run.rows) and table["added"].sum() == len(set(c["user"] for c in clicks))
        # The key's history is the state as of each batch, as the state reader gives it.
        for batch, value in view.history()["value"].items():
            held = sl.m02.state_variable(ckpt, "visit", session, batchId=int(batch))
            mine = held[held["user"] == user]
            assert (value is None) == mine.empty
            if value is not None:
                assert value == (mine["clicks"].iloc[0], mine["last_ms"].iloc[0])
    finally:
        sl.spark(state_store="hdfs")


@pytest.mark.notebooks
def test_keys_added_updated_and_removed_agree_with_the_change_feed(spark):
    """A windowed count on the HDFS provider, whose checkpoint has a change feed. Per batch, the keys the view
    saw removed are the feed's deletes, and the keys it saw added or updated are the feed's updates to a new
    value of keys not deleted in that batch (the feed also records a window's last write before its eviction:
    the view shows the net change)."""
    from pyspark.sql import functions as F

    sl.spark(state_store="hdfs")
    events = sl.timed_events(60, seed=3)
    topic = sl.new_topic("watch-windows", partitions=1)
    sl.produce(topic, events)
    counts = (sl.kafka_stream(topic, sl.TIMED_EVENT_SCHEMA, spark=spark, maxOffsetsPerTrigger=10)
              .withWatermark("event_time", "5 seconds").groupBy(F.window("event_time", "10 seconds")).count())
    ckpt = sl.new_checkpoint("watch-windows")
    run = sl.run_to_end(counts, output_mode="append", checkpoint=ckpt, watch=True, timeout_s=180)
    table = run.watch.table()
    feed = ckpt.state(spark, readChangeFeed=True, changeStartBatchId=0).toPandas()
    assert table["removed"].sum() > 0, "windows should have left the state as the watermark passed them"
    held: dict[str, str] = {}
    for batch, row in table.iterrows():
        changes = feed[feed["batch_id"] == batch]
        keys, values = changes["key"].map(str), changes["value"].map(str)
        deleted = set(keys[changes["change_type"] == "delete"])
        written = {k: v for k, v, kind in zip(keys, values, changes["change_type"])
                   if kind == "update" and k not in deleted}
        assert row["removed"] == len(deleted), batch
        assert row["added"] + row["updated"] == sum(1 for k, v in written.items() if held.get(k) != v), batch
        held.update(written)
        for key in deleted:
            held.pop(key, None)


def test_a_restarted_query_starts_from_the_state_it_restored():
    states = {2: {"/api/a": 3, "/api/b": 1}, 3: {"/api/a": 4, "/api/b": 1, "/api/c": 1}}
    view = _watched([_progress(3, 2)], states)
    assert view.table()[["added", "updated", "removed"]].values.tolist() == [[1, 1, 0]]


def _write_checkpoint(folder, planned, committed):
    for name in ("offsets", "commits"):
        (folder / name).mkdir(parents=True)
    for batch, (watermark_ms, end) in planned.items():
        meta = {"batchWatermarkMs": watermark_ms, "batchTimestampMs": 0, "conf": {}}
        (folder / "offsets" / str(batch)).write_text(f'v1\n{json.dumps(meta)}\n{{"clicks": {{"0": {end}}}}}\n')
    for batch in committed:
        (folder / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    (folder / "sources" / "0").mkdir(parents=True)
    (folder / "sources" / "0" / "0").write_bytes(b'\x00v1\n{"clicks":{"0":0}}')   # where the source started


def test_a_checkpoint_alone_is_drawn_batch_by_batch_up_to_its_last_commit(tmp_path, monkeypatch):
    """What a crash left: batches 0-2 committed, batch 3 planned only (its offsets written, no commit)."""
    _write_checkpoint(tmp_path / "visits-3f2a1b", {0: (0, 10), 1: (5_000, 25), 2: (12_000, 40), 3: (20_000, 55)},
                      committed=[0, 1, 2])
    states = {0: {"ana": 1}, 1: {"ana": 2, "ben": 1}, 2: {"ben": 1}}
    monkeypatch.setattr(StateWatch, "_state_as_of", lambda self, batch: states[batch])
    view = sl.watch(str(tmp_path / "visits-3f2a1b"), spark=object(), show=False)
    table = view.table()
    assert table.index.tolist() == [0, 1, 2] and view.name == "visits"
    assert table["input_rows"].tolist() == [10, 15, 15]            # the records each batch's offsets span
    assert table["watermark"].isna().tolist() == [True, False, False]
    assert table["watermark"].iloc[2] == pd.Timestamp(12_000, unit="ms", tz="UTC")
    assert table[["added", "removed"]].values.tolist() == [[1, 0], [1, 0], [0, 1]]
    assert "stopped" in repr(view)
    assert view.png().startswith(b"\x89PNG")   # batch 0 has no input count: drawn all the same
