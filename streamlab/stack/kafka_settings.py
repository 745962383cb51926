"""The Kafka the course runs, wherever it runs: one version, one set of broker settings.

The broker (``streamlab.stack.broker``) writes ``BROKER_SETTINGS`` into its server.properties wherever it
runs: natively, and in a container as the course image's ``kafka`` role (``streamlab kafka serve``), which
is the Docker stack's Kafka (``docker/compose.yaml``), the Kubernetes grading Job's and the test suite's
container's (``tests/conftest.py``). Those set only the broker's network (``broker.NETWORK_VARIABLES``);
``tests/stack/test_kafka_everywhere.py`` checks that none sets anything else.
"""
from __future__ import annotations

from pathlib import Path

from .jars import KAFKA_VERSION

__all__ = ["KAFKA_VERSION", "BROKER_SETTINGS", "SANDBOX_LISTENER", "read_properties", "differences"]

# What a learner can notice about the broker, the same on the native broker, in the Docker stack and
# in the tests' container. Where a value differs from Kafka's own default, the comment says why.
BROKER_SETTINGS = {
    # Kafka's default: producing to (or subscribing to) a topic that does not exist creates it, as
    # every Kafka quickstart and `kcat -P -t new-topic` expect. The course still creates its topics
    # with new_topic(), which picks the partitions and a fresh name.
    "auto.create.topics.enable": "true",
    "num.partitions": "1",  # partitions of an auto-created topic (Kafka's default)
    "default.replication.factor": "1",  # one broker, one copy
    "min.insync.replicas": "1",
    # Keep records until the topic is deleted (Kafka's default is 168 hours): a learner who comes
    # back to a lesson after a week can still replay a topic from offset 0.
    "log.retention.hours": "-1",
    "delete.topic.enable": "true",
    # The requests the broker is reading are held in one pool of this size (KIP-72); when it is full, the
    # broker reads no more until requests are handled, instead of running its 512 MB heap out of memory
    # when many clients send large requests at once. Kafka's default: no limit.
    "queued.max.request.bytes": str(128 * 2**20),
    # Consumer groups start at once instead of waiting 3 s for more members.
    "group.initial.rebalance.delay.ms": "0",
    # Kafka's internal topics: one replica on one broker, and 4 partitions for committed offsets
    # instead of 50 (the first consumer group starts faster).
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    # Graded submissions talk to Kafka as principals of their own, through a listener named SANDBOX
    # (SASL/SCRAM) that only the grader connects to; ACLs let each one touch only its own topics. Every
    # other client (learners, the notebooks, the grader's checks) uses PLAINTEXT as ANONYMOUS, a super
    # user: nothing changes for them.
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    "allow.everyone.if.no.acl.found": "false",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    "listener.name.sandbox.scram-sha-256.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
}
SANDBOX_LISTENER = "SANDBOX"  # the grader's SASL_PLAINTEXT listener (see above)


def read_properties(path: Path) -> dict[str, str]:
    """The ``key=value`` lines of a Java properties file such as server.properties."""
    lines = [line.strip() for line in path.read_text().splitlines()]
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#") and "=" in line)


def differences(settings: dict[str, str]) -> dict[str, tuple[str | None, str]]:
    """{key: (value in ``settings``, value in BROKER_SETTINGS)} for every setting that differs."""
    return {k: (settings.get(k), v) for k, v in BROKER_SETTINGS.items() if settings.get(k) != v}
