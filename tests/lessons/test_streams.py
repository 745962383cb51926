"""streamlab.lessons.streams: topics as DataFrames, and a sink that keeps every micro-batch."""
from __future__ import annotations

import pytest

import streamlab as sl


class _Row(dict):
    def asDict(self, recursive=False):  # noqa: N802 - pyspark's Row API
        return dict(self)


class _Batch:
    def __init__(self, rows):
        self.rows = [_Row(r) for r in rows]

    def collect(self):
        return self.rows


def test_batch_collector_tags_rows_with_their_batch():
    collect = sl.BatchCollector()
    assert collect.frame().empty
    collect(_Batch([{"path": "/a", "count": 1}]), 0)
    collect(_Batch([{"path": "/a", "count": 2}, {"path": "/b", "count": 1}]), 1)
    frame = collect.frame()
    assert list(frame.columns) == ["batch_id", "path", "count"]
    assert frame.values.tolist() == [[0, "/a", 1], [1, "/a", 2], [1, "/b", 1]]
    collect.clear()
    assert collect.frame().empty


def test_kafka_table_parses_values_and_keeps_kafka_columns(spark):
    topic = sl.new_topic("streams", partitions=1)
    sl.produce(topic, sl.article_offset_reports())
    reports = sl.kafka_table(topic, sl.OFFSET_REPORT_SCHEMA, spark=spark)
    # Offset reports have a partition field of their own: Kafka's is renamed, nothing is ambiguous.
    assert reports.columns == ["consumer", "partition", "producer_offset", "consumer_offset", "ts",
                               "kafka_partition", "offset"]
    assert reports.count() == len(sl.article_offset_reports())
    raw = sl.kafka_table(topic, spark=spark)
    assert raw.columns == ["key", "value", "topic", "partition", "offset", "timestamp"]
    sl.delete_topic(topic)


@pytest.mark.slow
def test_run_to_end_sends_each_batch_to_its_output_topic_once(spark):
    """``output_topic=``: the topic holds every row the run kept, as Spark's ``to_json`` writes it (timestamps in
    the session's time zone), with its batch id; and the stateful operator ran once per batch, not once for the
    rows and again for the topic."""
    from pyspark.sql import functions as F

    events = [{"path": p, "ts": f"2026-01-01T09:00:0{i}Z"} for i, p in enumerate(["/a", "/b", "/a", "/a", "/c", "/b"])]
    source = sl.new_topic("collect-in", partitions=1)
    sl.produce(source, events)
    out = sl.new_topic("collect-out", partitions=1)
    counts = (sl.kafka_stream(source, "path STRING, ts TIMESTAMP", spark=spark, maxOffsetsPerTrigger=3)
              .groupBy("path").agg(F.count("*").alias("count"), F.max("ts").alias("latest")))
    run = sl.run_to_end(counts, output_mode="update", checkpoint=sl.new_checkpoint("collect"), output_topic=out)
    rows = [(b, p, c) for b, p, c in zip(run.rows["batch_id"], run.rows["path"], run.rows["count"])]
    assert sorted(rows) == [(0, "/a", 2), (0, "/b", 1), (1, "/a", 3), (1, "/b", 2), (1, "/c", 1)]
    sent = [r["value"] for r in sl.read_topic(out)]
    assert sorted((v["batch_id"], v["path"], v["count"]) for v in sent) == sorted(rows)
    assert {v["path"]: v["latest"] for v in sent if v["batch_id"] == 1} == {
        "/a": "2026-01-01T09:00:03.000Z", "/b": "2026-01-01T09:00:05.000Z", "/c": "2026-01-01T09:00:04.000Z"}
    updated = [p["stateOperators"][0]["numRowsUpdated"] for p in run.progresses if p["numInputRows"]]
    assert updated == [2, 3]
    for topic in (source, out):
        sl.delete_topic(topic)
