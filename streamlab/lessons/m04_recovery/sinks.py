"""Sinks that survive a crash: an idempotent SQLite sink keyed by ``batch_id``, and a transactional
Kafka sink that commits a batch's records together with the batch id (module 04)."""
from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

from ...stack.kafka import bootstrap_servers, decode_value
from ...stack.paths import data_dir


class SqliteSink:
    """An idempotent ``foreachBatch`` sink: each batch's rows go into a SQLite table together
    with their ``batch_id``, in ONE transaction that first deletes whatever that batch wrote
    before. A batch that Spark runs again after a crash replaces its own rows: no duplicates.

    ``SqliteSink(path, idempotent=False)`` only appends (at-least-once, like the Kafka sink).
    ``frame()`` reads the table back (pandas).
    """

    def __init__(self, path: str | Path, table: str = "output", *, idempotent: bool = True):
        self.path, self.table, self.idempotent = str(path), table, idempotent

    def __call__(self, batch_df, batch_id: int) -> None:
        import sqlite3

        rows = [row.asDict(recursive=True) for row in batch_df.collect()]
        columns = list(batch_df.columns)
        with sqlite3.connect(self.path, timeout=30) as db:  # one transaction: all or nothing
            names = ", ".join(f'"{c}"' for c in ["batch_id", *columns])
            db.execute(f'CREATE TABLE IF NOT EXISTS "{self.table}" ({names})')
            if self.idempotent:
                db.execute(f'DELETE FROM "{self.table}" WHERE batch_id = ?', (batch_id,))
            marks = ", ".join("?" for _ in range(len(columns) + 1))
            db.executemany(f'INSERT INTO "{self.table}" VALUES ({marks})',
                           [(batch_id, *(_plain_value(r[c]) for c in columns)) for r in rows])

    def frame(self):
        import sqlite3

        import pandas as pd

        if not Path(self.path).exists():
            return pd.DataFrame()
        with sqlite3.connect(self.path) as db:
            return pd.read_sql(f'SELECT * FROM "{self.table}"', db)


def new_store(name: str) -> str:
    """A fresh path for a SQLite store, ``<data>/stores/<name>-<random>.sqlite`` (not created yet)."""
    folder = data_dir() / "stores"
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder / f"{name}-{secrets.token_hex(3)}.sqlite")


def _plain_value(value):
    if isinstance(value, (int, float, str, bytes)) or value is None:
        return value
    return str(value)


class TransactionalTopicSink:
    """An exactly-once Kafka sink for ``foreachBatch``, the counterpart of Flink's two-phase-commit
    sink: each batch's rows go to ``topic`` in ONE Kafka transaction together with a record
    ``{"batch_id": N}`` in ``batches_topic``. Before writing, the sink looks up the last batch id
    committed there; a batch Spark runs again after a crash is recognised and skipped.

    Readers must read committed records only: ``sl.m04.read_committed(topic)``, or Spark with
    ``kafka.isolation.level=read_committed``. ``transactional_id`` must stay the same across
    restarts: the new producer then fences off (and aborts the open transaction of) the dead one.
    """

    def __init__(self, topic: str, *, batches_topic: str, transactional_id: str):
        self.topic, self.batches_topic, self.transactional_id = topic, batches_topic, transactional_id
        self._producer = None
        self._last = None
        self.skipped: list[int] = []

    def _start(self) -> None:
        from kafka import KafkaProducer

        self._producer = KafkaProducer(bootstrap_servers=bootstrap_servers(), acks="all",
                                       transactional_id=self.transactional_id, enable_idempotence=True)
        self._producer.init_transactions()
        self._last = last_committed_batch(self.batches_topic)

    def __call__(self, batch_df, batch_id: int) -> None:
        if self._producer is None:
            self._start()
        if self._last is not None and batch_id <= self._last:
            self.skipped.append(batch_id)  # committed before the crash: writing it again would double it
            return
        rows = [dict(row.asDict(recursive=True), batch_id=batch_id) for row in batch_df.collect()]
        producer = self._producer
        producer.begin_transaction()
        for row in rows:
            producer.send(self.topic, value=json.dumps(row, default=str).encode())
        producer.send(self.batches_topic, value=json.dumps({"batch_id": batch_id}).encode())
        producer.commit_transaction()
        self._last = batch_id

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
            self._producer = None


def read_committed(topic: str, timeout_s: float = 30) -> list[dict]:
    """Every *committed* record of ``topic`` (like ``sl.read_topic``, but with
    ``isolation_level="read_committed"``: records of aborted or open transactions are hidden)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers(), enable_auto_commit=False,
                             isolation_level="read_committed")
    records = []
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)  # the last stable offsets, for read_committed
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {topic!r} to its end within {timeout_s:g} s")
            for messages in consumer.poll(timeout_ms=500).values():
                for m in messages:
                    records.append({"partition": m.partition, "offset": m.offset,
                                    "key": decode_value(m.key), "value": decode_value(m.value)})
    finally:
        consumer.close()
    return sorted(records, key=lambda r: (r["partition"], r["offset"]))


def last_committed_batch(batches_topic: str) -> int | None:
    """The highest ``batch_id`` committed to ``batches_topic`` by a ``TransactionalTopicSink``."""
    ids = [r["value"]["batch_id"] for r in read_committed(batches_topic)
           if isinstance(r["value"], dict) and "batch_id" in r["value"]]
    return max(ids) if ids else None
