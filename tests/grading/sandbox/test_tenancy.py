"""Kafka tenancy enforced by Kafka: a grading principal touches its own topics, consumer groups and
transactional ids only (real broker, no Spark).

Checked twice: with a Kafka client that authenticates as the principal itself (what the broker allows
it), and from inside a real sandbox, whose client knows no password and goes through the grader's door.
"""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
import textwrap
import time

import pytest
from intruders import topic_with_records
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import (
    GroupAuthorizationFailedError,
    KafkaError,
    NoError,
    TransactionalIdAuthorizationFailedError,
)
from kafka.structs import OffsetAndMetadata

from streamlab.grading import bounds
from streamlab.grading.sandbox import box as sb
from streamlab.grading.sandbox.tenancy import Principal, advertised, produce_quota, sandbox_servers
from streamlab.stack import broker


@pytest.fixture(scope="module")
def listener(kafka_bootstrap):
    servers = sandbox_servers(kafka_bootstrap)
    if servers is None:
        pytest.skip(f"the Kafka at {kafka_bootstrap} has no SANDBOX listener (the course's native broker has one)")
    return servers


@pytest.fixture
def principal(kafka_bootstrap, listener):
    made = Principal(kafka_bootstrap)
    yield made
    made.remove()


@pytest.fixture
def theirs(kafka_bootstrap):
    """Another student's topic, with 3 records, created by the grader (ANONYMOUS, a super user)."""
    name = topic_with_records(kafka_bootstrap, f"other-student-{secrets.token_hex(3)}")
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    yield name
    admin.delete_topics([name])
    admin.close()


def _listed_once_created(admin, topic: str, timeout_s: float = 30) -> list[str]:
    """The topics ``admin`` lists once ``topic`` (just created) is among them: creating returns before
    every broker's metadata has it."""
    deadline = time.monotonic() + timeout_s
    while topic not in (listed := sorted(admin.list_topics())) and time.monotonic() < deadline:
        time.sleep(0.1)
    return listed


def _as(principal: Principal, listener: str) -> dict:
    return dict(bootstrap_servers=listener, security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                sasl_plain_username=principal.name, sasl_plain_password=principal.password)


@pytest.mark.slow
def test_a_principal_sees_and_changes_only_its_own_topics(principal, listener, theirs, kafka_bootstrap):
    prefix = f"mine-{secrets.token_hex(3)}-"
    principal.allow_only(prefix)
    admin = KafkaAdminClient(**_as(principal, listener))
    try:
        admin.create_topics([NewTopic(f"{prefix}a", 1, 1)])
        assert _listed_once_created(admin, f"{prefix}a") == [f"{prefix}a"]  # the others are not even listed
        for attempt in (lambda: admin.create_topics([NewTopic("not-mine", 1, 1)]),
                        lambda: admin.delete_topics([theirs])):
            with pytest.raises(KafkaError):
                attempt()
    finally:
        admin.close()
    consumer = KafkaConsumer(theirs, **_as(principal, listener), auto_offset_reset="earliest",
                             consumer_timeout_ms=3000)
    assert list(consumer) == []
    consumer.close()
    owner = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    assert theirs in owner.list_topics() and "not-mine" not in owner.list_topics()
    owner.delete_topics([f"{prefix}a"])
    owner.close()


def test_a_principal_cannot_change_its_own_topics_configs(principal, listener, kafka_bootstrap):
    """segment.ms=1 on a topic of its own made the broker open a file per request until it died: the principal may
    read its topics' configs, never alter them (Kafka's ACLs; the door refuses configs at creation too). It may
    still grow its own topic (CreatePartitions needs ALTER on the topic: lab 05 does it)."""
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions

    prefix = f"cfg-{secrets.token_hex(3)}-"
    principal.allow_only(prefix)
    admin = KafkaAdminClient(**_as(principal, listener))
    try:
        admin.create_topics([NewTopic(f"{prefix}a", 1, 1)])
        _listed_once_created(admin, f"{prefix}a")
        grown = admin.create_partitions({f"{prefix}a": NewPartitions(total_count=2)})
        assert [entry[1] for entry in grown.topic_errors] == [0], grown
        resource = ConfigResource(ConfigResourceType.TOPIC, f"{prefix}a", configs={"segment.ms": "1"})
        answer = admin.alter_configs([resource])
        assert [error for error, *_ in answer.resources] != [0], answer  # TOPIC_AUTHORIZATION_FAILED
    finally:
        admin.close()
    owner = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        described = owner.describe_configs([ConfigResource(ConfigResourceType.TOPIC, f"{prefix}a")])
        configs = {entry[0]: entry[1] for entry in described[0].resources[0][4]}
        assert configs["segment.ms"] != "1"
    finally:
        owner.delete_topics([f"{prefix}a"])
        owner.close()


def test_a_grader_whose_data_folder_is_not_the_brokers_asks_the_broker(kafka_bootstrap, listener, tmp_path,
                                                                        monkeypatch):
    """The course's broker reached from a data folder it was not started from (STREAMLAB_DATA_DIR set, another
    checkout): no saved state there says where its SANDBOX listener is, so the grader asks the broker. It used to
    find none and grade with topic prefixes only ("the broker ... has no SANDBOX listener", which was not true): a
    submission then listed, read and deleted another tenant's consumer group (test_grade_hostile_data's f_tenancy,
    whose run now grades from a data folder of its own)."""
    if "STREAMLAB_KAFKA_SANDBOX_SERVERS" in os.environ:
        pytest.skip("the tests' Kafka is a container: its SANDBOX listener is named by STREAMLAB_KAFKA_SANDBOX_SERVERS")
    monkeypatch.setenv("STREAMLAB_DATA_DIR", str(tmp_path))
    assert not broker.status().running and broker.saved_state() == {}, "no broker state in this folder"
    assert advertised(kafka_bootstrap) == listener
    assert sandbox_servers(kafka_bootstrap) == listener
    for nothing in ("127.0.0.1:1", "not an address"):   # nothing listens, or no address: no listener, at once
        assert advertised(nothing) is None


def test_a_principal_has_a_produce_quota_until_it_is_removed(kafka_bootstrap, listener):
    made = Principal(kafka_bootstrap)
    assert produce_quota(kafka_bootstrap, made.name) == bounds.KAFKA_PRODUCE_BYTES_PER_S
    made.remove()
    assert produce_quota(kafka_bootstrap, made.name) is None


def test_the_next_student_gets_the_principal_without_the_last_ones_topics(principal, listener, kafka_bootstrap):
    first, second = f"s1-{secrets.token_hex(3)}-", f"s2-{secrets.token_hex(3)}-"
    principal.allow_only(first)
    admin = KafkaAdminClient(**_as(principal, listener))
    admin.create_topics([NewTopic(f"{first}t", 1, 1)])
    admin.close()
    principal.allow_only(second)
    admin = KafkaAdminClient(**_as(principal, listener))
    try:
        assert admin.list_topics() == []
    finally:
        admin.close()
    KafkaAdminClient(bootstrap_servers=kafka_bootstrap).delete_topics([f"{first}t"])


class Tenant:
    """A principal allowed its prefix, and what a lab leaves behind with it: a topic with a record written
    by a live transactional producer (id ``<prefix>writer``), and a consumer group (``<prefix>group``) that
    committed offset 1 on it."""

    def __init__(self, servers: str, listener: str):
        self.prefix = f"tenant-{secrets.token_hex(3)}-"
        self.principal = Principal(servers)
        self.principal.allow_only(self.prefix)
        self.listener = listener
        self.topic, self.group, self.transactional_id = f"{self.prefix}t", f"{self.prefix}group", f"{self.prefix}writer"
        self.partition = TopicPartition(self.topic, 0)
        admin = self.admin()
        admin.create_topics([NewTopic(self.topic, 1, 1)])
        _listed_once_created(admin, self.topic)
        admin.close()
        self.producer = self.transactional_producer(self.transactional_id)
        self.write(self.producer)
        consumer = KafkaConsumer(**self.client(), group_id=self.group, enable_auto_commit=False)
        consumer.assign([self.partition])
        consumer.commit({self.partition: OffsetAndMetadata(1, "", -1)})
        consumer.close()

    def client(self) -> dict:
        return _as(self.principal, self.listener)

    def admin(self) -> KafkaAdminClient:
        return KafkaAdminClient(**self.client())

    def transactional_producer(self, transactional_id: str) -> KafkaProducer:
        """A transactional producer of this principal, initialised: it fences any earlier one of that id."""
        producer = KafkaProducer(**self.client(), transactional_id=transactional_id, enable_idempotence=True,
                                 max_block_ms=15000)
        try:
            producer.init_transactions()
        except BaseException:
            producer.close(timeout=5)
            raise
        return producer

    def write(self, producer: KafkaProducer) -> None:
        producer.begin_transaction()
        producer.send(self.topic, b"record")
        producer.commit_transaction()

    def close(self, servers: str) -> None:
        self.producer.close(timeout=5)
        self.principal.remove()
        owner = KafkaAdminClient(bootstrap_servers=servers)
        owner.delete_topics([self.topic])
        owner.close()


@pytest.fixture
def tenants(kafka_bootstrap, listener):
    made = []
    try:
        made += [Tenant(kafka_bootstrap, listener) for _ in range(2)]
        yield made
    finally:
        for tenant in made:
            tenant.close(kafka_bootstrap)


def _refused(attempt) -> bool:
    """Whether Kafka refused ``attempt`` as not authorized: by raising, or in DeleteGroups' results."""
    try:
        result = attempt()
    except (GroupAuthorizationFailedError, TransactionalIdAuthorizationFailedError):
        return True
    return isinstance(result, list) and all(error is GroupAuthorizationFailedError for _, error in result)


def test_a_principal_reaches_only_its_own_consumer_groups_and_transactional_ids(tenants, kafka_bootstrap):
    me, other = tenants
    admin = me.admin()
    try:
        listed = [group for group, _ in admin.list_consumer_groups()]
        assert me.group in listed and other.group not in listed
        assert admin.list_consumer_group_offsets(me.group)[me.partition].offset == 1
        assert _refused(lambda: admin.list_consumer_group_offsets(other.group))
        assert _refused(lambda: admin.describe_consumer_groups([other.group]))
        assert _refused(lambda: admin.delete_consumer_groups([other.group]))
        for transactional_id in (other.transactional_id, f"{other.prefix}another", "no-prefix-writer"):
            assert _refused(lambda tid=transactional_id: me.transactional_producer(tid)), transactional_id
        # its own: it deletes its group's offsets, and a new producer of its id fences its old one
        assert admin.delete_consumer_groups([me.group]) == [(me.group, NoError)]
        assert me.group not in [group for group, _ in admin.list_consumer_groups()]
        successor = me.transactional_producer(me.transactional_id)
        with pytest.raises(KafkaError):
            me.write(me.producer)
        me.write(successor)
        successor.close(timeout=5)
    finally:
        admin.close()
    other.write(other.producer)  # the other's producer was not fenced, its offsets are still there
    owner = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        assert owner.list_consumer_group_offsets(other.group)[other.partition].offset == 1
    finally:
        owner.close()


@pytest.mark.skipif(sb.unavailable_reason() is not None, reason=f"no sandbox here: {sb.unavailable_reason()}")
@pytest.mark.slow
def test_from_inside_the_sandbox_only_its_own_topics(principal, listener, theirs, kafka_bootstrap, tmp_path):
    prefix = f"boxed-{secrets.token_hex(3)}-"
    principal.allow_only(prefix)
    box = sb.Sandbox({"STREAMLAB_DATA_DIR": str(tmp_path / "work" / "data"), "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
                      "STREAMLAB_TOPIC_PREFIX": prefix}, principal=principal, sandbox_servers=listener)
    code = textwrap.dedent(f"""
        from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
        from kafka.admin import NewTopic
        servers = {kafka_bootstrap!r}
        admin = KafkaAdminClient(bootstrap_servers=servers)
        print("listed", sorted(admin.list_topics()))
        producer = KafkaProducer(bootstrap_servers=servers, max_block_ms=5000)
        producer.send({prefix!r} + "own", b"mine").get(timeout=30)
        print("own topic written")
        for what, attempt in [("delete", lambda: admin.delete_topics([{theirs!r}])),
                              ("write", lambda: producer.send({theirs!r}, b"x").get(timeout=10)),
                              ("create", lambda: admin.create_topics([NewTopic("planted-topic", 1, 1)]))]:
            try:
                attempt()
                print("DID", what)
            except Exception as err:
                print("refused", what, type(err).__name__)
        consumer = KafkaConsumer({theirs!r}, bootstrap_servers=servers, auto_offset_reset="earliest",
                                 consumer_timeout_ms=3000)
        print("read", len(list(consumer)))
    """)
    try:
        done = subprocess.run(box.command(sys.executable, "-c", code), capture_output=True, text=True, timeout=180)
    finally:
        box.close()
        box.remove_work()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "listed []" in done.stdout and "own topic written" in done.stdout, done.stdout
    assert "DID" not in done.stdout and done.stdout.count("refused") == 3, done.stdout
    assert "read 0" in done.stdout, done.stdout
    owner = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    topics = owner.list_topics()
    assert theirs in topics and "planted-topic" not in topics
    end = KafkaConsumer(bootstrap_servers=kafka_bootstrap)
    assert end.end_offsets([TopicPartition(theirs, 0)])[TopicPartition(theirs, 0)] == 3
    end.close()
    owner.delete_topics([t for t in topics if t.startswith(prefix)])
    owner.close()


def test_tenancy_uses_no_private_attribute_of_kafka_python():
    """One kafka-python upgrade must not break grading: the tenancy reaches Kafka only through kafka-python's
    public names (an attribute or module starting with ``_`` of a kafka-python object is private)."""
    import ast
    from pathlib import Path

    import streamlab.grading.sandbox.tenancy as tenancy

    tree = ast.parse(Path(tenancy.__file__).read_text())
    private = sorted({node.attr for node in ast.walk(tree)
                      if isinstance(node, ast.Attribute) and node.attr.startswith("_")
                      and not node.attr.startswith("__")
                      and not (isinstance(node.value, ast.Name) and node.value.id == "self")})
    assert private == [], f"tenancy.py uses private attributes: {private}"
    imported = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
    assert not [m for m in imported if m.startswith("kafka") and any(p.startswith("_") for p in m.split("."))]
