"""Spark's real-time mode (4.1+) tried on a query: does it run, and what did it output?

Real-time mode (``trigger(realTime="5 seconds")``) runs a long batch through which records flow one by one;
the duration is how often it checkpoints. On pyspark 4.2.1 it accepts stateless queries from Kafka to Kafka
and refuses stateful ones (``STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST``). Lesson 04 uses
``try_real_time`` to show both.
"""
from __future__ import annotations

import time

from ...stack.kafka import bootstrap_servers, end_offsets
from ..checkpoint import new_checkpoint
from ..runs import error_class


def try_real_time(frame, out_topic: str, *, seconds: float = 15, batch: str = "5 seconds") -> str:
    """Run ``frame`` in real-time mode into the Kafka topic ``out_topic`` for at most ``seconds``; say what happened.

    Returns "refused: <error condition>" when Spark will not run it, or "ran: N records out after X s" once the
    query has written something and a real-time batch has been committed (then it is stopped), or "ran: nothing
    out within S s". Bounded: the query is always stopped before this returns.
    """
    checkpoint = new_checkpoint("real-time")
    writer = (frame.selectExpr("to_json(struct(*)) AS value").writeStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap_servers()).option("topic", out_topic)
              .option("checkpointLocation", checkpoint.path).outputMode("update").trigger(realTime=batch))
    started = time.monotonic()
    try:
        query = writer.start()
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
