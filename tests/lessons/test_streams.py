"""streamlab.lessons.streams: topics as DataFrames, and a sink that keeps every micro-batch."""
from __future__ import annotations

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
