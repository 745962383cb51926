"""Spark's real-time mode (4.1+) tried on a query: does it run, what does it output, and how soon?

Real-time mode (``trigger(realTime="5 seconds")``) runs a long batch through which records flow one by one;
the duration is how often it checkpoints. Spark 4.1 ran stateless queries so; 4.3 runs stateful ones too
(aggregations and ``dropDuplicates``; ``transformWithState`` from Scala and Java only) on two conditions it
checks before it starts:

* the state lives in RocksDB (the session's ``spark.sql.streaming.stateStore.providerClass``; the course's default
  is the HDFS provider, refused with ``STREAMING_REAL_TIME_MODE.SQL_CONFIGURATION_NOT_SUPPORTED``);
* every task of every stage runs at once (the stages are pipelined: the shuffle's readers do not wait for its
  writers to finish), so the cluster needs a free slot per task: source partitions + shuffle partitions. Short
  of them: ``CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT``. On ``local[2]`` that is one source partition and one
  shuffle partition.

``REAL_TIME_SETTINGS`` are those settings, and ``real_time_settings()`` sets them for a block. Lesson 04 uses
``try_real_time`` to show what is refused and ``latency`` to measure a record's way through a stateful count in
both modes.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime

from ...stack.kafka import bootstrap_servers, delete_topic, end_offsets, new_topic, read_topic
from ...stack.session import STATE_STORES, session_settings
from ...stack.session import spark as course_spark
from ..checkpoint import new_checkpoint
from ..events import ACCESS_LOG_SCHEMA
from ..runs import error_class
from ..streams import kafka_stream

ROCKSDB = STATE_STORES["rocksdb"]
REAL_TIME_SETTINGS = {"spark.sql.streaming.stateStore.providerClass": ROCKSDB, "spark.sql.shuffle.partitions": "1"}


def real_time_settings(spark):
    """A block inside which the session runs stateful queries as real-time mode needs (``REAL_TIME_SETTINGS``);
    after it, the settings are what they were."""
    return session_settings(spark, REAL_TIME_SETTINGS)


def _writer(frame, out_topic: str, checkpoint, *, real_time: str | None):
    writer = (frame.selectExpr("to_json(struct(*)) AS value").writeStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap_servers()).option("topic", out_topic)
              .option("checkpointLocation", checkpoint.path).outputMode("update"))
    return writer.trigger(realTime=real_time) if real_time else writer


def try_real_time(frame, out_topic: str, *, seconds: float = 15, batch: str = "5 seconds") -> str:
    """Run ``frame`` in real-time mode into the Kafka topic ``out_topic`` for at most ``seconds``; say what happened.

    Returns "refused: <error condition>" when Spark will not run it, or "ran: N records out after X s" once the
    query has written something and a real-time batch has been committed (then it is stopped), or "ran: nothing
    out within S s". Bounded: the query is always stopped before this returns.
    """
    checkpoint = new_checkpoint("real-time")
    started = time.monotonic()
    try:
        query = _writer(frame, out_topic, checkpoint, real_time=batch).start()
    except Exception as refusal:  # some plans are refused before the query starts
        return f"refused: {error_class(refusal)}"
    try:
        while time.monotonic() - started < seconds:
            if not query.isActive:
                error = query.exception()
                return f"refused: {error_class(error)}" if error else "stopped by itself"
            written = sum(end_offsets(out_topic).values())
            if written and checkpoint.last_committed_batch() is not None:
                return f"ran: {written} records out after {time.monotonic() - started:.1f} s"
            time.sleep(0.25)
        return f"ran: nothing out within {seconds:g} s"
    finally:
        query.stop()


def _request(path: str) -> bytes:
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return json.dumps({"method": "GET", "path": path, "ts": now}).encode()


def _wait_for_paths(topic: str, paths: set[str], query, timeout_s: float) -> dict[str, int]:
    """{path: Kafka timestamp of the first output record naming it}, once every path in ``paths`` is out."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen: dict[str, int] = {}
        for record in read_topic(topic, limit=100_000):
            value = record["value"]
            if isinstance(value, dict) and value.get("path") in paths:
                seen.setdefault(value["path"], record["timestamp"])
        if set(seen) == paths:
            return seen
        if not query.isActive:
            raise RuntimeError(f"the query stopped: {error_class(query.exception())}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(paths) - len(seen)} of {len(paths)} records not out within {timeout_s:g} s")
        time.sleep(0.1)


def latency(build: Callable, *, real_time: bool, probes: int = 10, gap_s: float = 0.3, timeout_s: float = 90):
    """How long each of ``probes`` records takes from Kafka in to Kafka out through the query ``build(stream)``
    (``stream``: the access log read from a fresh one-partition topic; the query's output rows carry ``path``).

    ``real_time=True`` runs it in real-time mode (``trigger(realTime="5 seconds")``), else as micro-batches as
    fast as they go (the default trigger), both under ``real_time_settings``. After one record that warms the query
    up, the probes are sent ``gap_s`` apart, each with a path of its own; a probe's latency is the output record's
    Kafka timestamp minus its own (both stamped by their producers on this machine). Returns a DataFrame: probe,
    latency_ms; and, as ``.attrs["records_out"]``, how many records the query wrote in all."""
    import pandas as pd
    from kafka import KafkaProducer

    source, out = new_topic("latency-in", partitions=1), new_topic("latency-out", partitions=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers(), linger_ms=0)
    session = course_spark()
    try:
        with real_time_settings(session):
            frame = build(kafka_stream(source, ACCESS_LOG_SCHEMA, startingOffsets="earliest"))
            query = _writer(frame, out, new_checkpoint("latency"), real_time="5 seconds" if real_time else None).start()
        try:
            producer.send(source, _request("/warm-up")).get(timeout=30)
            _wait_for_paths(out, {"/warm-up"}, query, timeout_s)
            sent = {}
            for i in range(probes):
                path = f"/probe/{i}"
                sent[path] = producer.send(source, _request(path)).get(timeout=30).timestamp
                time.sleep(gap_s)
            out_at = _wait_for_paths(out, set(sent), query, timeout_s)
        finally:
            query.stop()
        result = pd.DataFrame({"probe": list(sent), "latency_ms": [out_at[p] - sent[p] for p in sent]})
        result.attrs["records_out"] = sum(end_offsets(out).values())
        return result
    finally:
        producer.close()
        for topic in (source, out):
            delete_topic(topic)
