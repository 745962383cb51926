"""streamlab.lessons.m05_offset_replay against the real broker: positions by time, deleting records, adding
partitions, a checkpoint's resume position and lag (from checkpoint files written as Spark writes
them), and one Spark check that startingOffsetsByTimestamp reads from the offsets Kafka gives."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import streamlab as sl

pytestmark = pytest.mark.usefixtures("kafka_bootstrap")

EVENTS = sl.access_log(40, seed=3)


@pytest.fixture
def timed_topic():
    topic = sl.new_topic("test-offsets", partitions=2)
    sl.m05.produce_with_event_time(topic, EVENTS, key="ts")
    yield topic
    sl.delete_topic(topic)


def _positions(topic):
    """{partition: [(offset, event time in ms), ...]} as Kafka stores them."""
    found: dict[int, list] = {}
    for record in sl.read_topic(topic):
        found.setdefault(record["partition"], []).append((record["offset"], record["timestamp"]))
    return found


def test_to_millis():
    assert sl.m05.to_millis("2026-01-01T09:00:00Z") == sl.m05.to_millis(sl.START) == 1767258000000
    assert sl.m05.to_millis("2026-01-01T09:00:00.250Z") == 1767258000250
    assert sl.m05.to_millis(1767258000250) == 1767258000250


def test_records_carry_their_event_time(timed_topic):
    stored = sorted(ts for records in _positions(timed_topic).values() for _, ts in records)
    assert stored == sorted(sl.m05.to_millis(e["ts"]) for e in EVENTS)
    assert sum(sl.end_offsets(timed_topic).values()) == len(EVENTS)
    assert sl.m05.earliest_offsets(timed_topic) == {0: 0, 1: 0}


def test_offsets_at_is_the_first_record_at_or_after_the_time(timed_topic):
    when = sl.m05.to_millis(EVENTS[15]["ts"])
    positions = _positions(timed_topic)
    expected = {p: min([o for o, ts in records if ts >= when], default=len(records))
                for p, records in positions.items()}
    assert sl.m05.offsets_at(timed_topic, EVENTS[15]["ts"]) == expected
    assert sl.m05.offsets_at(timed_topic, "2030-01-01T00:00:00Z") == sl.end_offsets(timed_topic)
    assert sl.m05.offsets_at(timed_topic, "2000-01-01T00:00:00Z") == {0: 0, 1: 0}


def test_json_for_the_kafka_source(timed_topic):
    assert json.loads(sl.m05.offsets_json(timed_topic, {1: 7, 0: -2})) == {timed_topic: {"0": -2, "1": 7}}
    assert json.loads(sl.m05.timestamps_json(timed_topic, "2026-01-01T09:00:00Z")) == \
        {timed_topic: {"0": 1767258000000, "1": 1767258000000}}


def test_delete_records_moves_the_start_not_the_end(timed_topic):
    ends = sl.end_offsets(timed_topic)
    assert sl.m05.delete_records(timed_topic, {0: 3}) == {0: 3, 1: 0}
    assert sl.m05.delete_records(timed_topic, 2) == {0: 3, 1: 2}          # never moves back
    assert sl.m05.delete_records(timed_topic, {1: 10_000}) == {0: 3, 1: ends[1]}  # at most to the end
    assert sl.end_offsets(timed_topic) == ends
    with pytest.raises(ValueError, match="no partition"):
        sl.m05.delete_records(timed_topic, {5: 1})


def test_add_partitions(timed_topic):
    assert sl.m05.add_partitions(timed_topic, 3) == 3
    assert sl.end_offsets(timed_topic)[2] == 0
    assert sl.m05.earliest_offsets(timed_topic) == {0: 0, 1: 0, 2: 0}


def test_offset_ranges():
    import pandas as pd

    rows = pd.DataFrame({"partition": [1, 0, 1, 1], "offset": [4, 9, 2, 3], "path": list("abcd")})
    assert sl.m05.offset_ranges(rows).to_dict("records") == [
        {"partition": 0, "first": 9, "last": 9, "records": 1},
        {"partition": 1, "first": 2, "last": 4, "records": 3}]
    renamed = rows.rename(columns={"partition": "kafka_partition", "offset": "kafka_offset"})
    assert sl.m05.offset_ranges(renamed)["records"].tolist() == [1, 3]
    assert sl.m05.offset_ranges(rows.iloc[:0]).empty


def _spark_checkpoint(folder: Path, topic: str, batches: list[dict], committed: int) -> sl.Checkpoint:
    """A checkpoint folder laid out as Spark writes it: offsets/N before batch N runs, commits/N after."""
    (folder / "offsets").mkdir(parents=True)
    (folder / "commits").mkdir()
    (folder / "metadata").write_text(json.dumps({"id": "00000000-0000-0000-0000-000000000005"}))
    for batch, offsets in enumerate(batches):
        (folder / "offsets" / str(batch)).write_text(
            "v1\n" + json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}) + "\n"
            + json.dumps({topic: {str(p): o for p, o in offsets.items()}}))
        if batch <= committed:
            (folder / "commits" / str(batch)).write_text("v1\n" + json.dumps({"nextBatchWatermarkMs": 0}))
    return sl.Checkpoint(folder)


def test_checkpoint_lag_counts_from_the_last_committed_batch(timed_topic, tmp_path):
    ends = sl.end_offsets(timed_topic)
    # batch 0 committed at (5, 4); batch 1 written up to the end but never committed (a crash)
    ckpt = _spark_checkpoint(tmp_path / "ckpt", timed_topic, [{0: 5, 1: 4}, ends], committed=0)
    assert sl.m05.checkpoint_offsets(ckpt, timed_topic) == {0: 5, 1: 4}
    assert sl.m05.checkpoint_offsets(str(ckpt), timed_topic) == {0: 5, 1: 4}
    sl.m05.add_partitions(timed_topic, 3)
    sl.produce(timed_topic, [{"n": 1}], partition=2)
    lag = sl.m05.checkpoint_lag(ckpt, timed_topic)
    assert lag.to_dict("records") == [
        {"partition": 0, "end_offset": ends[0], "checkpoint_offset": 5, "lag": ends[0] - 5},
        {"partition": 1, "end_offset": ends[1], "checkpoint_offset": 4, "lag": ends[1] - 4},
        {"partition": 2, "end_offset": 1, "checkpoint_offset": 0, "lag": 1}]  # unknown to the checkpoint


def test_checkpoint_without_commits_has_no_position(timed_topic, tmp_path):
    ckpt = _spark_checkpoint(tmp_path / "ckpt", timed_topic, [{0: 1, 1: 1}], committed=-1)
    assert sl.m05.checkpoint_offsets(ckpt, timed_topic) == {}
    assert sl.m05.checkpoint_lag(ckpt, timed_topic)["lag"].sum() == len(EVENTS)


def test_a_plain_consumer_group_is_listed_a_topic_nobody_committed_to_is_not(timed_topic):
    from kafka import KafkaAdminClient, KafkaConsumer

    assert sl.m05.consumer_groups(timed_topic) == []
    group = f"test-offsets-{timed_topic}"
    consumer = KafkaConsumer(timed_topic, bootstrap_servers=sl.bootstrap_servers(), group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=10_000)
    try:
        assert next(iter(consumer)) is not None
        consumer.commit()
    finally:
        consumer.close()
    try:
        assert sl.m05.consumer_groups(timed_topic) == [group]
    finally:
        admin = KafkaAdminClient(bootstrap_servers=sl.bootstrap_servers())
        admin.delete_consumer_groups([group])
        admin.close()


def test_data_loss_message_keeps_the_reason():
    error = RuntimeError("[STREAM_FAILED] Query terminated\n  File x\nKafkaIllegalStateException: Some data may "
                         "have been lost because they are not available in Kafka any more;\n more text\n"
                         "Reason: Could not read records in offset [3, 9) for topic partition t-0\n at foo")
    assert sl.m05.data_loss_message(error) == ("Some data may have been lost because they are not available in Kafka "
                                           "any more;\nReason: Could not read records in offset [3, 9) for topic "
                                           "partition t-0")
    assert sl.m05.data_loss_message(ValueError("first\nsecond")) == "first"


@pytest.mark.slow
def test_spark_starts_where_kafka_says_for_a_timestamp(spark, timed_topic):
    when = EVENTS[20]["ts"]
    rows = sl.kafka_table(timed_topic, sl.ACCESS_LOG_SCHEMA,
                          startingOffsetsByTimestamp=sl.m05.timestamps_json(timed_topic, when)).toPandas()
    firsts = {r["partition"]: r["first"] for r in sl.m05.offset_ranges(rows).to_dict("records")}
    at = sl.m05.offsets_at(timed_topic, when)
    assert firsts == {p: o for p, o in at.items() if o < sl.end_offsets(timed_topic)[p]}
    assert len(rows) == sum(1 for e in EVENTS if sl.m05.to_millis(e["ts"]) >= sl.m05.to_millis(when))


def test_wait_for_rows_returns_when_the_output_has_enough_rows():
    import threading

    import pandas as pd

    class Growing:
        rows = 0

        def frame(self):
            return pd.DataFrame({"x": range(self.rows)})

    out = Growing()
    threading.Timer(0.3, lambda: setattr(out, "rows", 3)).start()
    waited = sl.m05.wait_for_rows(out, 3, timeout_s=10)
    assert waited >= 0.25, "it returned before the rows came"
    with pytest.raises(TimeoutError, match="3 of 4 rows"):
        sl.m05.wait_for_rows(out, 4, timeout_s=0.2)


@pytest.mark.slow  # four JVMs of Kafka's own tools: seconds each
def test_a_share_group_hands_out_each_record_until_accepted_and_cannot_rewind_itself(timed_topic):
    """Lesson 05 §9 on the real broker: released records come back with their delivery count raised, accepted
    ones never come back to the group, while the log itself still holds every record for any reader."""
    stored = sorted((r["partition"], r["offset"]) for r in sl.read_topic(timed_topic))
    assert sl.m05.start_share_group(timed_topic, "queue") == {0: 0, 1: 0}
    released = sl.m05.share_read(timed_topic, "queue", ack="release", max_records=len(stored))
    accepted = sl.m05.share_read(timed_topic, "queue", ack="accept", max_records=len(stored))
    assert sorted(zip(released.partition, released.offset)) == stored == sorted(zip(accepted.partition,
                                                                                       accepted.offset))
    assert set(released.delivery) == {1} and set(accepted.delivery) == {2}
    assert sl.m05.share_read(timed_topic, "queue", wait_s=1).empty, "an accepted record is never handed out again"
    assert sorted((r["partition"], r["offset"]) for r in sl.read_topic(timed_topic)) == stored
    with pytest.raises(ValueError, match="ack must be one of"):
        sl.m05.share_read(timed_topic, "queue", ack="ignore")
