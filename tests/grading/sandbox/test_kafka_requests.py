"""The Kafka door's reading of requests (streamlab.grading.sandbox.kafka_requests): real frames, encoded by
kafka-python's request classes and recorded from Kafka's own admin tool (the cached jars), and hostile ones.
"""
from __future__ import annotations

import secrets
import socket
import struct
import subprocess
import threading

import pytest
from kafka.protocol.admin import (
    CreatePartitionsRequest_v0,
    CreatePartitionsRequest_v1,
    CreateTopicsRequest_v0,
    CreateTopicsRequest_v1,
    CreateTopicsRequest_v2,
    CreateTopicsRequest_v3,
)
from kafka.protocol.api import Request
from kafka.protocol.init_producer_id import InitProducerIdRequest_v1
from kafka.protocol.metadata import (
    MetadataRequest_v0,
    MetadataRequest_v1,
    MetadataRequest_v4,
    MetadataRequest_v8,
)
from kafka.protocol.produce import ProduceRequest_v3
from kafka.protocol.types import Boolean, CompactArray, CompactString, Int16, Int32, Int64, Schema, TaggedFields

from streamlab.grading import bounds
from streamlab.grading.sandbox import kafka_requests as kr
from streamlab.stack import console, kafka_settings


class CreateTopicsRequest_v7(Request):
    """The newest CreateTopics (flexible), which kafka-python does not ship: for frames the Java client
    would send with any content (the test checks this encoding against a recorded one)."""
    API_KEY, API_VERSION, FLEXIBLE_VERSION, RESPONSE_TYPE = 19, 7, True, None
    SCHEMA = Schema(
        ("topics", CompactArray(
            ("name", CompactString("utf-8")), ("num_partitions", Int32), ("replication_factor", Int16),
            ("assignments", CompactArray(("partition_index", Int32), ("broker_ids", CompactArray(Int32)),
                                         ("tags", TaggedFields))),
            ("configs", CompactArray(("name", CompactString("utf-8")), ("value", CompactString("utf-8")),
                                     ("tags", TaggedFields))),
            ("tags", TaggedFields))),
        ("timeout_ms", Int32), ("validate_only", Boolean), ("tags", TaggedFields),
    )


class CreatePartitionsRequest_v3(Request):
    API_KEY, API_VERSION, FLEXIBLE_VERSION, RESPONSE_TYPE = 37, 3, True, None
    SCHEMA = Schema(
        ("topics", CompactArray(
            ("name", CompactString("utf-8")), ("count", Int32),
            ("assignments", CompactArray(("broker_ids", CompactArray(Int32)), ("tags", TaggedFields))),
            ("tags", TaggedFields))),
        ("timeout_ms", Int32), ("validate_only", Boolean), ("tags", TaggedFields),
    )


def frame(request, correlation_id: int = 7, client_id: str = "test") -> bytes:
    """A request as a client puts it on the wire (kafka-python's ``KafkaProtocol.send_request``)."""
    header = request.build_header(correlation_id=correlation_id, client_id=client_id)  # kept: encode() holds
    message = header.encode() + request.encode()  # its object weakly
    return struct.pack(">i", len(message)) + message


def create_topics(version: int, topics: list[tuple[str, int]], assignments: dict | None = None) -> bytes:
    """CreateTopics ``version`` for ``topics`` [(name, num_partitions)]; ``assignments``: {name: n partitions}."""
    assignments = assignments or {}
    entries = [(name, n, 1, [(p, [1]) for p in range(assignments.get(name, 0))], []) for name, n in topics]
    if version == 7:
        entries = [(name, n, 1, [(p, ids, {}) for p, ids in placed], [], {}) for name, n, _, placed, _ in entries]
        return frame(CreateTopicsRequest_v7(topics=entries, timeout_ms=30000, validate_only=False, tags={}))
    request = {0: CreateTopicsRequest_v0, 1: CreateTopicsRequest_v1, 2: CreateTopicsRequest_v2,
               3: CreateTopicsRequest_v3}[version]
    if version == 0:
        return frame(request(create_topic_requests=entries, timeout=30000))
    return frame(request(create_topic_requests=entries, timeout=30000, validate_only=False))


def create_partitions(version: int, topics: list[tuple[str, int]]) -> bytes:
    if version == 3:
        return frame(CreatePartitionsRequest_v3(topics=[(name, count, None, {}) for name, count in topics],
                                                timeout_ms=30000, validate_only=False, tags={}))
    request = {0: CreatePartitionsRequest_v0, 1: CreatePartitionsRequest_v1}[version]
    return frame(request(topic_partitions=[(name, (count, None)) for name, count in topics], timeout=30000,
                         validate_only=False))


def metadata(version: int, names: list[str] | None, auto_create: bool = True) -> bytes:
    if version == 0:
        return frame(MetadataRequest_v0(topics=names or []))
    if version == 1:
        return frame(MetadataRequest_v1(topics=names))
    if version == 4:
        return frame(MetadataRequest_v4(topics=names, allow_auto_topic_creation=auto_create))
    return frame(MetadataRequest_v8(topics=names, allow_auto_topic_creation=auto_create,
                                    include_cluster_authorized_operations=False,
                                    include_topic_authorized_operations=False))


def with_size(message: bytes) -> bytes:
    return struct.pack(">i", len(message)) + message


# ------------------------------------------------------------------------------------------ read_frame

def test_read_frame_reads_whole_requests_and_none_at_the_end():
    inside, outside = socket.socketpair()
    first, second = create_topics(3, [("a", 1)]), metadata(8, ["a"])
    inside.sendall(first + second[:5])
    threading.Timer(0.2, lambda: (inside.sendall(second[5:]), inside.close())).start()  # in two pieces
    outside.settimeout(10)
    assert kr.read_frame(outside) == first
    assert kr.read_frame(outside) == second
    assert kr.read_frame(outside) is None
    outside.close()


@pytest.mark.parametrize("wire, why", [
    (struct.pack(">i", 2**31 - 1) + b"x" * 100, "2147483647 bytes"),  # "2 GB", refused before reading it
    (struct.pack(">i", bounds.KAFKA_REQUEST_BYTES + 1), "bytes"),
    (struct.pack(">i", -8) + b"x" * 8, "-8 bytes"),
    (struct.pack(">i", 100) + b"x" * 10, "10 of 100 bytes"),  # the connection ends inside it
    (b"\x00\x00", "2 of 4 bytes"),
])
def test_read_frame_refuses_what_it_will_not_pass_on(wire, why):
    inside, outside = socket.socketpair()
    inside.sendall(wire)
    inside.close()
    outside.settimeout(10)
    with pytest.raises(kr.RefusedRequest, match=why) as refused:
        kr.read_frame(outside)
    assert isinstance(refused.value, OSError)
    outside.close()


# ------------------------------------------------------------------------------------------ the budget

def test_the_default_partitions_are_the_brokers():
    assert kr.BROKER_DEFAULT_PARTITIONS == int(kafka_settings.BROKER_SETTINGS["num.partitions"])


@pytest.mark.parametrize("version", [0, 1, 2, 3, 7])
def test_create_topics_counts_topics_and_partitions(version):
    budget = kr.KafkaBudget(max_topics=10, max_partitions=20)
    assert budget.admit(create_topics(version, [("p-a", 3), ("p-b", 2)])) is None
    assert (budget.topics, budget.partitions) == (2, 5)
    # -1 partitions: as many as the manual assignment has, or the broker's num.partitions
    assert budget.admit(create_topics(version, [("p-c", -1), ("p-d", -1)], assignments={"p-c": 4})) is None
    assert (budget.topics, budget.partitions) == (4, 5 + 4 + kr.BROKER_DEFAULT_PARTITIONS)


@pytest.mark.parametrize("version", [0, 1, 3])
def test_create_partitions_counts_the_new_total(version):
    budget = kr.KafkaBudget(max_topics=10, max_partitions=20)
    assert budget.admit(create_partitions(version, [("p-a", 3), ("p-b", 4)])) is None
    assert (budget.topics, budget.partitions) == (0, 7)


@pytest.mark.parametrize("version", [0, 3, 7])
def test_one_topic_of_2000_partitions_is_refused_and_counts_nothing(version):
    budget = kr.KafkaBudget()
    why = budget.admit(create_topics(version, [("p-huge", 2000)]))
    assert why and "2000 partitions" in why and "256" in why
    assert (budget.topics, budget.partitions) == (0, 0)
    assert budget.admit(create_topics(version, [("p-fine", 2)])) is None  # a lab's topic still passes


@pytest.mark.parametrize("version", [3, 7])
def test_50_topics_of_100_partitions_are_refused(version):
    at_once = kr.KafkaBudget()
    assert "5000 partitions" in at_once.admit(create_topics(version, [(f"p-{i}", 100) for i in range(50)]))
    one_by_one = kr.KafkaBudget()
    answers = [one_by_one.admit(create_topics(version, [(f"p-{i}", 100)])) for i in range(50)]
    assert answers[:2] == [None, None] and all(answers[2:])
    assert (one_by_one.topics, one_by_one.partitions) == (2, 200)


def test_too_many_small_topics_are_refused():
    budget = kr.KafkaBudget()
    answers = [budget.admit(create_topics(7, [(f"p-{i}", 1)])) for i in range(bounds.KAFKA_TOPICS + 5)]
    assert answers[:bounds.KAFKA_TOPICS] == [None] * bounds.KAFKA_TOPICS
    assert all("topics" in why for why in answers[bounds.KAFKA_TOPICS:])
    assert budget.topics == bounds.KAFKA_TOPICS


@pytest.mark.parametrize("version", [0, 1, 3])
def test_create_partitions_to_5000_is_refused(version):
    budget = kr.KafkaBudget()
    assert budget.admit(create_topics(3, [("p-a", 2)])) is None
    assert "partitions" in budget.admit(create_partitions(version, [("p-a", 5000)]))
    assert (budget.topics, budget.partitions) == (1, 2)


def test_what_the_labs_create_passes():
    """Lab 04, the most: 11 topics of 1-2 partitions (21); lab 05 grows a topic to 3 partitions."""
    budget = kr.KafkaBudget()
    for i in range(10):
        assert budget.admit(create_topics(3, [(f"lab04-{i}", 2)])) is None
    assert budget.admit(create_topics(3, [("lab04-tx-batches", 1)])) is None
    assert budget.admit(create_partitions(1, [("lab05-jobinput", 3)])) is None
    assert budget.partitions == 24 and budget.partitions * 10 < bounds.KAFKA_PARTITIONS


@pytest.mark.parametrize("version", [0, 1, 4, 8])
def test_metadata_that_may_auto_create_counts_each_new_name_once(version):
    budget = kr.KafkaBudget(max_topics=3, max_partitions=100, prefix="p-")
    assert budget.admit(create_topics(3, [("p-made", 2)])) is None
    for _ in range(3):  # a client asking again and again for its own topics costs nothing
        assert budget.admit(metadata(version, ["p-made", "p-new", "p-new"])) is None
    assert (budget.topics, budget.partitions) == (2, 2 + kr.BROKER_DEFAULT_PARTITIONS)
    assert budget.admit(metadata(version, ["other-student-topic"])) is None  # the ACLs let it create none
    assert budget.admit(metadata(version, None)) is None  # every topic: creates none
    assert budget.admit(metadata(version, ["p-3"])) is None
    assert "topics" in budget.admit(metadata(version, ["p-4"]))
    if version >= 4:  # a client that says "do not create"
        assert budget.admit(metadata(version, ["p-5"], auto_create=False)) is None
    assert budget.topics == 3


def test_other_requests_pass_unread():
    produce = frame(ProduceRequest_v3(transactional_id=None, required_acks=1, timeout=1000,
                                      topics=[("any", [(0, b"\xff" * 64)])]))
    budget = kr.KafkaBudget(max_topics=0, max_partitions=0)
    assert budget.admit(produce) is None
    assert budget.admit(with_size(struct.pack(">hhi", 18, 3, 1) + b"\x00\x00garbage")) is None  # ApiVersions


class InitProducerIdRequest_v4(Request):
    """The flexible InitProducerId (v2 on), which kafka-python does not ship."""
    API_KEY, API_VERSION, FLEXIBLE_VERSION, RESPONSE_TYPE = 22, 4, True, None
    SCHEMA = Schema(("transactional_id", CompactString("utf-8")), ("transaction_timeout_ms", Int32),
                    ("producer_id", Int64), ("producer_epoch", Int16), ("tags", TaggedFields))


def init_producer_id(version: int, transactional_id: str | None) -> bytes:
    if version == 4:
        return frame(InitProducerIdRequest_v4(transactional_id=transactional_id, transaction_timeout_ms=60000,
                                              producer_id=-1, producer_epoch=-1, tags={}))
    return frame(InitProducerIdRequest_v1(transactional_id=transactional_id, transaction_timeout_ms=60000))


def produce(size: int) -> bytes:
    return frame(ProduceRequest_v3(transactional_id=None, required_acks=1, timeout=1000,
                                   topics=[("p-a", [(0, b"\xff" * size)])]))


@pytest.mark.parametrize("api_key", [30, 31, 49, 51, 45, 34, 17, 36, 999, -1])
def test_requests_no_client_needs_are_refused(api_key):
    """ACLs, quotas, credentials, reassignments, log dirs, SASL and unknown APIs are the grader's or nobody's.
    (AlterConfigs, which set a topic's segment.ms=1 through the old door, pass to the broker, which refuses the
    principal: test_tenancy; lesson 05's helper sends one and needs the broker's answer.)"""
    budget = kr.KafkaBudget()
    why = budget.admit(with_size(struct.pack(">hhih", api_key, 0, 1, -1) + b"\x00" * 16))
    assert why and f"API {api_key}" in why


def test_every_api_a_client_needs_passes():
    budget = kr.KafkaBudget()
    for api_key in (1, 2, 8, 9, 10, 11, 12, 13, 14, 18, 20, 23, 24, 25, 26, 28, 32, 33, 42, 44, 60, 71, 72, 75):
        assert budget.admit(with_size(struct.pack(">hhih", api_key, 0, 1, -1) + b"\x00" * 16)) is None, api_key


@pytest.mark.parametrize("version", [3, 7])
def test_a_topic_with_configs_of_its_own_is_refused(version):
    """segment.ms=1 made the broker open a file per request until it died of 'Too many open files'."""
    budget = kr.KafkaBudget()
    entries = [("p-seg", 1, 1, [], [("segment.ms", "1")])]
    if version == 7:
        request = frame(CreateTopicsRequest_v7(topics=[("p-seg", 1, 1, [], [("segment.ms", "1", {})], {})],
                                               timeout_ms=30000, validate_only=False, tags={}))
    else:
        request = frame(CreateTopicsRequest_v3(create_topic_requests=entries, timeout=30000, validate_only=False))
    why = budget.admit(request)
    assert why and "segment.ms" in why and "configs" in why
    assert (budget.topics, budget.partitions) == (0, 0)


def test_bytes_produced_are_counted_and_capped():
    budget = kr.KafkaBudget(max_produced_bytes=10_000)
    assert budget.admit(produce(4000)) is None and budget.admit(produce(4000)) is None
    why = budget.admit(produce(4000))
    assert why and "written by this submission" in why
    assert 8000 < budget.produced_bytes < 10_000
    assert budget.usage()["kafka_produced_mb"] == round(budget.produced_bytes / 2**20, 1)


@pytest.mark.parametrize("version", [1, 4])
def test_transactional_ids_are_capped_and_one_reused_costs_nothing(version):
    """100,000 transactional ids stayed in the broker for seven days; Kafka has no request to delete one."""
    budget = kr.KafkaBudget(max_transactional_ids=3, max_producer_ids=50)
    for _ in range(10):  # lab 04's sink: one id, its producer made again after each crash
        assert budget.admit(init_producer_id(version, "p-tx-sink")) is None
    assert budget.admit(init_producer_id(version, None)) is None  # an idempotent producer
    assert budget.admit(init_producer_id(version, "p-tx-2")) is None
    assert budget.admit(init_producer_id(version, "p-tx-3")) is None
    why = budget.admit(init_producer_id(version, "p-tx-4"))
    assert why and "transactional ids" in why
    assert budget.transactional_ids == {"p-tx-sink", "p-tx-2", "p-tx-3"}
    many = kr.KafkaBudget(max_producer_ids=5)
    answers = [many.admit(init_producer_id(version, None)) for _ in range(7)]
    assert answers[:5] == [None] * 5 and all(answers[5:])


def _malformed() -> dict[str, bytes]:
    good = create_topics(3, [("p-a", 3)])
    body = good[4:]
    header = struct.pack(">hhih", 19, 3, 7, 4) + b"test"
    flexible = create_topics(7, [("p-a", 3)])
    flexible_header_end = 4 + 10 + 4 + 1  # size, api key/version/correlation id/client id length, "test", tags
    return {
        "truncated": with_size(body[:-7]),
        "size that lies": struct.pack(">i", len(body) + 10) + body,
        "negative array length": with_size(header + struct.pack(">i", -5) + body[len(header) + 4:]),
        "null topics": with_size(header + struct.pack(">i", -1) + struct.pack(">i", 30000) + b"\x00"),
        "array longer than the frame": with_size(header + struct.pack(">i", 1_000_000_000) + b"\x00" * 16),
        "negative string length": with_size(header + struct.pack(">ih", 1, -3) + b"\x00" * 40),
        "compact array longer than the frame": with_size(
            flexible[4:flexible_header_end] + b"\xff\xff\xff\xff\x0f" + b"\x00" * 8),
        "varint of 6 bytes": with_size(flexible[4:flexible_header_end] + b"\xff" * 6 + b"\x00" * 8),
        "unknown version": with_size(struct.pack(">hhih", 19, 8, 7, 4) + b"test" + body[len(header):]),
        "header cut short": with_size(struct.pack(">hh", 19, 3)),
        "partitions truncated": with_size(create_partitions(3, [("p-a", 3)])[4:-3]),
        "metadata truncated": with_size(metadata(8, ["p-a"])[4:-4]),
    }


@pytest.mark.parametrize("case", list(_malformed()))
def test_malformed_creation_requests_are_refused(case):
    budget = kr.KafkaBudget()
    assert budget.admit(_malformed()[case])
    assert (budget.topics, budget.partitions) == (0, 0)


def test_one_budget_for_all_connections_of_a_sandbox():
    budget = kr.KafkaBudget(max_topics=1000, max_partitions=100)
    request = create_topics(3, [("p-x", 1)])
    answers = []
    threads = [threading.Thread(target=lambda: answers.extend(budget.admit(request) for _ in range(50)))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sum(why is None for why in answers) == 100 and budget.partitions == 100


# ------------------------------------------------------------------ Kafka's own admin tool, recorded

class Recorder:
    """A relay on 127.0.0.1 between a Kafka client and the test broker that keeps every request (read
    with ``read_frame``), puts each through ``budget`` if one is given (closing the connection on a
    refusal, as the door does), and rewrites the broker's port in its answers to its own (so the client,
    which connects to the broker the metadata names, keeps coming back here)."""

    def __init__(self, servers: str, budget: kr.KafkaBudget | None = None):
        self.host, port = servers.split(",")[0].rsplit(":", 1)
        self.broker_port = int(port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.budget, self.frames, self.refusals = budget, [], []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                inner, _ = self.server.accept()
                outer = socket.create_connection((self.host, self.broker_port), timeout=30)
            except OSError:
                return
            inner.settimeout(60)
            threading.Thread(target=self._requests, args=(inner, outer), daemon=True).start()
            threading.Thread(target=self._answers, args=(inner, outer), daemon=True).start()

    def _requests(self, inner, outer) -> None:
        try:
            while (request := kr.read_frame(inner)) is not None:
                self.frames.append(request)
                if self.budget is not None and (why := self.budget.admit(request)):
                    self.refusals.append(why)
                    return
                outer.sendall(request)
        except OSError:
            pass
        finally:
            inner.close()
            outer.close()

    def _answers(self, inner, outer) -> None:
        theirs = self.host.encode() + struct.pack(">i", self.broker_port)
        mine = self.host.encode() + struct.pack(">i", self.port)
        try:
            while (answer := kr.read_frame(outer, max_bytes=1 << 30)) is not None:
                inner.sendall(answer.replace(theirs, mine))  # the same length: the size stays right
        except OSError:
            pass
        finally:
            inner.close()
            outer.close()

    def of_api(self, api_key: int) -> list[bytes]:
        return [f for f in self.frames if struct.unpack(">h", f[4:6])[0] == api_key]

    def close(self) -> None:
        self.server.close()


def kafka_topics(recorder: Recorder, *args: str, tmp_path) -> subprocess.CompletedProcess:
    config = tmp_path / "admin.properties"  # a refused request fails in seconds, not the default minute
    config.write_text("request.timeout.ms=5000\ndefault.api.timeout.ms=8000\n")
    cmd = console.command("topics", [*args, "--command-config", str(config)],
                          servers=f"127.0.0.1:{recorder.port}")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def fresh_topic(kafka_bootstrap):
    from kafka import KafkaAdminClient

    name = f"recorded-{secrets.token_hex(3)}"
    yield name
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.delete_topics([name])
    except Exception:  # noqa: BLE001 - not created
        pass
    admin.close()


def _partitions_of(servers: str, topic: str) -> int:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=servers, allow_auto_create_topics=False)
    try:
        return len(consumer.partitions_for_topic(topic) or ())
    finally:
        consumer.close()


@pytest.mark.slow
def test_the_java_admin_clients_requests_are_counted(kafka_bootstrap, fresh_topic, tmp_path):
    recorder = Recorder(kafka_bootstrap)
    try:
        created = kafka_topics(recorder, "--create", "--topic", fresh_topic, "--partitions", "3", tmp_path=tmp_path)
        assert created.returncode == 0, created.stderr[-2000:]
        altered = kafka_topics(recorder, "--alter", "--topic", fresh_topic, "--partitions", "5", tmp_path=tmp_path)
        assert altered.returncode == 0, altered.stderr[-2000:]
    finally:
        recorder.close()
    [create] = recorder.of_api(kr.CREATE_TOPICS)
    [grow] = recorder.of_api(kr.CREATE_PARTITIONS)
    assert struct.unpack(">hh", create[4:8]) == (19, 7) and struct.unpack(">hh", grow[4:8]) == (37, 3)
    assert recorder.of_api(kr.METADATA), "the admin client asked for metadata (v13)"
    budget = kr.KafkaBudget(max_topics=1, max_partitions=7)
    for request in recorder.frames:  # ApiVersions, Metadata, DescribeTopicPartitions, ...: only CreateTopics counts
        if request is not grow:
            assert budget.admit(request) is None
    assert (budget.topics, budget.partitions) == (1, 3)
    assert "partitions" in budget.admit(grow)  # 3 + 5 > 7: the new total counts as new partitions
    assert kr.KafkaBudget(max_topics=1, max_partitions=5).admit(grow) is None

    # The test's flexible encodings are the Java client's, byte for byte: the hostile cases above use them.
    correlation_id, client_id_length = struct.unpack(">ih", create[8:14])
    client_id = create[14:14 + client_id_length].decode()
    timeout = struct.unpack(">i", create[-6:-2])[0]
    assert frame(CreateTopicsRequest_v7(topics=[(fresh_topic, 3, -1, [], [], {})], timeout_ms=timeout,
                                        validate_only=False, tags={}), correlation_id, client_id) == create
    correlation_id, timeout = struct.unpack(">i", grow[8:12])[0], struct.unpack(">i", grow[-6:-2])[0]
    assert frame(CreatePartitionsRequest_v3(topics=[(fresh_topic, 5, None, {})], timeout_ms=timeout,
                                            validate_only=False, tags={}), correlation_id, client_id) == grow


def test_the_java_producers_auto_creation_is_counted_once(kafka_bootstrap, fresh_topic):
    """Producing to a topic that does not exist creates it (auto.create.topics.enable) through Metadata
    requests, not CreateTopics: the Java producer asks again and again (Metadata v13, by name)."""
    recorder = Recorder(kafka_bootstrap)
    try:
        cmd = console.command("producer", ["--topic", fresh_topic, "--producer-property", "max.block.ms=20000"],
                              servers=f"127.0.0.1:{recorder.port}")
        produced = subprocess.run(cmd, input="one\ntwo\n", capture_output=True, text=True, timeout=120)
    finally:
        recorder.close()
    assert produced.returncode == 0, produced.stderr[-2000:]
    asked = recorder.of_api(kr.METADATA)
    assert {struct.unpack(">h", request[6:8])[0] for request in asked} == {13}
    assert len(asked) >= 2 and sum(fresh_topic.encode() in request for request in asked) >= 2
    assert _partitions_of(kafka_bootstrap, fresh_topic) == kr.BROKER_DEFAULT_PARTITIONS
    budget = kr.KafkaBudget(max_topics=1, max_partitions=1, prefix="recorded-")
    assert [budget.admit(request) for request in recorder.frames] == [None] * len(recorder.frames)
    assert (budget.topics, budget.partitions) == (1, kr.BROKER_DEFAULT_PARTITIONS)
    assert kr.KafkaBudget(max_topics=0, prefix="recorded-").admit(next(r for r in asked if fresh_topic.encode() in r))
    assert kr.KafkaBudget(max_topics=0, prefix="someone-else-").admit(asked[-1]) is None


@pytest.mark.slow
def test_a_refused_request_never_reaches_the_broker(kafka_bootstrap, fresh_topic, tmp_path):
    recorder = Recorder(kafka_bootstrap, kr.KafkaBudget(max_topics=4, max_partitions=4))
    try:
        created = kafka_topics(recorder, "--create", "--topic", fresh_topic, "--partitions", "3", tmp_path=tmp_path)
        assert created.returncode == 0, created.stderr[-2000:]
        altered = kafka_topics(recorder, "--alter", "--topic", fresh_topic, "--partitions", "5", tmp_path=tmp_path)
    finally:
        recorder.close()
    assert altered.returncode != 0
    assert recorder.refusals and all("CreatePartitions" in why for why in recorder.refusals)
    assert _partitions_of(kafka_bootstrap, fresh_topic) == 3
