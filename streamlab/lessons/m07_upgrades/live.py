"""Queryable state, the Spark way: read the state of a query while it runs.

Flink's queryable state answered point lookups into a running job's live state (deprecated since
Flink 1.18). Spark's state data source reads a *running* query's checkpoint, but only what the last
**committed** batch wrote: a batch in progress is never visible. To see that happen, ``HeldQuery``
runs a query whose sink keeps one chosen batch open until you let it go::

    live = sl.m07.HeldQuery(events.groupBy("path").count(), ckpt, hold_batch=1)
    live.catch_up()                  # batch 0 committed
    sl.produce(topic, more)          # batch 1 starts ... and is held open
    live.wait_until_held()
    ckpt.last_committed_batch()      # 0: batch 1 runs, but is not committed
    live.release()                   # batch 1 finishes and commits
    live.stop()
"""
from __future__ import annotations

import threading

from ..runs import WAIT_S, catch_up


class HeldQuery:
    """A running streaming query (update mode into a sink that only reads each batch) whose batch
    ``hold_batch`` stays open, between its sink and its commit, until ``release()``."""

    def __init__(self, frame, checkpoint, *, hold_batch: int, output_mode: str = "update",
                 timeout_s: float = WAIT_S):
        self.hold_batch, self.timeout_s = hold_batch, timeout_s
        self.started: list[int] = []                  # the batch ids that reached the sink, in order
        self._held, self._release = threading.Event(), threading.Event()
        self.query = (frame.writeStream.outputMode(output_mode).foreachBatch(self._sink)
                      .option("checkpointLocation", str(checkpoint)).start())

    def _sink(self, batch_df, batch_id):
        self.started.append(batch_id)
        batch_df.collect()
        if batch_id == self.hold_batch:
            self._held.set()
            self._release.wait(self.timeout_s)        # never longer than the helper's time limit

    def catch_up(self) -> None:
        """Return once the query has processed (and committed) everything Kafka holds now."""
        catch_up(self.query, self.timeout_s)

    def wait_until_held(self) -> None:
        """Return once batch ``hold_batch`` is running and held (its offsets written, no commit yet)."""
        if not self._held.wait(self.timeout_s):
            self.stop()
            raise TimeoutError(f"batch {self.hold_batch} did not start within {self.timeout_s:g} s: "
                               f"did new records reach the query's topic?")

    def release(self) -> None:
        """Let the held batch finish and commit."""
        self._release.set()

    def stop(self) -> None:
        """Release any held batch and stop the query (waits at most the helper's time limit)."""
        self._release.set()
        self.query.stop()

    def __repr__(self) -> str:
        state = "held" if self._held.is_set() and not self._release.is_set() else "running"
        return f"HeldQuery(hold_batch={self.hold_batch}, batches seen={self.started}, {state})"

