"""streamlab.lessons.m02_keyed_state: the seeded click and sensor streams, and state read back as tables."""
from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

import pandas as pd
import pytest

import streamlab as sl
from streamlab.lessons import m02_keyed_state as keyed_state


def _when(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


# ----------------------------------------------------------------------------- generators

def test_clicks_are_seeded_and_users_leave_for_good():
    events = sl.m02.clicks(80, seed=5)
    assert events == sl.m02.clicks(80, seed=5) and events != sl.m02.clicks(80, seed=6)
    assert [e["event_id"] for e in events] == [f"e{i:04d}" for i in range(80)]
    times = [_when(e["ts"]) for e in events]
    assert times == sorted(times) and len(set(times)) == len(times)
    per_user = Counter(e["user"] for e in events)
    # every user but the ones still browsing at the end made 2-6 clicks, and new users kept arriving
    assert len(per_user) > 10 and max(per_user.values()) <= 6
    assert set(e["page"] for e in events) <= set(keyed_state.PAGES)


def test_duplicates_are_exact_copies_sent_a_little_later():
    clean = sl.m02.clicks(60, seed=3)
    noisy = sl.m02.clicks(60, seed=3, duplicates=0.25)
    ids = [e["event_id"] for e in noisy]
    assert len(noisy) > len(clean) and sorted(set(ids)) == [e["event_id"] for e in clean]
    by_id = {e["event_id"]: e for e in clean}
    assert all(e == by_id[e["event_id"]] for e in noisy)
    first = {}
    for i, e in enumerate(noisy):
        first.setdefault(e["event_id"], i)
        assert i - first[e["event_id"]] <= 8, "a copy arrives within a few records of the original"


def test_resent_clicks_are_later_sends_of_the_same_click_in_the_order_of_sending():
    clean = sl.m02.clicks(60, seed=52)
    sends = sl.m02.clicks(60, seed=52, resent=0.3, resent_after_s=(10, 40))
    assert sends == sl.m02.clicks(60, seed=52, resent=0.3, resent_after_s=(10, 40))
    times = [_when(s["ts"]) for s in sends]
    assert times == sorted(times), "in the order of sending"
    first = {e["event_id"]: e for e in clean}
    again = [s for s in sends if s != first[s["event_id"]]]
    assert len(sends) == len(clean) + len(again) and 10 <= len(again) <= 30
    for send in again:
        original = first[send["event_id"]]
        assert {k: v for k, v in send.items() if k != "ts"} == {k: v for k, v in original.items() if k != "ts"}
        assert 10 <= (_when(send["ts"]) - _when(original["ts"])).total_seconds() <= 40


def test_sensor_readings_flag_their_spikes():
    readings = sl.m02.sensor_readings(60, seed=3)
    assert readings == sl.m02.sensor_readings(60, seed=3)
    level = {"s1": 20, "s2": 50, "s3": 80}
    spikes = [r for r in readings if r["spike"]]
    assert spikes, "this seed has spikes"
    for r in readings:
        assert abs(r["value"] - level[r["sensor"]]) > 15 if r["spike"] else abs(r["value"] - level[r["sensor"]]) < 10
    seen = Counter()
    for r in readings:
        assert not (r["spike"] and seen[r["sensor"]] < 3), "no spike among a sensor's first three readings"
        seen[r["sensor"]] += 1


def test_sensor_readings_with_silences_have_gaps_one_sensor_at_a_time():
    assert sl.m02.sensor_readings(80, seed=4, silences=0.0) == sl.m02.sensor_readings(80, seed=4)
    readings = sl.m02.sensor_readings(200, seed=3, silences=0.04)
    assert readings == sl.m02.sensor_readings(200, seed=3, silences=0.04) and len(readings) == 200
    times = [_when(r["ts"]) for r in readings]
    assert times == sorted(times) and len(set(times)) == len(times), "one reading a tick at most, in order"
    last, silences = {}, []
    for r, t in zip(readings, times):
        gap = (t - last[r["sensor"]]).total_seconds() if r["sensor"] in last else 0
        assert gap <= 10 or 40 <= gap <= 80 + 10, f"{r['sensor']}: a gap of {gap} s is neither a reading nor a silence"
        if gap > 10:
            silences.append((r["sensor"], t - timedelta(seconds=gap), t))
        last[r["sensor"]] = t
    assert len(silences) >= 2 and len({s for s, _, _ in silences}) < len(silences), "a sensor falls silent twice"
    for sensor, start, end in silences:   # the others kept sending: the stream never stops
        others = [t for r, t in zip(readings, times) if r["sensor"] != sensor and start < t < end]
        assert max(b - a for a, b in zip([start] + others, others + [end])).total_seconds() <= 10


# ----------------------------------------------------------------------------- progress, without Spark

def _progress(batch, rows):
    return {"batchId": batch, "stateOperators": [{"numRowsTotal": rows}]}


def test_state_rows_per_batch_lines_up_runs_by_batch():
    class FakeRun:
        progresses = [_progress(0, 3), _progress(1, 5), _progress(2, 8)]

    table = sl.m02.state_rows_per_batch({"grows": FakeRun(), "flat": [_progress(0, 3), _progress(1, 3)],
                                     "stateless": [{"batchId": 0, "stateOperators": []}]})
    assert table.index.tolist() == [0, 1, 2] and table.index.name == "batch"
    assert table["grows"].tolist() == [3, 5, 8]
    assert table["flat"].tolist()[:2] == [3, 3] and pd.isna(table["flat"].iloc[2])
    assert table["stateless"].isna().all()


def test_plot_state_rows_draws_one_line_per_run():
    import matplotlib

    matplotlib.use("Agg")
    ax = sl.m02.plot_state_rows({"a": [_progress(0, 1), _progress(1, 2)], "b": [_progress(0, 1), _progress(1, 1)]})
    assert [line.get_label() for line in ax.get_lines()] == ["a", "b"]
    assert list(ax.get_lines()[0].get_ydata()) == [1.0, 2.0]


def test_state_variable_flattens_a_ttl_value(monkeypatch):
    """A variable with a TTL comes from the state reader as value={fields} plus ttlExpirationMs."""
    raw = pd.DataFrame({"user": ["b", "a"], "value": [{"count": 2}, {"count": 1}],
                        "ttlExpirationMs": [1767258000000, 1767258001000], "partition_id": [1, 0]})
    monkeypatch.setattr(sl.Checkpoint, "state_table", lambda self, spark=None, **options: raw.copy())
    table = sl.m02.state_variable(sl.Checkpoint("/nowhere"), "count", spark=object())
    assert table.columns.tolist() == ["user", "count", "ttl_expires_at", "partition_id"]
    assert table["user"].tolist() == ["a", "b"] and table["count"].tolist() == [1, 2]
    assert table["ttl_expires_at"].iloc[0] == pd.Timestamp("2026-01-01T09:00:01Z")


def test_dedup_summary_says_whether_each_id_came_out_once():
    sent = [{"event_id": e} for e in ("a", "b", "b", "c")]
    runs = {"right": sl.Run(pd.DataFrame({"event_id": ["c", "a", "b"]}), None, [_progress(0, 3), _progress(1, 1)]),
            "twice": sl.Run(pd.DataFrame({"event_id": ["a", "b", "b", "c"]}), None, [_progress(0, 3)]),
            "lost": sl.Run(pd.DataFrame({"event_id": ["a"]}), None, [])}
    table = sl.m02.dedup_summary(runs, sent)
    assert table.index.tolist() == ["right", "twice", "lost"]
    assert table["rows out"].tolist() == [3, 4, 1]
    assert table["each id once"].tolist() == [True, False, False]
    assert table.loc["right", "state rows at the end"] == 1 and table.loc["twice", "state rows at the end"] == 3
    assert pd.isna(table.loc["lost", "state rows at the end"])


def test_alerts_vs_spikes_matches_alerts_to_injected_spikes():
    readings = sl.m02.sensor_readings(60, seed=3)
    spikes = [(r["sensor"], r["value"]) for r in readings if r["spike"]]
    alerts = pd.DataFrame({"sensor": [spikes[0][0], "s9"], "value": [spikes[0][1], 1.0], "batch_id": [0, 2]})
    summary = sl.m02.alerts_vs_spikes(alerts, readings)
    assert summary.to_dict() == {"alerts": 2, "micro-batches with alerts": 2, "spikes injected": len(spikes),
                                 "alerts that are spikes": 1}
    assert sl.m02.alerts_vs_spikes(alerts.iloc[:0], readings)["alerts that are spikes"] == 0


class _FakeConf(dict):
    def get(self, key, default=None):
        return super().get(key, default)

    def set(self, key, value):
        self[key] = value


class _FakeQuery:
    stopped = False

    def stop(self):
        self.stopped = True


class _FakeWriter:
    """What sl.m02.running calls on frame.writeStream, recorded."""

    def __init__(self, session, query):
        self.session, self.query, self.calls = session, query, {}

    def outputMode(self, mode):
        self.calls["outputMode"] = mode
        return self

    def foreachBatch(self, sink):
        self.calls["foreachBatch"] = sink
        return self

    def option(self, key, value):
        self.calls[key] = value
        return self

    def trigger(self, **kwargs):
        self.calls["trigger"] = kwargs
        return self

    def start(self):
        self.calls["no-data batches at start"] = self.session.conf.get("spark.sql.streaming.noDataMicroBatches.enabled")
        return self.query


def test_running_starts_on_the_clock_and_always_stops():
    from types import SimpleNamespace

    session = SimpleNamespace(conf=_FakeConf({"spark.sql.streaming.noDataMicroBatches.enabled": "true"}))
    query, out = _FakeQuery(), sl.BatchCollector()
    writer = _FakeWriter(session, query)
    frame = SimpleNamespace(sparkSession=session, writeStream=writer)
    with sl.m02.running(frame, sl.Checkpoint("/tmp/some-ckpt"), output=out, every="2 seconds") as started:
        assert started is query and not query.stopped
    assert query.stopped
    assert writer.calls == {"outputMode": "update", "foreachBatch": out, "checkpointLocation": "/tmp/some-ckpt",
                            "trigger": {"processingTime": "2 seconds"}, "no-data batches at start": "false"}
    assert session.conf["spark.sql.streaming.noDataMicroBatches.enabled"] == "true"   # put back

    query2 = _FakeQuery()
    frame2 = SimpleNamespace(sparkSession=session, writeStream=_FakeWriter(session, query2))
    with pytest.raises(RuntimeError, match="in the block"):
        with sl.m02.running(frame2, "/tmp/other-ckpt"):
            raise RuntimeError("in the block")
    assert query2.stopped and session.conf["spark.sql.streaming.noDataMicroBatches.enabled"] == "true"


# ----------------------------------------------------------------------------- a real query

@pytest.mark.notebooks
def test_value_list_map_state_and_timers_read_back(spark):
    from pyspark.sql import Row
    from pyspark.sql import functions as F
    from pyspark.sql.streaming import StatefulProcessor

    class Everything(StatefulProcessor):
        def init(self, handle):
            self.handle = handle
            self.count = handle.getValueState("count", "clicks LONG")
            self.pages = handle.getListState("pages", "page STRING")
            self.per_page = handle.getMapState("per_page", "page STRING", "visits LONG")

        def handleInputRows(self, key, rows, timerValues):
            n = self.count.get()[0] if self.count.exists() else 0
            last = 0
            for row in rows:
                n += 1
                last = max(last, row.ts_ms)
                self.pages.appendValue((row.page,))
                old = self.per_page.getValue((row.page,))
                self.per_page.updateValue((row.page,), ((old[0] if old else 0) + 1,))
            self.count.update((n,))
            for timer in list(self.handle.listTimers()):
                self.handle.deleteTimer(timer)
            self.handle.registerTimer(last + 600_000)  # never fires here
            return iter([])

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            yield Row(user=key[0], clicks=self.count.get()[0])

    spark = sl.spark(state_store="rocksdb")
    try:
        events = sl.m02.clicks(20, seed=9)
        topic = sl.new_topic("keyed-state-test", partitions=1)
        sl.produce(topic, events)
        stream = (sl.kafka_stream(topic, sl.m02.CLICK_SCHEMA, spark=spark).withWatermark("ts", "5 seconds")
                  .withColumn("ts_ms", F.unix_millis("ts")))
        query = stream.groupBy("user").transformWithState(
            statefulProcessor=Everything(), outputStructType="user STRING, clicks LONG",
            outputMode="Update", timeMode="EventTime")
        ckpt = sl.new_checkpoint("keyed-state-test")
        sl.run_to_end(query, output_mode="update", checkpoint=ckpt, timeout_s=180)

        variables = sl.m02.state_variables(ckpt, spark)
        assert set(zip(variables["variable"], variables["type"])) >= {
            ("count", "ValueState"), ("pages", "ListState"), ("per_page", "MapState")}
        assert set(variables["time_mode"]) == {"EventTime"}

        per_user = Counter(e["user"] for e in events)
        count = sl.m02.state_variable(ckpt, "count", spark)
        assert count.columns.tolist() == ["user", "clicks", "partition_id"]
        assert dict(zip(count["user"], count["clicks"])) == per_user
        assert count["user"].tolist() == sorted(per_user)

        pages = sl.m02.state_variable(ckpt, "pages", spark)
        assert sorted(zip(pages["user"], pages["page"])) == sorted((e["user"], e["page"]) for e in events)

        per_page = sl.m02.state_variable(ckpt, "per_page", spark)
        assert {(u, p): v for u, p, v in zip(per_page["user"], per_page["page"], per_page["visits"])} == \
            Counter((e["user"], e["page"]) for e in events)

        last = {}
        for e in events:
            last[e["user"]] = _when(e["ts"])
        registered = sl.m02.timers(ckpt, spark)
        assert registered.columns.tolist() == ["user", "expires_at", "partition_id"]
        assert {u: t.to_pydatetime() for u, t in zip(registered["user"], registered["expires_at"])} == \
            {u: t + pd.Timedelta(minutes=10) for u, t in last.items()}
    finally:
        sl.spark(state_store="hdfs")
