"""Read course topics as DataFrames, and watch what a streaming query outputs batch by batch."""
from __future__ import annotations

import threading

from ..stack.kafka import bootstrap_servers, send_values
from ..stack.session import spark as get_spark


def _kafka_reader(reader, topic: str, options: dict):
    reader = (reader.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap_servers())
              .option("subscribe", topic))
    for key, value in {"startingOffsets": "earliest", **options}.items():
        reader = reader.option(key, value)
    return reader.load()


def _parse(frame, schema: str | None):
    from pyspark.sql import functions as F

    if schema is None:
        return frame.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value",
                                "topic", "partition", "offset", "timestamp")
    parsed = frame.select(F.from_json(F.col("value").cast("string"), schema).alias("event"),
                          "partition", "offset")
    # A schema may have its own `partition`/`offset` fields (offset reports do): keep those, and
    # name the Kafka ones kafka_partition/kafka_offset so no column name is ambiguous.
    fields = set(parsed.select("event.*").columns)
    kafka = [F.col(c).alias(f"kafka_{c}") if c in fields else F.col(c) for c in ("partition", "offset")]
    return parsed.select("event.*", *kafka)


def kafka_stream(topic: str, schema: str | None = None, *, spark=None, **options):
    """A streaming DataFrame of ``topic``: JSON values parsed with ``schema`` (a DDL string),
    plus the Kafka ``partition`` and ``offset`` of each record (``kafka_partition`` /
    ``kafka_offset`` when the schema has fields of those names). Reads from the earliest offset
    unless ``startingOffsets=...`` says otherwise; other Kafka source options pass through."""
    return _parse(_kafka_reader((spark or get_spark()).readStream, topic, options), schema)


def kafka_table(topic: str, schema: str | None = None, *, spark=None, **options):
    """The same as ``kafka_stream`` but a batch DataFrame: what the topic holds right now."""
    return _parse(_kafka_reader((spark or get_spark()).read, topic, options), schema)


class BatchCollector:
    """A ``foreachBatch`` sink that keeps every micro-batch's rows, tagged with its batch id.

        collect = BatchCollector()
        query = counts.writeStream.foreachBatch(collect).trigger(availableNow=True).start()
        query.awaitTermination(60)
        collect.frame()   # pandas DataFrame with a batch_id column

    ``BatchCollector(copy_to_topic=topic)`` also sends every batch to a Kafka topic, one JSON record
    per row with its ``batch_id``, made by Spark's ``to_json`` and sent before the micro-batch
    commits: graded labs use it so the grader can check a query's output from outside the notebook.
    """

    def __init__(self, copy_to_topic: str | None = None):
        self._rows: list[dict] = []
        self._lock = threading.Lock()
        self.copy_to_topic = copy_to_topic
        self.error: BaseException | None = None  # what a batch raised here, with its Python traceback

    def __call__(self, batch_df, batch_id: int) -> None:
        try:
            self._collect(batch_df, batch_id)
        except BaseException as error:  # kept for the learner's message (lessons.mistakes), then raised to Spark
            self.error = error
            raise

    def _collect(self, batch_df, batch_id: int) -> None:
        if not self.copy_to_topic:
            rows = [dict(row.asDict(recursive=True), batch_id=batch_id) for row in batch_df.collect()]
        else:
            # One Spark job computes each row and its record together (a second action would run the query's
            # plan, and its stateful operators, again); the records then go to Kafka from here: about 0.1 s less
            # per micro-batch than caching the batch and writing it with a second Spark job.
            from pyspark.sql import functions as F

            tagged = batch_df.withColumn("batch_id", F.lit(batch_id))
            both = tagged.select(F.struct("*").alias("row"), F.to_json(F.struct("*")).alias("value")).collect()
            rows = [pair.row.asDict(recursive=True) for pair in both]
            send_values(self.copy_to_topic, [pair.value for pair in both])
        with self._lock:
            self._rows.extend(rows)

    def frame(self):
        import pandas as pd

        with self._lock:
            frame = pd.DataFrame(self._rows)
        if frame.empty:
            return frame
        columns = ["batch_id"] + [c for c in frame.columns if c != "batch_id"]
        return frame[columns].reset_index(drop=True)

    def rows_in(self, batch_id: int) -> int:
        """How many rows batch ``batch_id`` output."""
        with self._lock:
            return sum(1 for row in self._rows if row["batch_id"] == batch_id)

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()


def write_batch_to_topic(batch_df, batch_id: int, topic: str) -> None:
    """Write one micro-batch to ``topic`` as JSON records (the row's fields plus ``batch_id``)."""
    from pyspark.sql import functions as F

    (batch_df.withColumn("batch_id", F.lit(batch_id))
     .select(F.to_json(F.struct("*")).alias("value"))
     .write.format("kafka")
     .option("kafka.bootstrap.servers", bootstrap_servers())
     .option("topic", topic)
     .save())
