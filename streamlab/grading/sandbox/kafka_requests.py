"""Kafka requests as the Kafka door sees them: one frame at a time, and a budget for the topics and
partitions a sandbox may create (standard library only: no Kafka client is imported).

A Kafka client sends size-prefixed frames (an int32 big-endian length, then the request: header and
body; https://kafka.apache.org/protocol). ``read_frame`` reads one from a socket and refuses one larger
than ``MAX_REQUEST_BYTES``. ``TopicBudget.admit`` looks at each frame a sandbox sends and counts the
topics and partitions it would create:

* CreateTopics (API 19, versions 0-7, flexible from 5): each topic, and its ``num_partitions`` (or its
  manual assignments, or the broker's ``num.partitions`` when it gives neither);
* CreatePartitions (API 37, versions 0-3, flexible from 2): each topic's new total ``count``, as if all
  of it were new (the frame does not say how many the topic has: conservative);
* Metadata (API 3, versions 0-13, flexible from 9) that may auto-create topics (the course's broker has
  ``auto.create.topics.enable``): each topic name asked for that the budget has not seen before, with
  the broker's ``num.partitions``; a name it has seen (created, or asked for before) is not counted again,
  so a client asking for the metadata of its own topics again and again costs nothing.

Once a total would pass its maximum, ``admit`` returns why (and counts nothing of that request); the door
then closes the connection. A frame of these three APIs that cannot be parsed is refused too (the broker
would refuse it as well). Every other request passes. The budget is per sandbox, shared by all its
connections (thread-safe), and never refilled: the next student gets a new one.

The defaults, from what the labs create (``sl.new_topic`` in ``solutions/*/*.ipynb``): at most 11 topics
and 21 partitions (lab 04), plus lab 05's ``add_partitions`` to 3. A budget of 64 topics and 256
partitions leaves a correct submission ample room (re-run cells, extra scratch topics) and bounds what one
can cost the broker (each partition is a log with its own files).
"""
from __future__ import annotations

import socket
import struct
import threading

MAX_REQUEST_BYTES = 16 * 2**20  # no lab sends 1 MB (the producers' max.request.size); Kafka's cap is 100 MB
MAX_TOPICS = 64  # per sandbox: the labs create at most 11
MAX_PARTITIONS = 256  # per sandbox: the labs create at most 21 (+3 by CreatePartitions)
BROKER_DEFAULT_PARTITIONS = 1  # the course broker's num.partitions (streamlab/stack/kafka_settings.py)

METADATA, CREATE_TOPICS, CREATE_PARTITIONS = 3, 19, 37
# api key -> (name, highest version known, first flexible version)
COUNTED_APIS = {METADATA: ("Metadata", 13, 9), CREATE_TOPICS: ("CreateTopics", 7, 5),
                CREATE_PARTITIONS: ("CreatePartitions", 3, 2)}


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


def read_frame(sock: socket.socket, max_bytes: int = MAX_REQUEST_BYTES) -> bytes | None:
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
        for _ in range(r.array()):  # configs
            r.string()
            r.string(nullable=True)
            r.tags()
        r.tags()
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


class TopicBudget:
    """What one sandbox may create, counted over all its connections: ``admit(frame)`` before the door
    passes a request on. ``prefix``: the student's topic prefix (``STREAMLAB_TOPIC_PREFIX``); a
    Metadata request's topic outside it is not counted (the broker's ACLs let the sandbox create none)."""

    def __init__(self, max_topics: int = MAX_TOPICS, max_partitions: int = MAX_PARTITIONS, *, prefix: str = ""):
        self.max_topics, self.max_partitions, self.prefix = max_topics, max_partitions, prefix
        self.topics = 0
        self.partitions = 0
        self._seen: set[str] = set()  # names created or asked for with auto-creation: at most max_topics
        self._lock = threading.Lock()

    def admit(self, frame: bytes) -> str | None:
        """None to pass ``frame`` (a whole request, as ``read_frame`` returns it) on; else why not.
        A refused request counts nothing."""
        if len(frame) >= 8 and struct.unpack(">h", frame[4:6])[0] not in COUNTED_APIS:
            return None  # neither creates a topic nor a partition: not even parsed
        try:
            api_key, version, reader = parse_header(frame)
            name, newest, _ = COUNTED_APIS[api_key]
            if not 0 <= version <= newest:
                return f"{name} v{version}: a version this door does not know (0-{newest})"
            if api_key == CREATE_TOPICS:
                asked = [(topic, partitions, True) for topic, partitions in _create_topics(reader, version)]
            elif api_key == CREATE_PARTITIONS:
                asked = [(topic, partitions, False) for topic, partitions in _create_partitions(reader)]
            else:
                names, auto_create = _metadata(reader, version)
                asked = [(topic, BROKER_DEFAULT_PARTITIONS, True) for topic in dict.fromkeys(names)
                         if auto_create and topic.startswith(self.prefix)]
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
