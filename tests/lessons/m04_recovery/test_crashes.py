"""streamlab.lessons.m04_recovery.crashes: ``run_with_zombie`` drives a two-phase-commit sink through its two crashes
and the zombie's late commit, with a fresh sink per run (small in-memory sinks, a real query on the broker)."""
from __future__ import annotations

import pytest

import streamlab as sl

pytestmark = pytest.mark.usefixtures("kafka_bootstrap")


class Recorder:
    """A two-phase sink that records what it is asked, and can refuse a commit once a newer sink exists."""

    made: list[Recorder] = []

    def __init__(self, *, refuse_when_replaced: bool):
        self.calls, self.refuse = [], refuse_when_replaced
        Recorder.made.append(self)

    def pre_commit(self, batch_df, batch_id):
        self.calls.append(("pre_commit", batch_id, batch_df.count()))

    def commit(self, batch_id):
        if self.refuse and Recorder.made[-1] is not self:
            raise PermissionError("fenced")
        self.calls.append(("commit", batch_id))


@pytest.mark.notebooks   # a real query run three times: the heavy tier
@pytest.mark.parametrize("refuse", [True, False])
def test_two_crashes_and_a_zombie(spark, refuse):
    Recorder.made = []
    topic = sl.new_topic("zombie-helper", partitions=1)
    sl.produce(topic, sl.access_log(8, seed=1), key="path")
    frame = sl.kafka_stream(topic, sl.ACCESS_LOG_SCHEMA, maxOffsetsPerTrigger=2, spark=spark).groupBy("path").count()
    result = sl.m04.run_with_zombie(frame, checkpoint=sl.new_checkpoint("zombie-helper"),
                                    new_sink=lambda: Recorder(refuse_when_replaced=refuse))
    first, zombie, last = Recorder.made
    assert [c[:2] for c in first.calls] == [("pre_commit", 0), ("commit", 0), ("pre_commit", 1), ("commit", 1)]
    assert [c[:2] for c in zombie.calls[:3]] == [("pre_commit", 1), ("commit", 1), ("pre_commit", 2)]
    assert (("commit", 2) in zombie.calls) is not refuse      # the late commit, when nothing refused it
    assert [c[:2] for c in last.calls] == [("pre_commit", 2), ("commit", 2), ("pre_commit", 3), ("commit", 3)]
    assert result.zombie == ("PermissionError" if refuse else None)
    assert sorted(set(result.rows["attempt"])) == [0, 1, 2]
