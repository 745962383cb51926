"""Reading a running query's state (queryable state, the Spark way): a sink that holds one batch open.

    hold = sl.m07.HoldBatch(1)              # a foreachBatch sink that keeps batch 1 running
    query = frame.writeStream.foreachBatch(hold).option("checkpointLocation", ckpt.path).start()
    ...                                     # new records arrive, batch 1 starts
    hold.wait_until_held()                  # now batch 1 is running, not yet committed
    ckpt.state_dict()                       # the state reader sees the last *committed* batch
    hold.release()                          # let batch 1 finish and commit
"""
from __future__ import annotations

import threading


class HoldBatch:
    """A ``foreachBatch`` sink that keeps micro-batch ``batch_id`` running until ``release()``.

    Every batch is read (``collect()``) and dropped; ``started`` lists the batches it was called for.
    While batch ``batch_id`` is held, the query's checkpoint has that batch's offsets but no commit
    yet: a moment to look at what a reader of a running query sees. The batch goes on by itself
    after ``timeout_s`` seconds if nobody releases it, so a forgotten hold never blocks a query for good.
    """

    def __init__(self, batch_id: int = 1, *, timeout_s: float = 60):
        self.batch_id = batch_id
        self.timeout_s = timeout_s
        self.started: list[int] = []
        self._held = threading.Event()
        self._released = threading.Event()

    def __call__(self, batch_df, batch_id: int) -> None:
        self.started.append(batch_id)
        batch_df.collect()
        if batch_id == self.batch_id:
            self._held.set()
            self._released.wait(self.timeout_s)

    def wait_until_held(self, timeout_s: float | None = None) -> None:
        """Wait until the held batch has started (at most ``timeout_s``, default the hold's own limit)."""
        if not self._held.wait(self.timeout_s if timeout_s is None else timeout_s):
            raise TimeoutError(f"batch {self.batch_id} did not start; batches started: {self.started}")

    def release(self) -> None:
        """Let the held batch finish (and every later one run without stopping)."""
        self._released.set()
