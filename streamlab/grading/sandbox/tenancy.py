"""Kafka tenancy, enforced by Kafka: each sandbox talks to the broker as a principal of its own.

The broker has a listener for the grader, ``SANDBOX`` (SASL/SCRAM, see ``kafka_settings``), and an
authorizer for which ``ANONYMOUS`` (every PLAINTEXT client: learners, the notebooks, the grader's
checks) is a super user and everyone else gets only what an ACL grants. Each ``--jobs`` slot of the
grader makes one principal with a random password only the grader knows (``Principal``) and a produce
quota (``bounds.KAFKA_PRODUCE_BYTES_PER_S``), and before each
student it grants that principal, and only it, every operation on the topics, consumer groups and
transactional ids whose names start with the student's prefix (prefixed ACLs): the broker refuses anything
else, including listing the other topics and groups, or fencing another student's transactional producer.
Spark's Kafka sink and source need no group ACL (the source reads offsets with an admin client and assigns
partitions; only ``spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true`` makes it join a group, which
then needs the source option ``groupIdPrefix`` set to the prefix); a submission's own consumer groups and
transactional ids must start with the prefix (``STREAMLAB_TOPIC_PREFIX``), as the course's do.

The sandbox never holds the password: its Kafka connections go through the grader's ``KafkaDoor``,
which opens each one to the SANDBOX listener, authenticates as the slot's principal, and then joins the
two. A client inside sees a plain Kafka on the address it was given.

How it talks to Kafka: through kafka-python's public interfaces only. ACLs through ``KafkaAdminClient``'s
methods; the SCRAM credential (KIP-554) and the produce quota (KIP-546), which kafka-python has no method
for, as requests sent with ``KafkaAdminClient.send_request`` (kafka-python's own
``DescribeClientQuotasRequest``, and the two alter requests defined here on its public ``Request``/``Schema``
classes, each a few lines of Kafka's published protocol); the door's login with kafka-python's
``KafkaProtocol`` (framing), ``SaslHandshakeRequest``/``SaslAuthenticateRequest`` and ``ScramClient``, on a
socket of our own, so no client object's private socket is taken over. Measured with
``benchmarks/tenancy_cost.py`` on the native broker (median of 5): a slot's principal made, let onto a
prefix, connected once and removed in 357 ms with the private calls this replaced
(``_send_request_to_node``, a ``BrokerConnection``'s ``_sock``), 345 ms with these. Kafka's own
``kafka-configs`` tool (a JVM per call, and it refuses to set a user's SCRAM credential and quota in one
call) takes 1.5-1.8 s per call, four calls per slot.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import socket
import time

from kafka.protocol.api import Request, Response
from kafka.protocol.types import (
    Array,
    Boolean,
    CompactArray,
    CompactBytes,
    CompactString,
    Float64,
    Int8,
    Int16,
    Int32,
    Schema,
    String,
    TaggedFields,
)

from ...stack import broker
from ...stack.kafka_settings import SANDBOX_LISTENER
from .. import bounds

MECHANISM = "SCRAM-SHA-256"
ITERATIONS = 4096  # Kafka's minimum for SCRAM
# What a principal may do with its own topics, groups and transactional ids: everything a client needs (ALTER on a
# topic is CreatePartitions: lab 05 grows a topic; the door bounds the partitions), never ALTER_CONFIGS (a topic's
# segment.ms=1 made the broker open a file per request until it died).
OPERATIONS = {"TOPIC": ("READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS"),
              "GROUP": ("READ", "DESCRIBE", "DELETE"),
              "TRANSACTIONAL_ID": ("WRITE", "DESCRIBE")}
READ_ALL = {"TOPIC": ("READ", "DESCRIBE", "DESCRIBE_CONFIGS"), "GROUP": ("READ", "DESCRIBE")}  # a teacher's


class AlterUserScramCredentialsResponse_v0(Response):
    API_KEY = 51
    API_VERSION = 0
    FLEXIBLE_VERSION = True
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("results", CompactArray(("user", CompactString("utf-8")), ("error_code", Int16),
                                 ("error_message", CompactString("utf-8")), ("tags", TaggedFields))),
        ("tags", TaggedFields),
    )


class AlterUserScramCredentialsRequest_v0(Request):
    """KIP-554's request (API 51), which kafka-python does not ship."""
    API_KEY = 51
    API_VERSION = 0
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = AlterUserScramCredentialsResponse_v0
    SCHEMA = Schema(
        ("deletions", CompactArray(("name", CompactString("utf-8")), ("mechanism", Int8), ("tags", TaggedFields))),
        ("upsertions", CompactArray(("name", CompactString("utf-8")), ("mechanism", Int8), ("iterations", Int32),
                                    ("salt", CompactBytes), ("salted_password", CompactBytes),
                                    ("tags", TaggedFields))),
        ("tags", TaggedFields),
    )


class AlterClientQuotasResponse_v0(Response):
    API_KEY = 49
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("entries", Array(("error_code", Int16), ("error_message", String("utf-8")),
                          ("entity", Array(("entity_type", String("utf-8")), ("entity_name", String("utf-8")))))),
    )


class AlterClientQuotasRequest_v0(Request):
    """KIP-546's request (API 49), which kafka-python does not ship either."""
    API_KEY = 49
    API_VERSION = 0
    RESPONSE_TYPE = AlterClientQuotasResponse_v0
    SCHEMA = Schema(
        ("entries", Array(("entity", Array(("entity_type", String("utf-8")), ("entity_name", String("utf-8")))),
                          ("ops", Array(("key", String("utf-8")), ("value", Float64), ("remove", Boolean))))),
        ("validate_only", Boolean),
    )


def produce_quota(servers: str, user: str) -> float | None:
    """The ``producer_byte_rate`` the broker holds for ``User:user`` (None: no quota)."""
    from kafka.protocol.admin import DescribeClientQuotasRequest_v0

    response = _send(servers, DescribeClientQuotasRequest_v0(components=[("user", 0, user)], strict=True))
    if response.error_code:
        raise RuntimeError(f"Kafka could not describe the quotas of {user}: {response.error_message}")
    return next((value for _, values in response.entries for key, value in values if key == "producer_byte_rate"),
                None)


def _admin(servers: str):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=30000, client_id="streamlab-grader")


def _send(servers: str, request):
    """One request to the least loaded broker, and its response (kafka-python's public ``send_request``)."""
    admin = _admin(servers)
    try:
        return admin.send_request(request)
    finally:
        admin.close()


def _set_produce_quota(servers: str, user: str, bytes_per_s: float | None) -> None:
    """``producer_byte_rate`` of ``User:user`` (None: removed)."""
    op = ("producer_byte_rate", float(bytes_per_s or 0), bytes_per_s is None)
    response = _send(servers, AlterClientQuotasRequest_v0(entries=[([("user", user)], [op])], validate_only=False))
    failed = [f"error {code} {message or ''}" for code, message, _ in response.entries if code]
    if failed:
        raise RuntimeError(f"Kafka refused the produce quota of {user}: " + "; ".join(failed))
    # The broker applies quotas from its metadata log, a moment after the controller took them (as ACLs):
    # return once it shows this one, so the student's first request meets it.
    wanted = None if bytes_per_s is None else float(bytes_per_s)
    deadline = time.monotonic() + bounds.ACL_WAIT_S
    while produce_quota(servers, user) != wanted:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the broker did not show the produce quota of {user} within {bounds.ACL_WAIT_S} s")
        time.sleep(0.05)


def _alter_scram(servers: str, *, upsert: tuple[str, str] | None = None, delete: str | None = None) -> None:
    upsertions, deletions = [], []
    if upsert:
        name, password = upsert
        salt = secrets.token_bytes(32)
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, ITERATIONS)
        upsertions.append((name, 1, ITERATIONS, salt, salted, {}))  # mechanism 1: SCRAM-SHA-256
    if delete:
        deletions.append((delete, 1, {}))
    response = _send(servers, AlterUserScramCredentialsRequest_v0(deletions=deletions, upsertions=upsertions,
                                                                  tags={}))
    failed = [f"{user}: error {code} {message or ''}" for user, code, message, _ in response.results if code]
    if failed:
        raise RuntimeError("Kafka refused the grader's principal: " + "; ".join(failed))


class Principal:
    """One slot's Kafka principal: ``User:<name>``, allowed its current student's topics only."""

    def __init__(self, servers: str, name: str | None = None):
        self.servers = servers  # a PLAINTEXT address: the grader (or the classroom's broker itself) administers
        self.name = name or f"sandbox-{secrets.token_hex(6)}"
        self.password = secrets.token_urlsafe(24)  # new each time: a principal made again gets a new one
        self.prefix: str | None = None
        _alter_scram(servers, upsert=(self.name, self.password))
        _set_produce_quota(servers, self.name, bounds.KAFKA_PRODUCE_BYTES_PER_S)  # a flood is slowed by the broker

    def allow_only(self, prefix: str) -> None:
        """From now on this principal may create, write, read, describe and delete the topics, consumer
        groups and transactional ids starting with ``prefix`` (``OPERATIONS``), and nothing else."""
        self._replace_acls(prefix)
        self.prefix = prefix

    def allow_reading_all(self) -> None:
        """From now on this principal may read and describe every topic and consumer group (a teacher's), and
        change nothing but what starts with its own name (``allow_only``'s grants on ``<name>-``)."""
        self._replace_acls(f"{self.name}-", read_all=True)
        self.prefix = f"{self.name}-"

    def _replace_acls(self, prefix: str | None, read_all: bool = False) -> None:
        from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType
        from kafka.admin.acl_resource import ACLResourcePatternType, ResourcePatternFilter

        mine = ACLFilter(principal=f"User:{self.name}", host="*", operation=ACLOperation.ANY,
                         permission_type=ACLPermissionType.ANY,
                         resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
        grants = [] if prefix is None else [(ResourceType.TOPIC, prefix, ACLResourcePatternType.PREFIXED),
                                            (ResourceType.GROUP, prefix, ACLResourcePatternType.PREFIXED),
                                            (ResourceType.TRANSACTIONAL_ID, prefix, ACLResourcePatternType.PREFIXED)]
        operations = {kind.name: OPERATIONS[kind.name] for kind, _, _ in grants}
        if read_all:  # Kafka's wildcard: the literal name "*" stands for every topic (or group)
            grants += [(ResourceType.TOPIC, "*", ACLResourcePatternType.LITERAL),
                       (ResourceType.GROUP, "*", ACLResourcePatternType.LITERAL)]
        admin = _admin(self.servers)
        try:
            admin.delete_acls([mine])
            if grants:
                result = admin.create_acls([ACL(principal=f"User:{self.name}", host="*",
                                                operation=getattr(ACLOperation, operation),
                                                permission_type=ACLPermissionType.ALLOW,
                                                resource_pattern=ResourcePattern(kind, name, pattern))
                                            for kind, name, pattern in grants
                                            for operation in (READ_ALL[kind.name] if name == "*"
                                                              else operations[kind.name])])
                if result.get("failed"):
                    raise RuntimeError(f"Kafka refused the ACLs for {self.name}: {result['failed']}")
            # The broker applies ACLs from its metadata log, a moment after the controller took them:
            # return once it shows exactly these, so the next student's first request meets them.
            wanted = {(kind, name) for kind, name, _ in grants}
            deadline = time.monotonic() + bounds.ACL_WAIT_S
            while {(acl.resource_pattern.resource_type, acl.resource_pattern.resource_name)
                   for acl in admin.describe_acls(mine)[0]} != wanted:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the broker did not show the ACLs of {self.name} within {bounds.ACL_WAIT_S} s")
                time.sleep(0.05)
        finally:
            admin.close()

    def remove(self) -> None:
        """Delete the principal's ACLs and credentials (best effort: the run's end, the broker may be gone)."""
        for step in (lambda: self._replace_acls(None), lambda: _set_produce_quota(self.servers, self.name, None),
                     lambda: _alter_scram(self.servers, delete=self.name)):
            try:
                step()
            except Exception:  # noqa: BLE001
                pass

    def connect(self, sandbox_servers: str, timeout_s: float = 10) -> socket.socket:
        """A socket to the SANDBOX listener, authenticated as this principal, ready for a client's requests.

        The SASL/SCRAM login (KIP-152: a handshake, then the SCRAM exchange in SaslAuthenticate requests) is
        made with kafka-python's public protocol classes on a socket of our own; after it, the socket carries
        the client's requests unchanged (each with its own correlation ids)."""
        return login(sandbox_servers, self.name, self.password, timeout_s)


def login(sandbox_servers: str, name: str, password: str, timeout_s: float = 10) -> socket.socket:
    """A socket to the SANDBOX listener at ``sandbox_servers``, authenticated as ``User:<name>`` with SCRAM (a
    handshake, then the SCRAM exchange in SaslAuthenticate requests: KIP-152), ready for a client's requests."""
    from kafka.protocol.parser import KafkaProtocol
    from kafka.protocol.sasl_authenticate import SaslAuthenticateRequest_v0
    from kafka.protocol.sasl_handshake import SaslHandshakeRequest_v1
    from kafka.sasl.scram import ScramClient

    host, port = sandbox_servers.split(",")[0].rsplit(":", 1)
    where = f"Kafka's {SANDBOX_LISTENER} listener at {sandbox_servers}"
    sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    protocol = KafkaProtocol(client_id="streamlab-door")

    def call(request):
        protocol.send_request(request)
        sock.sendall(protocol.send_bytes())
        while True:
            data = sock.recv(65536)
            if not data:
                raise OSError(f"{where} closed the connection during the login")
            responses = protocol.receive_bytes(data)
            if responses:
                return responses[0][1]

    try:
        handshake = call(SaslHandshakeRequest_v1(mechanism=MECHANISM))
        if handshake.error_code:
            raise OSError(f"{where} does not take {MECHANISM} (error {handshake.error_code})")
        scram = ScramClient(name, password, MECHANISM)

        def authenticate(message: bytes) -> bytes:
            answer = call(SaslAuthenticateRequest_v0(auth_bytes=message))
            if answer.error_code:
                raise OSError(f"could not authenticate to {where}: {answer.error_message}")
            return answer.auth_bytes

        scram.process_server_first_message(authenticate(scram.first_message()))
        scram.process_server_final_message(authenticate(scram.final_message()))
    except BaseException:
        sock.close()
        raise
    sock.settimeout(None)
    return sock


def sandbox_servers(bootstrap: str) -> str | None:
    """The SANDBOX listener's address for the Kafka at ``bootstrap``: ``STREAMLAB_KAFKA_SANDBOX_SERVERS``, else the
    native broker's own when ``bootstrap`` is that broker, else the one the broker itself advertises (``advertised``:
    the course's broker started from another data folder); None when there is none."""
    configured = os.environ.get("STREAMLAB_KAFKA_SANDBOX_SERVERS", "").strip()
    if configured:
        return configured
    state = broker.status()
    saved = broker.saved_state()
    if state.running and state.bootstrap_servers == bootstrap and saved.get("sandbox_port"):
        return f"127.0.0.1:{saved['sandbox_port']}"
    return advertised(bootstrap)


def advertised(bootstrap: str) -> str | None:
    """The SASL listener named SANDBOX that the broker at ``bootstrap`` advertises, asked of the broker (its
    ``advertised.listeners``, read as the PLAINTEXT super user), when this process can open a connection to it;
    None when the broker has none, does not answer within ``bounds.BROKER_PROBE_S``, or names an address that
    does not answer from here (a container's own name, say: then ``STREAMLAB_KAFKA_SANDBOX_SERVERS`` names it).

    Without it, a grader whose data folder is not the broker's (``STREAMLAB_DATA_DIR`` set, another checkout, the
    broker started by hand) found no saved state and graded with topic prefixes only, and a submission listed,
    read and deleted another tenant's consumer group."""
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    try:  # nothing listens there (a refused connection is told at once; the admin client would retry for 15 s)
        socket.create_connection((host, int(port)), timeout=bounds.BROKER_PROBE_S).close()
    except (OSError, ValueError):
        return None
    wait_ms = int(bounds.BROKER_PROBE_S * 1000)
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="streamlab-grader", request_timeout_ms=wait_ms,
                                 api_version_auto_timeout_ms=wait_ms)
    except Exception:  # noqa: BLE001 - no broker answers there: no listener to name
        return None
    try:
        node = admin.describe_cluster()["brokers"][0]["node_id"]
        wanted = {"advertised.listeners": None, "listener.security.protocol.map": None}
        responses = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(node), wanted)])
        entries = {entry[0]: entry[1] or "" for response in responses for resource in response.resources
                   for entry in resource[4]}
    except Exception:  # noqa: BLE001 - a broker that does not say: no listener to name
        return None
    finally:
        admin.close()
    protocols = dict(pair.split(":", 1) for pair in entries.get("listener.security.protocol.map", "").split(",")
                     if ":" in pair)
    if not protocols.get(SANDBOX_LISTENER, "").startswith("SASL_"):
        return None
    for listener in entries.get("advertised.listeners", "").split(","):
        name, _, address = listener.partition("://")
        host, _, port = address.rpartition(":")
        if name == SANDBOX_LISTENER and host and port.isdigit():
            try:
                socket.create_connection((host, int(port)), timeout=bounds.BROKER_PROBE_S).close()
            except OSError:
                return None
            return f"{host}:{port}"
    return None
