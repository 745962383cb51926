"""Kafka tenancy, enforced by Kafka: each sandbox talks to the broker as a principal of its own.

The broker has a listener for the grader, ``SANDBOX`` (SASL/SCRAM, see ``kafka_settings``), and an
authorizer for which ``ANONYMOUS`` (every PLAINTEXT client: learners, the notebooks, the grader's
checks) is a super user and everyone else gets only what an ACL grants. Each ``--jobs`` slot of the
grader makes one principal with a random password only the grader knows (``Principal``), and before each
student it grants that principal, and only it, every operation on the topics whose names start with the
student's prefix (prefixed ACLs): the broker refuses anything else, including listing the other topics.

The sandbox never holds the password: its Kafka connections go through the grader's ``KafkaDoor``,
which opens each one to the SANDBOX listener, authenticates as the slot's principal, and then joins the
two. A client inside sees a plain Kafka on the address it was given.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import socket

from kafka.protocol.api import Request, Response
from kafka.protocol.types import CompactArray, CompactBytes, CompactString, Int8, Int16, Int32, Schema, TaggedFields

from .. import broker
from ..kafka_settings import SANDBOX_LISTENER

MECHANISM = "SCRAM-SHA-256"
ITERATIONS = 4096  # Kafka's minimum for SCRAM


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


def _admin(servers: str):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=30000, client_id="streamlab-grader")


def _alter_scram(servers: str, *, upsert: tuple[str, str] | None = None, delete: str | None = None) -> None:
    upsertions, deletions = [], []
    if upsert:
        name, password = upsert
        salt = secrets.token_bytes(32)
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, ITERATIONS)
        upsertions.append((name, 1, ITERATIONS, salt, salted, {}))  # mechanism 1: SCRAM-SHA-256
    if delete:
        deletions.append((delete, 1, {}))
    admin = _admin(servers)
    try:
        future = admin._send_request_to_node(admin._client.least_loaded_node(), AlterUserScramCredentialsRequest_v0(
            deletions=deletions, upsertions=upsertions, tags={}))
        admin._wait_for_futures([future])
        response = future.value
    finally:
        admin.close()
    failed = [f"{user}: error {code} {message or ''}" for user, code, message, _ in response.results if code]
    if failed:
        raise RuntimeError("Kafka refused the grader's principal: " + "; ".join(failed))


class Principal:
    """One slot's Kafka principal: ``User:<name>``, allowed its current student's topics only."""

    def __init__(self, servers: str, name: str | None = None):
        self.servers = servers  # a PLAINTEXT address: the grader, as ANONYMOUS, administers
        self.name = name or f"sandbox-{secrets.token_hex(6)}"
        self.password = secrets.token_urlsafe(24)
        self.prefix: str | None = None
        _alter_scram(servers, upsert=(self.name, self.password))

    def allow_only(self, prefix: str) -> None:
        """From now on this principal may create, write, read, describe and delete the topics starting
        with ``prefix``, use any consumer group and transactional id, and nothing else."""
        self._replace_acls(prefix)
        self.prefix = prefix

    def _replace_acls(self, prefix: str | None) -> None:
        from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType
        from kafka.admin.acl_resource import ACLResourcePatternType, ResourcePatternFilter

        admin = _admin(self.servers)
        try:
            admin.delete_acls([ACLFilter(principal=f"User:{self.name}", host="*", operation=ACLOperation.ANY,
                                         permission_type=ACLPermissionType.ANY,
                                         resource_pattern=ResourcePatternFilter(ResourceType.ANY, None,
                                                                                ACLResourcePatternType.ANY))])
            if prefix is None:
                return
            grants = [(ResourceType.TOPIC, prefix, ACLResourcePatternType.PREFIXED),
                      (ResourceType.GROUP, "*", ACLResourcePatternType.LITERAL),
                      (ResourceType.TRANSACTIONAL_ID, "*", ACLResourcePatternType.LITERAL)]
            result = admin.create_acls([ACL(principal=f"User:{self.name}", host="*", operation=ACLOperation.ALL,
                                            permission_type=ACLPermissionType.ALLOW,
                                            resource_pattern=ResourcePattern(kind, name, pattern))
                                        for kind, name, pattern in grants])
        finally:
            admin.close()
        if result.get("failed"):
            raise RuntimeError(f"Kafka refused the ACLs for {self.name}: {result['failed']}")

    def remove(self) -> None:
        """Delete the principal's ACLs and credentials (best effort: the run's end, the broker may be gone)."""
        for step in (lambda: self._replace_acls(None), lambda: _alter_scram(self.servers, delete=self.name)):
            try:
                step()
            except Exception:  # noqa: BLE001
                pass

    def connect(self, sandbox_servers: str, timeout_s: float = 10) -> socket.socket:
        """A socket to the SANDBOX listener, authenticated as this principal, ready for a client's requests."""
        from kafka.conn import BrokerConnection

        host, port = sandbox_servers.split(",")[0].rsplit(":", 1)
        conn = BrokerConnection(host, int(port), socket.AF_INET, security_protocol="SASL_PLAINTEXT",
                                sasl_mechanism=MECHANISM, sasl_plain_username=self.name,
                                sasl_plain_password=self.password, client_id="streamlab-door",
                                api_version=(3, 9))
        if not conn.connect_blocking(timeout=timeout_s):
            conn.close()
            raise OSError(f"could not authenticate to Kafka's {SANDBOX_LISTENER} listener at {sandbox_servers}")
        sock = conn._sock
        conn._sock = None  # the socket is the door's now; the BrokerConnection forgets it
        conn.state = None
        sock.setblocking(True)
        return sock


def sandbox_servers(bootstrap: str) -> str | None:
    """The SANDBOX listener's address for the Kafka at ``bootstrap``: ``STREAMLAB_KAFKA_SANDBOX_SERVERS``,
    else the native broker's own when ``bootstrap`` is that broker; None when there is none."""
    configured = os.environ.get("STREAMLAB_KAFKA_SANDBOX_SERVERS", "").strip()
    if configured:
        return configured
    state = broker.status()
    saved = broker.saved_state()
    if state.running and state.bootstrap_servers == bootstrap and saved.get("sandbox_port"):
        return f"127.0.0.1:{saved['sandbox_port']}"
    return None
