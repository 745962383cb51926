"""streamlab.lessons.m07_upgrades.live_state: a foreachBatch sink that holds one batch open (no Spark needed)."""
from __future__ import annotations

import threading

import pytest

import streamlab as sl


class _Batch:
    collected = False

    def collect(self):
        self.collected = True
        return []


def test_hold_batch_keeps_its_batch_running_until_released():
    hold = sl.m07.HoldBatch(1, timeout_s=30)
    first = _Batch()
    hold(first, 0)                                   # another batch goes straight through
    assert first.collected and hold.started == [0]

    finished = threading.Event()
    runner = threading.Thread(target=lambda: (hold(_Batch(), 1), finished.set()), daemon=True)
    runner.start()
    hold.wait_until_held(timeout_s=10)
    assert hold.started == [0, 1] and not finished.wait(0.3), "batch 1 is held"
    hold.release()
    assert finished.wait(10), "released, batch 1 finishes"
    hold(_Batch(), 2)                                # later batches are not held
    assert hold.started == [0, 1, 2]


def test_a_hold_nobody_releases_ends_by_itself_and_waiting_for_a_batch_that_never_comes_fails():
    hold = sl.m07.HoldBatch(0, timeout_s=0.2)
    hold(_Batch(), 0)                                # returns after timeout_s
    assert hold.started == [0]
    with pytest.raises(TimeoutError, match="batch 5 did not start"):
        sl.m07.HoldBatch(5, timeout_s=0.1).wait_until_held()


class _Query:
    stopped = False

    def processAllAvailable(self):
        pass

    def stop(self):
        self.stopped = True


class _Frame:
    """Enough of a streaming DataFrame for HeldQuery: records how its writer was set up."""

    def __init__(self):
        self.writer = {}
        self.query = _Query()

    @property
    def writeStream(self):
        return self

    def outputMode(self, mode):
        self.writer["mode"] = mode
        return self

    def foreachBatch(self, sink):
        self.writer["sink"] = sink
        return self

    def option(self, key, value):
        self.writer[key] = value
        return self

    def start(self):
        return self.query


def test_held_query_runs_its_frame_into_a_hold_and_stop_releases_it():
    frame = _Frame()
    live = sl.m07.HeldQuery(frame, "/tmp/ckpt", hold_batch=1, timeout_s=5)
    assert frame.writer["mode"] == "update" and frame.writer["checkpointLocation"] == "/tmp/ckpt"
    assert frame.writer["sink"] is live.hold and live.hold.batch_id == 1
    live.catch_up()
    held = threading.Thread(target=live.hold, args=(_Batch(), 1), daemon=True)
    held.start()
    live.wait_until_held()
    live.stop()                                       # releases the held batch, then stops the query
    held.join(5)
    assert not held.is_alive() and frame.query.stopped


def test_a_held_query_whose_batch_never_comes_is_stopped():
    frame = _Frame()
    live = sl.m07.HeldQuery(frame, "/tmp/ckpt", hold_batch=3, timeout_s=0.1)
    with pytest.raises(TimeoutError):
        live.wait_until_held()
    assert frame.query.stopped
