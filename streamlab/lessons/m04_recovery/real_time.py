"""Spark's real-time mode (4.1+) tried on a query: does it run, and what did it output?

Real-time mode (``trigger(realTime="5 seconds")``) runs a long batch through which records flow one by one;
the duration is how often it checkpoints. On pyspark 4.2.1 it accepts stateless queries from Kafka to Kafka
and refuses stateful ones (``STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST``). Lesson 04 uses
``try_real_time`` to show both.
"""
from __future__ import annotations

import re
import time

from ...stack.kafka import bootstrap_servers, end_offsets
from ..checkpoint import new_checkpoint


def _condition(error: BaseException) -> str:
    """Spark's error condition: the exception's own, else the first one its message names (a failed query's
    ``StreamingQueryException`` carries the cause's condition only in its text, after ``STREAM_FAILED``)."""
    condition = getattr(error, "getCondition", lambda: None)()
    if condition and condition != "STREAM_FAILED":
        return condition
    named = [c for c in re.findall(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]", str(error)) if c != "STREAM_FAILED"]
    return named[0] if named else type(error).__name__


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
        return f"refused: {_condition(refusal)}"
    try:
        while time.monotonic() - started < seconds:
            if not query.isActive:
                error = query.exception()
                return f"refused: {_condition(error)}" if error else "stopped by itself"
            written = sum(end_offsets(out_topic).values())
            if written and checkpoint.last_committed_batch() is not None:
                return f"ran: {written} records out after {time.monotonic() - started:.1f} s"
            time.sleep(0.25)
        return f"ran: nothing out within {seconds:g} s"
    finally:
        query.stop()
