"""Talk to Kafka from Python: which broker, topics, producing records, reading offsets.

Which Kafka the course uses, in this order:
1. ``KAFKA_BOOTSTRAP_SERVERS`` if set (the Docker stack, or any cluster you point it at);
2. the course's native broker if it is running (``streamlab kafka start``);
3. otherwise the native broker is started for you.

Topic names get a short random suffix (``new_topic("requests")`` -> ``requests-3f9a1c``), so
re-running a notebook never meets the records of an earlier run. ``STREAMLAB_TOPIC_PREFIX``
(set by the grader for each student) is put in front of every name.
"""
from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from . import broker

# kafka-python logs connection chatter at WARNING; the course shows its own messages instead.
logging.getLogger("kafka").setLevel(logging.CRITICAL)


class NoBrokerError(RuntimeError):
    """No Kafka is configured or running."""


class TopicNotFoundError(RuntimeError):
    """A topic the code asked for does not exist."""


def bootstrap_servers(*, start: bool = True) -> str:
    """The ``host:port`` list of the Kafka in use (see the module doc for the order)."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if configured:
        return configured
    state = broker.status()
    if state.running:
        return state.bootstrap_servers
    if not start:
        raise NoBrokerError(f"no KAFKA_BOOTSTRAP_SERVERS and the native broker is {state.detail}")
    return broker.start().bootstrap_servers


def ping(servers: str | None = None, timeout_s: float = 10) -> tuple[bool, str]:
    """(True, 'Kafka answers; N topics') if a client can talk to the broker in use (or ``servers``)."""
    return broker.ping(servers or bootstrap_servers(), timeout_s)


def admin_client():
    """A Kafka admin client on the course's broker (close it when done)."""
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap_servers(), request_timeout_ms=30000)


def topic_prefix() -> str:
    return os.environ.get("STREAMLAB_TOPIC_PREFIX", "")


def new_topic(name: str, partitions: int = 2) -> str:
    """Create a fresh topic called ``<prefix><name>-<random>`` and return its full name."""
    from kafka.admin import NewTopic

    full = f"{topic_prefix()}{name}-{secrets.token_hex(3)}"
    admin = admin_client()
    try:
        admin.create_topics([NewTopic(full, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()
    _wait_for_topic(full)
    return full


def _wait_for_topic(topic: str, timeout_s: float = 30) -> None:
    consumer = _inspector()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if consumer.partitions_for_topic(topic):
                return
            time.sleep(0.2)
    finally:
        consumer.close()
    raise TopicNotFoundError(f"topic {topic!r} did not appear within {timeout_s}s")


def list_topics() -> list[str]:
    admin = admin_client()
    try:
        return sorted(t for t in admin.list_topics() if not t.startswith("__"))
    finally:
        admin.close()


# Kafka deletes a topic in two steps: the controller commits the deletion (when delete_topics returns),
# then the broker drops the topic from the metadata it answers with, a moment later (seconds on a busy
# machine). Deleting waits for the second step, at most this long, so that "deleted" means "not listed".
TOPIC_GONE_WAIT_S = 30


def delete_topic(topic: str) -> None:
    """Delete a topic (no error if it is already gone); returns once it is no longer listed."""
    delete_topics([topic])


def delete_topics(topics: list[str]) -> None:
    """Delete these topics (those already gone are no error); returns once none of them is listed.
    Raises ``TimeoutError`` if one is still listed after ``TOPIC_GONE_WAIT_S``."""
    from kafka.errors import UnknownTopicOrPartitionError

    if not topics:
        return
    admin = admin_client()
    try:
        for topic in topics:  # one by one: a topic already gone must not keep the others
            try:
                admin.delete_topics([topic])
            except UnknownTopicOrPartitionError:
                pass
        deadline = time.monotonic() + TOPIC_GONE_WAIT_S
        while left := set(topics) & set(admin.list_topics()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"still listed {TOPIC_GONE_WAIT_S} s after they were deleted: {sorted(left)}")
            time.sleep(0.1)
    finally:
        admin.close()


def _encode(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(_plain_keys(value), default=json_value).encode()


def _plain_keys(value: Any) -> Any:
    """``value`` with numpy keys made plain (``{numpy.int64(0): 5}`` from a pandas groupby is ``{0: 5}``):
    JSON's writer takes only str, int, float, bool and None as keys, and never asks ``default`` about one."""
    if isinstance(value, dict):
        return {(json_value(k) if type(k).__module__ == "numpy" else k): _plain_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_keys(v) for v in value]
    return value


def json_value(value: Any) -> Any:
    """How ``produce`` writes what JSON has no type for: numpy and pandas numbers and booleans as the numbers
    and booleans they are (``numpy.int64(8)`` is ``8``, not ``"8"``: a learner's ``df["n"].max()`` or
    ``files["version"].nunique()`` is a number), arrays and Series as lists; anything else (datetimes,
    decimals, ...) as its text."""
    import numpy as np

    if isinstance(value, np.generic) and not isinstance(value, (np.datetime64, np.timedelta64)):
        return value.item()
    tolist = getattr(value, "tolist", None)  # numpy arrays, pandas Series and Index
    if callable(tolist):
        return tolist()
    return str(value)


def produce(topic: str, records: Iterable[Any], *, key: str | Callable[[Any], Any] | None = None,
            partition: int | None = None, timestamp_ms: Callable[[Any], int] | None = None) -> int:
    """Send records to ``topic`` and wait until Kafka has them all. Returns how many were sent.

    A record is sent as its value: dicts as JSON, strings as UTF-8, bytes as they are.
    ``key`` names a field of each dict (or is a function of the record) to use as the Kafka key,
    which decides the partition: records with the same key stay in order in one partition.
    ``timestamp_ms``: a function of the record giving its Kafka timestamp (default: when it is sent).

    The topic must exist (``new_topic(...)`` creates one). The broker would create an unknown topic
    on the first record (``auto.create.topics.enable``, Kafka's default, is on), but with one
    partition and the name as typed: a typo would then write to a new topic that no query reads,
    so ``produce`` raises ``TopicNotFoundError`` instead. Kafka's own tools and kcat do create it.
    """
    from kafka import KafkaProducer

    if topic not in list_topics():
        raise TopicNotFoundError(f"topic {topic!r} does not exist: create it with new_topic(...) first")
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers(), acks="all", linger_ms=5)
    count = 0
    try:
        for record in records:
            record_key = None
            if callable(key):
                record_key = key(record)
            elif key is not None:
                record_key = record[key]
            producer.send(topic, value=_encode(record), key=_encode(record_key), partition=partition,
                          timestamp_ms=timestamp_ms(record) if timestamp_ms else None)
            count += 1
        producer.flush(timeout=60)
    finally:
        producer.close()
    return count


_SENDERS: dict[str, Any] = {}  # broker address -> the producer send_values() keeps for this process
_SENDERS_LOCK = threading.Lock()


def send_values(topic: str, values: Iterable[str | bytes]) -> int:
    """Send ``values`` (strings as UTF-8) to ``topic`` and wait until Kafka has them all; returns how many.

    For many small sends, such as a query's every micro-batch (``BatchCollector``): the producer is made once
    per process and broker address and kept, where ``produce`` makes one per call. A value Kafka refuses
    raises its error here."""
    from kafka import KafkaProducer

    servers = bootstrap_servers()
    with _SENDERS_LOCK:
        producer = _SENDERS.get(servers)
        if producer is None:
            producer = _SENDERS[servers] = KafkaProducer(bootstrap_servers=servers, acks="all")
    sent = [producer.send(topic, value=_encode(value)) for value in values]
    producer.flush(timeout=60)
    for record in sent:
        record.get(timeout=60)
    return len(sent)


def _inspector(**config):
    """A consumer that only looks: no group, commits nothing, and never creates a topic by asking."""
    from kafka import KafkaConsumer

    # retry_backoff_ms: kafka-python asks for offsets before it has the topic's metadata, then retries after this
    # back-off; at its default (100 ms) that wait was most of every end_offsets() (117 ms a call, 24 at 20 ms)
    return KafkaConsumer(bootstrap_servers=bootstrap_servers(), enable_auto_commit=False,
                         allow_auto_create_topics=False, retry_backoff_ms=20, **config)


# How long asking for end offsets may take. kafka-python retries a partition whose topic was deleted after it
# was listed until this runs out (its default is 305 s); then the topics are listed again, at most
# LISTING_ATTEMPTS times, as long as the failure is a topic that is gone.
OFFSETS_REQUEST_TIMEOUT_MS = 15_000
LISTING_ATTEMPTS = 5


def topics_with_offsets() -> dict[str, dict[int, int]]:
    """{topic: {partition: end offset}} for every topic but Kafka's internal ones (``__...``).

    A topic deleted while it is being listed (graders and tests delete topics all the time) is left out:
    when asking for the end offsets fails and a listed topic is gone, the topics are listed again. A
    failure while every listed topic still exists is raised."""
    from kafka import TopicPartition
    from kafka.errors import KafkaError

    consumer = _inspector(request_timeout_ms=OFFSETS_REQUEST_TIMEOUT_MS)
    try:
        attempts = 0
        while True:
            attempts += 1
            by_topic = {topic: [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
                        for topic in sorted(consumer.topics()) if not topic.startswith("__")}
            try:
                ends = consumer.end_offsets([tp for tps in by_topic.values() for tp in tps])
            except KafkaError:
                if attempts == LISTING_ATTEMPTS or set(by_topic) <= consumer.topics():
                    raise  # not a topic that went away while it was listed
                continue
            return {topic: {tp.partition: ends[tp] for tp in tps} for topic, tps in by_topic.items() if tps}
    finally:
        consumer.close()


def end_offsets(topic: str) -> dict[int, int]:
    """{partition: offset of the next record to be written} — what a 'producer offset' is."""
    from kafka import TopicPartition

    consumer = _inspector()
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise TopicNotFoundError(f"topic {topic!r} does not exist")
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in sorted(partitions)])
        return {tp.partition: offset for tp, offset in sorted(ends.items(), key=lambda kv: kv[0].partition)}
    finally:
        consumer.close()


class RecordTooLarge(ValueError):
    """A record is larger than the reader accepts (``read_topic``'s ``max_record_bytes``)."""


def read_topic(topic: str, *, limit: int = 1000, timeout_s: float = 10, max_record_bytes: int | None = None,
               fetch_bytes: int | None = None) -> list[dict]:
    """Every record now in ``topic`` (up to ``limit``), as dicts: partition, offset, key, value.

    Values that are JSON come back decoded. Uses no consumer group, so it commits nothing.
    ``max_record_bytes``: raise ``RecordTooLarge`` at the first record whose key or value is larger (counted
    before it is decoded); ``fetch_bytes``: what one fetch may bring (the grader reads students' topics so).
    """
    from kafka import TopicPartition

    ends = end_offsets(topic)
    if not any(ends.values()):
        return []
    sizes = {} if fetch_bytes is None else {"fetch_max_bytes": fetch_bytes,
                                            "max_partition_fetch_bytes": min(fetch_bytes, 1024 * 1024)}
    consumer = _inspector(**sizes)
    partitions = [TopicPartition(topic, p) for p in ends]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    records: list[dict] = []
    # Read until the consumer's position reaches each partition's end offset. Not until a record at end - 1 came:
    # a transactional producer's commit and abort markers take offsets too, and no consumer is ever given them
    # (waiting for one cost the whole timeout, 10 s, on every topic a transaction wrote).
    remaining = {TopicPartition(topic, p) for p, end in ends.items() if end > 0}
    deadline = time.monotonic() + timeout_s
    try:
        while remaining and len(records) < limit:
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                break
            # With a bound, one record a poll: kafka-python decodes every record it hands back (a gzip'd 48 MB record
            # is about 50 kB on the wire, and one fetch brought five), so each is looked at before the next is decoded.
            fetched = consumer.poll(timeout_ms=int(min(left_s, 1.0) * 1000),
                                    max_records=1 if max_record_bytes is not None else min(limit - len(records), 500))
            for _, messages in sorted(fetched.items(), key=lambda kv: kv[0].partition):
                for message in messages:
                    size = max(len(message.key or b""), len(message.value or b""))
                    if max_record_bytes is not None and size > max_record_bytes:
                        raise RecordTooLarge(f"the record at offset {message.offset} of partition "
                                             f"{message.partition} holds {size} bytes; at most {max_record_bytes} "
                                             f"are read")
                    if message.offset < ends[message.partition] and len(records) < limit:
                        records.append({"partition": message.partition, "offset": message.offset,
                                        "key": decode_value(message.key), "value": decode_value(message.value),
                                        "timestamp": message.timestamp})
            for part in list(remaining):
                if consumer.position(part, timeout_ms=max(1, int((deadline - time.monotonic()) * 1000))) \
                        >= ends[part.partition]:
                    remaining.discard(part)
    finally:
        consumer.close()
    return sorted(records, key=lambda r: (r["partition"], r["offset"]))


def decode_value(raw: bytes | None) -> Any:
    """A record's key or value as ``read_topic`` gives it: JSON parsed, else text (None stays None)."""
    if raw is None:
        return None
    text = raw.decode(errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text
