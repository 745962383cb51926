"""The jobs module 04 runs with ``sl.m04.StreamingJob``, each in a process of its own.

* ``count_requests``: requests per path from a Kafka topic, written to the sinks you name (Spark's
  Kafka sink, a ``SqliteSink``, a ``TransactionalTopicSink``): the job the lesson crashes between
  the sink and the commit, to see which sinks write a batch twice;
* ``tick``: a rehearsal job without Spark (starts in a moment), for trying ``StreamingJob`` and for
  the tests.

A job is a function ``job(ctx, **params)``: ``ctx`` is a ``JobContext`` (``job_context``). They are
named ``"streamlab.lessons.m04_recovery:count_requests"`` and ``"streamlab.lessons.m04_recovery:tick"``
(the package makes them available there).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from ...stack.kafka import topic_prefix
from ..events import ACCESS_LOG_SCHEMA
from ..streams import kafka_stream, write_batch_to_topic
from .job_context import JobContext
from .sinks import SqliteSink, TransactionalTopicSink


def count_requests(ctx: JobContext, *, topic: str, checkpoint: str, out_topic: str | None = None,
                   sqlite: str | None = None, tx_topic: str | None = None, tx_batches_topic: str | None = None,
                   max_per_batch: int = 20) -> None:
    """The job module 04 crashes: requests per path (``groupBy("path").count()``, update mode)
    over ``topic``, at most ``max_per_batch`` records per micro-batch, checkpoint ``checkpoint``.
    Every batch goes to each sink that is named, in this order, then is reported:

    * ``out_topic``: Spark's Kafka sink (at-least-once: a re-run batch is written again);
    * ``sqlite``: a ``SqliteSink`` keyed by batch id (idempotent: a re-run batch replaces itself);
    * ``tx_topic`` + ``tx_batches_topic``: a ``TransactionalTopicSink`` (exactly-once: skipped).
    """
    ctx.spark()
    counts = kafka_stream(topic, ACCESS_LOG_SCHEMA, maxOffsetsPerTrigger=max_per_batch).groupBy("path").count()
    sinks = []
    if out_topic:
        sinks.append(lambda df, batch_id: write_batch_to_topic(df, batch_id, out_topic))
    if sqlite:
        sinks.append(SqliteSink(sqlite, "counts"))
    if tx_topic:
        sinks.append(TransactionalTopicSink(tx_topic, batches_topic=tx_batches_topic,
                                            # the student's prefix: a graded run may use no other id
                                            transactional_id=f"{topic_prefix()}{Path(checkpoint).name}-tx"))

    def write(batch_df, batch_id):
        batch_df.persist()
        for sink in sinks:
            sink(batch_df, batch_id)
        batch_df.unpersist()

    ctx.run(counts.writeStream.outputMode("update").foreachBatch(ctx.sink(write))
            .option("checkpointLocation", checkpoint).trigger(availableNow=True))


def tick(ctx: JobContext, *, batches: int = 3, helper_process: bool = False, fail: bool = False) -> None:
    """A rehearsal job without Spark (quick, for tests and for trying ``StreamingJob``): "writes"
    batches 0 .. ``batches``-1 and reports each. ``helper_process`` starts a child process that
    lives as long as the job (as Spark's JVM does); ``fail`` ends the job with an error."""
    if helper_process:
        helper = subprocess.Popen(["sleep", str(int(ctx.timeout_s) + 60)])
        ctx.report("helper", pid=helper.pid)
    for batch_id in range(batches):
        ctx.reached_sink(batch_id)
    if fail:
        raise RuntimeError("the rehearsal job failed, as asked")
