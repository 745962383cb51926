"""streamlab.stack.kafka: which broker, topics, producing records, reading offsets and records."""
from __future__ import annotations

import json

import pytest

import streamlab as sl
from streamlab.stack import kafka
from streamlab.stack.kafka import TopicNotFoundError


def test_topic_produce_offsets_and_read_back(kafka_bootstrap):
    topic = sl.new_topic("pkg-test", partitions=2)
    assert topic.startswith("pkg-test-") and topic in sl.list_topics()
    events = sl.access_log(20, seed=11)
    assert sl.produce(topic, events, key="path") == 20
    assert sum(sl.end_offsets(topic).values()) == 20
    records = sl.read_topic(topic)
    assert sorted(json.dumps(r["value"], sort_keys=True) for r in records) == sorted(
        json.dumps(e, sort_keys=True) for e in events)
    # Same key -> same partition.
    partitions_per_key = {}
    for r in records:
        partitions_per_key.setdefault(r["key"], set()).add(r["partition"])
    assert all(len(p) == 1 for p in partitions_per_key.values())
    assert kafka.topics_with_offsets()[topic] == sl.end_offsets(topic)
    sl.delete_topic(topic)


def test_numpy_and_pandas_values_are_written_as_what_they_are(kafka_bootstrap):
    """A learner's answer computed with pandas is a numpy scalar: it reaches Kafka as a number, not as text."""
    import numpy as np
    import pandas as pd

    files = pd.DataFrame({"version": [3, 8, 8], "partition": [0, 1, 1]})
    answer = {"latest": files["version"].max(), "partitions": files["partition"].nunique(),
              "mean": np.float32(0.5), "all_committed": np.bool_(True), "versions": files["version"].unique(),
              "per_partition": files.groupby("partition")["version"].max(), "when": pd.Timestamp("2026-01-01"),
              "bytes": {version - 1: total for version, total in files.groupby("version")["partition"].sum().items()}}
    topic = sl.new_topic("pkg-numpy")
    sl.produce(topic, [answer])
    (record,) = sl.read_topic(topic)
    assert record["value"] == {"latest": 8, "partitions": 2, "mean": 0.5, "all_committed": True,
                               "versions": [3, 8], "per_partition": [3, 8], "when": "2026-01-01 00:00:00",
                               "bytes": {"2": 0, "7": 2}}
    assert type(record["value"]["latest"]) is int
    sl.delete_topic(topic)


def test_topic_prefix_isolates_runs(kafka_bootstrap, monkeypatch):
    monkeypatch.setenv("STREAMLAB_TOPIC_PREFIX", "student7.")
    topic = sl.new_topic("requests", partitions=1)
    assert topic.startswith("student7.requests-")
    sl.delete_topic(topic)


def test_missing_topic_gets_a_clear_error(kafka_bootstrap):
    with pytest.raises(TopicNotFoundError, match="does not exist"):
        sl.produce("no-such-topic-xyz", [{"a": 1}])
    with pytest.raises(TopicNotFoundError, match="does not exist"):
        sl.end_offsets("no-such-topic-xyz")
    with pytest.raises(TopicNotFoundError, match="does not exist"):
        sl.read_topic("no-such-topic-xyz")
    # The broker creates unknown topics for producers (Kafka's default), but looking never does.
    assert "no-such-topic-xyz" not in sl.list_topics()


def test_an_empty_topic_reads_as_empty_at_once(kafka_bootstrap):
    topic = sl.new_topic("empty", partitions=2)
    assert sl.read_topic(topic, timeout_s=60) == []
    assert sl.end_offsets(topic) == {0: 0, 1: 0}
    sl.delete_topic(topic)


@pytest.mark.timeout(120)
def test_a_topic_a_transaction_wrote_reads_to_its_end_without_waiting_out_the_timeout(kafka_bootstrap):
    """A transaction's commit and abort markers take offsets that no consumer is given: reading stops at the end
    offsets all the same (the old reader waited for a record at end - 1, the whole timeout, here an hour)."""
    from kafka import KafkaProducer

    topic = sl.new_topic("transactional", partitions=2)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=f"{topic}-tx")
    try:
        producer.init_transactions()
        for outcome, values in (("commit", [1, 2, 3]), ("abort", [4]), ("commit", [5])):
            producer.begin_transaction()
            for value in values:
                producer.send(topic, json.dumps({"n": value}).encode(), partition=value % 2)
            producer.flush()  # in the log before the transaction ends (an abort drops what was not sent)
            producer.commit_transaction() if outcome == "commit" else producer.abort_transaction()
    finally:
        producer.close()
    assert sum(sl.end_offsets(topic).values()) > 5  # the markers' offsets
    records = sl.read_topic(topic, timeout_s=3600)
    assert sorted(r["value"]["n"] for r in records) == [1, 2, 3, 4, 5]  # read uncommitted: the aborted one too
    sl.delete_topic(topic)


def test_bootstrap_servers_prefers_the_environment(monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "kafka:19092")
    assert sl.bootstrap_servers() == "kafka:19092"


def test_ping_says_when_nothing_answers():
    ok, detail = kafka.ping("127.0.0.1:9", timeout_s=0.5)
    assert not ok and "unreachable" in detail


@pytest.mark.slow
def test_a_topic_deleted_while_topics_are_listed_is_left_out(kafka_bootstrap, monkeypatch):
    """Tests and graders delete topics while others list them: the listing leaves a vanished topic out
    (kafka-python 2.3.0 raised AttributeError there, 2.3.3 waits for it until the request times out)."""
    from kafka import KafkaConsumer

    kept, doomed = sl.new_topic("listing-kept"), sl.new_topic("listing-doomed")
    monkeypatch.setattr(kafka, "OFFSETS_REQUEST_TIMEOUT_MS", 2000)
    real = KafkaConsumer.end_offsets
    deleted = []

    def delete_first(consumer, partitions):  # the topic goes after it was listed, before its offsets are asked
        if not deleted:
            sl.delete_topic(doomed)
            deleted.append(doomed)
        return real(consumer, partitions)

    monkeypatch.setattr(KafkaConsumer, "end_offsets", delete_first)
    listing = kafka.topics_with_offsets()
    assert deleted == [doomed]
    assert doomed not in listing and listing[kept] == {0: 0, 1: 0}
    sl.delete_topic(kept)


def test_listing_fails_when_no_topic_went_away(kafka_bootstrap, monkeypatch):
    from kafka import KafkaConsumer
    from kafka.errors import KafkaTimeoutError

    def times_out(consumer, partitions):
        raise KafkaTimeoutError("no answer")

    monkeypatch.setattr(KafkaConsumer, "end_offsets", times_out)
    with pytest.raises(KafkaTimeoutError):
        kafka.topics_with_offsets()


def test_deleted_topics_are_no_longer_listed_when_delete_returns(kafka_bootstrap):
    """Kafka drops a deleted topic from its metadata a moment after the deletion is committed; deleting
    waits for that, so a listing right after never shows it (the grader's clean-up is checked that way)."""
    topics = [sl.new_topic("gone-at-once") for _ in range(3)]
    kafka.delete_topics([*topics, "never-existed-" + topics[0]])  # one already gone is no error
    assert not set(topics) & set(sl.list_topics())
