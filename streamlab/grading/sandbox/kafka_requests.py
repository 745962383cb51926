"""Kafka requests as the Kafka door sees them: one frame at a time, and a budget for what a sandbox may do
with the broker it shares (standard library only: no Kafka client is imported).

A Kafka client sends size-prefixed frames (an int32 big-endian length, then the request: header and
body; https://kafka.apache.org/protocol). ``read_frame`` reads one from a socket and refuses one larger
than ``bounds.KAFKA_REQUEST_BYTES``. ``KafkaBudget.admit`` looks at each frame a sandbox sends:

* only the requests a client needs to produce, consume, use groups and transactions and manage its own
  topics pass (``PASSED_APIS``); everything else (ACLs, quotas, credentials, reassignments, the log dirs,
  anything unknown) is refused, whatever the ACLs say; a topic's configs are altered by no one but the
  grader (the broker refuses the principal ALTER_CONFIGS);
* Produce (API 0): the bytes of its frames are counted, at most ``bounds.KAFKA_PRODUCED_BYTES`` a submission (the
  broker keeps what is written until the grader deletes the topics);
* InitProducerId (API 22, versions 0-5, flexible from 2): at most ``bounds.KAFKA_PRODUCER_IDS`` a submission, and at
  most ``bounds.KAFKA_TRANSACTIONAL_IDS`` different transactional ids (Kafka has no request that deletes one: the
  broker keeps each for ``transactional.id.expiration.ms``, seven days);

and counts the topics and partitions it would create:

* CreateTopics (API 19, versions 0-7, flexible from 5): each topic, and its ``num_partitions`` (or its
  manual assignments, or the broker's ``num.partitions`` when it gives neither); a topic created with
  configs of its own is refused (``segment.ms=1`` makes the broker open a file per request until it dies);
* CreatePartitions (API 37, versions 0-3, flexible from 2): each topic's new total ``count``, as if all
  of it were new (the frame does not say how many the topic has: conservative);
* Metadata (API 3, versions 0-13, flexible from 9) that may auto-create topics (the course's broker has
  ``auto.create.topics.enable``): each topic name asked for that the budget has not seen before, with
  the broker's ``num.partitions``; a name it has seen (created, or asked for before) is not counted again,
  so a client asking for the metadata of its own topics again and again costs nothing.

Once a total would pass its maximum, ``admit`` returns why (and counts nothing of that request); the door
then closes the connection. A frame of the parsed APIs that cannot be parsed is refused too (the broker
would refuse it as well). The budget is per sandbox, shared by all its connections (thread-safe), and never
refilled: the next student gets a new one.

The defaults, from what the labs create (``sl.new_topic`` in ``solutions/*/*.ipynb``): at most 11 topics
and 21 partitions (lab 04), plus lab 05's ``add_partitions`` to 3. A budget of 64 topics and 256
partitions leaves a correct submission ample room (re-run cells, extra scratch topics) and bounds what one
can cost the broker (each partition is a log with its own files).
"""
from __future__ import annotations

import socket
import struct
import threading

from .. import bounds

# One request: a producer's batch is at most its max.request.size, 1 MB by default (no lab changes it); 64
# connections of 2 MB each are 128 MB in the broker's request pool (``queued.max.request.bytes``).
BROKER_DEFAULT_PARTITIONS = 1  # the course broker's num.partitions (streamlab/stack/kafka_settings.py)

PRODUCE, METADATA, CREATE_TOPICS, INIT_PRODUCER_ID, CREATE_PARTITIONS = 0, 3, 19, 22, 37
# api key -> (name, highest version known, first flexible version): the requests the budget parses
COUNTED_APIS = {METADATA: ("Metadata", 13, 9), CREATE_TOPICS: ("CreateTopics", 7, 5),
                INIT_PRODUCER_ID: ("InitProducerId", 5, 2), CREATE_PARTITIONS: ("CreatePartitions", 3, 2)}
# The requests a sandbox's clients may send at all: what Kafka's Java client (Spark's), kafka-python and the
# admin calls on one's own topics, groups and transactions use. AlterConfigs (33) and IncrementalAlterConfigs
# (44) pass to the broker, which refuses them: the principal has no ALTER_CONFIGS (``tenancy.OPERATIONS``); the
# course's own lesson 05 helper (``produce_with_event_time``) sends one and must get the broker's answer, not a
# closed connection. Not here, so refused at the door: ACLs (30, 31), quotas (49), SCRAM credentials (51),
# reassignments and leader elections (43, 45, 46), log dirs (34, 35), delegation tokens (38-41), features (57),
# SASL (17, 36: the door has authenticated the connection already), share groups, and every API this list does
# not know.
PASSED_APIS = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    15: "DescribeGroups", 16: "ListGroups", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
    21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch", 24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit", 29: "DescribeAcls", 32: "DescribeConfigs",
    33: "AlterConfigs", 44: "IncrementalAlterConfigs",
    37: "CreatePartitions", 42: "DeleteGroups", 47: "OffsetDelete", 60: "DescribeCluster", 61: "DescribeProducers",
    65: "DescribeTransactions", 66: "ListTransactions", 68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe",
    71: "GetTelemetrySubscriptions", 72: "PushTelemetry", 75: "DescribeTopicPartitions",
}


class RefusedRequest(OSError):
    """A frame the door does not pass on: too large, or the connection ended inside it."""


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket, max_bytes: int = bounds.KAFKA_REQUEST_BYTES) -> bytes | None:
    """The next request on ``sock``, whole: its 4-byte size and the request (what to forward as it is).
    None when the connection ends between two requests. Raises ``RefusedRequest`` for a size below 0 or
    above ``max_bytes`` (before reading any of it), or when the connection ends inside a request."""
    head = _recv_exactly(sock, 4)
    if not head:
        return None
    if len(head) < 4:
        raise RefusedRequest(f"the connection ended inside a request's size ({len(head)} of 4 bytes)")
    (size,) = struct.unpack(">i", head)
    if size < 0 or size > max_bytes:
        raise RefusedRequest(f"a request of {size} bytes (at most {max_bytes} are passed on)")
    body = _recv_exactly(sock, size)
    if len(body) < size:
        raise RefusedRequest(f"the connection ended inside a request ({len(body)} of {size} bytes)")
    return head + body


class Malformed(ValueError):
    """A request that does not parse as its API and version say."""


class ConfigRefused(Malformed):
    """A CreateTopics request that sets a topic's configs."""


class _Reader:
    def __init__(self, data: bytes, flexible: bool):
        self.data, self.pos, self.flexible = data, 0, flexible

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise Malformed(f"the request ends {self.pos + n - len(self.data)} bytes too soon")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def boolean(self) -> bool:
        return self.take(1) != b"\x00"

    def uvarint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if value > 0xFFFFFFFF:
                    raise Malformed("a varint larger than 32 bits")
                return value
        raise Malformed("a varint longer than 5 bytes")

    def array(self, *, nullable: bool = False) -> int | None:
        """The number of elements of the array that starts here (None: null, refused unless ``nullable``)."""
        n = self.uvarint() - 1 if self.flexible else self.int32()
        return self._checked(n, nullable, "an array")

    def string(self, *, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        n = self._checked(n, nullable, "a string")
        if n is None:
            return None
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as err:
            raise Malformed("a string that is not UTF-8") from err

    def _checked(self, n: int, nullable: bool, what: str) -> int | None:
        if n < -1 or (n == -1 and not nullable):
            raise Malformed(f"{what} of length {n}")
        if n > len(self.data) - self.pos:  # an element takes a byte at least: never loop past the end
            raise Malformed(f"{what} of length {n} with {len(self.data) - self.pos} bytes left")
        return None if n == -1 else n

    def tags(self) -> None:
        """Skip a flexible version's tagged fields (none in other versions)."""
        if self.flexible:
            for _ in range(self._checked(self.uvarint(), False, "tagged fields")):
                self.uvarint()  # the tag
                self.take(self.uvarint())


def parse_header(frame: bytes) -> tuple[int, int, _Reader]:
    """(api key, api version, a reader at the request body) of a whole frame (as ``read_frame`` returns);
    raises ``Malformed``. The request header is v1 (client_id: an int16-length nullable string), v2 (the
    same, then tagged fields) for an API version that is flexible."""
    if len(frame) < 4 or struct.unpack(">i", frame[:4])[0] != len(frame) - 4:
        raise Malformed("not one whole request frame (its size does not match)")
    reader = _Reader(frame[4:], flexible=False)
    api_key, api_version = reader.int16(), reader.int16()
    reader.int32()  # correlation id
    reader.string(nullable=True)  # client id: an int16 length in every header version
    known = COUNTED_APIS.get(api_key)
    reader.flexible = bool(known) and api_version >= known[2]
    reader.tags()  # header v2's
    return api_key, api_version, reader


def _create_topics(r: _Reader, version: int) -> list[tuple[str, int]]:
    """[(topic, partitions)]; ``Malformed`` for a topic that sets configs of its own (refused: see above)."""
    topics = []
    for _ in range(r.array()):
        name = r.string()
        num_partitions = r.int32()
        r.int16()  # replication factor
        assignments = r.array()
        for _ in range(assignments):
            r.int32()  # partition index
            for _ in range(r.array()):
                r.int32()  # broker id
            r.tags()
        configs = []
        for _ in range(r.array()):
            configs.append(r.string())
            r.string(nullable=True)
            r.tags()
        r.tags()
        if configs:
            raise ConfigRefused(f"topic {name!r} sets configs of its own ({', '.join(configs[:3])}); a graded "
                                f"submission's topics take the broker's")
        if num_partitions == -1:  # the assignments say, or the broker's default
            partitions = assignments or BROKER_DEFAULT_PARTITIONS
        else:  # the broker refuses both at once, and a count below 1: count the larger anyway
            partitions = max(num_partitions, assignments, 0)
        topics.append((name, partitions))
    r.int32()  # timeout
    if version >= 1:
        r.boolean()  # validate only (counted all the same)
    r.tags()
    return topics


def _create_partitions(r: _Reader) -> list[tuple[str, int]]:
    topics = []
    for _ in range(r.array()):
        name = r.string()
        count = r.int32()  # the new total: counted as if all new
        for _ in range(r.array(nullable=True) or 0):
            for _ in range(r.array()):
                r.int32()
            r.tags()
        r.tags()
        topics.append((name, max(count, 0)))
    r.int32()  # timeout
    r.boolean()  # validate only
    r.tags()
    return topics


def _init_producer_id(r: _Reader) -> str | None:
    """The transactional id an InitProducerId request names (None: an idempotent producer's)."""
    return r.string(nullable=True)


def _metadata(r: _Reader, version: int) -> tuple[list[str], bool]:
    """(the topic names asked for, whether the broker may auto-create them)."""
    names = []
    for _ in range(r.array(nullable=version >= 1) or 0):  # null (or, in v0, empty): every topic
        if version >= 10:
            r.take(16)  # topic id
        name = r.string(nullable=version >= 10)
        r.tags()
        if name is not None:
            names.append(name)
    auto_create = r.boolean() if version >= 4 else True
    return names, auto_create


class KafkaBudget:
    """What one sandbox may do with the broker, counted over all its connections: ``admit(frame)`` before the
    door passes a request on. ``prefix``: the student's topic prefix (``STREAMLAB_TOPIC_PREFIX``); a
    Metadata request's topic outside it is not counted (the broker's ACLs let the sandbox create none)."""

    def __init__(self, max_topics: int = bounds.KAFKA_TOPICS, max_partitions: int = bounds.KAFKA_PARTITIONS, *,
                 prefix: str = "", max_produced_bytes: int = bounds.KAFKA_PRODUCED_BYTES,
                 max_producer_ids: int = bounds.KAFKA_PRODUCER_IDS,
                 max_transactional_ids: int = bounds.KAFKA_TRANSACTIONAL_IDS):
        self.max_topics, self.max_partitions, self.prefix = max_topics, max_partitions, prefix
        self.max_produced_bytes, self.max_producer_ids = max_produced_bytes, max_producer_ids
        self.max_transactional_ids = max_transactional_ids
        self.topics = 0
        self.partitions = 0
        self.produced_bytes = 0
        self.producer_ids = 0
        self.transactional_ids: set[str] = set()
        self._seen: set[str] = set()  # names created or asked for with auto-creation: at most max_topics
        self._lock = threading.Lock()

    def usage(self) -> dict:
        """What the sandbox used of the budget (for the result's ``usage``)."""
        return {"kafka_topics": self.topics, "kafka_partitions": self.partitions,
                "kafka_produced_mb": round(self.produced_bytes / 2**20, 1), "kafka_producer_ids": self.producer_ids,
                "kafka_transactional_ids": len(self.transactional_ids)}

    def admit(self, frame: bytes) -> str | None:
        """None to pass ``frame`` (a whole request, as ``read_frame`` returns it) on; else why not.
        A refused request counts nothing."""
        if len(frame) < 8:
            return "a request shorter than its header"
        api_key = struct.unpack(">h", frame[4:6])[0]
        if api_key not in PASSED_APIS:
            return (f"API {api_key} is not one a graded submission may use (configs, ACLs, quotas and such "
                    f"are the grader's)")
        if api_key == PRODUCE:
            with self._lock:
                if self.produced_bytes + len(frame) > self.max_produced_bytes:
                    return (f"Produce would make it more than {self.max_produced_bytes // 2**20} MB written by this "
                            f"submission")
                self.produced_bytes += len(frame)
            return None
        if api_key not in COUNTED_APIS:
            return None  # neither creates nor keeps anything the budget counts: not even parsed
        try:
            api_key, version, reader = parse_header(frame)
            name, newest, _ = COUNTED_APIS[api_key]
            if not 0 <= version <= newest:
                return f"{name} v{version}: a version this door does not know (0-{newest})"
            if api_key == INIT_PRODUCER_ID:
                return self._admit_producer(_init_producer_id(reader))
            if api_key == CREATE_TOPICS:
                asked = [(topic, partitions, True) for topic, partitions in _create_topics(reader, version)]
            elif api_key == CREATE_PARTITIONS:
                asked = [(topic, partitions, False) for topic, partitions in _create_partitions(reader)]
            else:
                names, auto_create = _metadata(reader, version)
                asked = [(topic, BROKER_DEFAULT_PARTITIONS, True) for topic in dict.fromkeys(names)
                         if auto_create and topic.startswith(self.prefix)]
        except ConfigRefused as err:
            return str(err)
        except Malformed as err:
            return f"a malformed request: {err}"
        with self._lock:
            if api_key == METADATA:
                asked = [entry for entry in asked if entry[0] not in self._seen]
            topics = self.topics + sum(1 for _, _, new_topic in asked if new_topic)
            partitions = self.partitions + sum(p for _, p, _ in asked)
            if topics > self.max_topics:
                return (f"{name} would make it {topics} topics created by this submission; "
                        f"at most {self.max_topics} are allowed")
            if partitions > self.max_partitions:
                return (f"{name} would make it {partitions} partitions created by this submission; "
                        f"at most {self.max_partitions} are allowed")
            self.topics, self.partitions = topics, partitions
            self._seen.update(topic for topic, _, new_topic in asked if new_topic)
        return None

    def _admit_producer(self, transactional_id: str | None) -> str | None:
        with self._lock:
            if self.producer_ids + 1 > self.max_producer_ids:
                return f"InitProducerId: at most {self.max_producer_ids} producers a submission"
            new_ids = self.transactional_ids | ({transactional_id} if transactional_id is not None else set())
            if len(new_ids) > self.max_transactional_ids:
                return (f"InitProducerId: at most {self.max_transactional_ids} transactional ids a submission "
                        f"(the broker keeps each for seven days)")
            self.producer_ids += 1
            self.transactional_ids = new_ids
        return None
