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
