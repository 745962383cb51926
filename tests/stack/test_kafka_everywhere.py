"""One Kafka everywhere: the native broker, the Docker stack and the test suite's container run the
same Kafka version with the same settings a learner can notice (streamlab.stack.kafka_settings.BROKER_SETTINGS).

Each configuration is read where it is written: the native broker's server.properties, the kafka
service of docker/compose.yaml, and the environment of the tests' container (tests/conftest.py).
Settings that only say where a broker listens and stores (listeners, node id, log.dirs) may differ;
every other setting must be in BROKER_SETTINGS, with its value, in all three.
"""
from __future__ import annotations

import os
from contextlib import ExitStack

import pytest
import yaml
from conftest import KAFKA_IMAGE, KAFKA_IN_USE, kafka_container_env, start_test_kafka

from streamlab.stack import broker, jars, kafka_settings
from streamlab.stack.paths import project_root

COMPOSE_FILE = project_root() / "docker" / "compose.yaml"

# Where and how a broker listens, stores and is named: these differ between the three, by design.
PER_DEPLOYMENT = {
    "node.id", "process.roles", "listeners", "advertised.listeners", "listener.security.protocol.map",
    "inter.broker.listener.name", "controller.listener.names", "controller.quorum.voters", "log.dirs",
}
# Variables of the apache/kafka image that are not broker settings.
NOT_SETTINGS = {"CLUSTER_ID", "KAFKA_HEAP_OPTS", "KAFKA_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_LOG4J_OPTS"}


def setting_of(variable: str) -> str:
    """KAFKA_NUM_PARTITIONS -> num.partitions (the image's rule: ___ is -, __ is _, _ is .)."""
    assert variable.startswith("KAFKA_"), variable
    name = variable[len("KAFKA_"):].replace("___", "\0").replace("__", "\1").replace("_", ".")
    return name.replace("\0", "-").replace("\1", "_").lower()


def from_env(env: dict) -> dict[str, str]:
    return {setting_of(k): str(v) for k, v in env.items() if k not in NOT_SETTINGS}


# Settings the broker does not show through DescribeConfigs (static, or a password-type value); the
# authorization they set up is tested by what it does (tests/grading/test_tenancy.py).
NOT_REPORTED = {"super.users", "allow.everyone.if.no.acl.found", "listener.name.sandbox.scram-sha-256.sasl.jaas.config"}


def native_settings(tmp_path, monkeypatch) -> dict[str, str]:
    """The server.properties the native broker writes before it starts, read back."""
    monkeypatch.setenv("STREAMLAB_DATA_DIR", str(tmp_path))
    props = broker._write_config(19092, 19093, 19094)
    return kafka_settings.read_properties(props)


def compose_kafka() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())["services"]["kafka"]


def compose_settings() -> dict[str, str]:
    env = compose_kafka()["environment"]
    assert isinstance(env, dict), "the kafka service's environment is a mapping"
    return from_env({k: "true" if v is True else "false" if v is False else v for k, v in env.items()})


def container_settings() -> dict[str, str]:
    return from_env(kafka_container_env("127.0.0.1", 19092, 19094))


def learner_visible(settings: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in settings.items() if k not in PER_DEPLOYMENT}


@pytest.fixture
def three(tmp_path, monkeypatch) -> dict[str, dict[str, str]]:
    return {"native broker (server.properties)": native_settings(tmp_path, monkeypatch),
            "docker/compose.yaml (kafka service)": compose_settings(),
            "tests' container (conftest.kafka_container_env)": container_settings()}


def test_the_three_configurations_agree(three):
    expected = kafka_settings.BROKER_SETTINGS
    problems = []
    for where, settings in three.items():
        visible = learner_visible(settings)
        for key in sorted(set(expected) | set(visible)):
            if visible.get(key) != expected.get(key):
                problems.append(f"{where}: {key}={visible.get(key, '(unset)')}, "
                                f"BROKER_SETTINGS says {expected.get(key, '(unset)')}")
    assert not problems, "the three Kafkas disagree:\n" + "\n".join(problems)


def test_the_settings_learners_notice(three):
    for settings in three.values():
        assert settings["auto.create.topics.enable"] == "true", "Kafka's default: on"
        assert settings["num.partitions"] == "1"
        assert settings["log.retention.hours"] == "-1"


def test_each_configuration_is_a_single_kraft_node(three):
    for where, settings in three.items():
        assert set(settings["process.roles"].split(",")) == {"broker", "controller"}, where
        assert settings["controller.quorum.voters"].startswith(settings["node.id"] + "@"), where


def test_one_kafka_version():
    assert KAFKA_IMAGE == kafka_settings.DOCKER_IMAGE == f"apache/kafka:{jars.KAFKA_VERSION}"
    assert compose_kafka()["image"] == KAFKA_IMAGE
    assert f'name="kafka_{jars.SCALA_BINARY}" rev="{jars.KAFKA_VERSION}"' in jars._SPECS["kafka"]
    assert f'name="kafka-tools" rev="{jars.KAFKA_VERSION}"' in jars._SPECS["tools"]
    if jars.is_cached("kafka"):
        assert any(j.name == f"kafka_{jars.SCALA_BINARY}-{jars.KAFKA_VERSION}.jar" for j in jars.jars("kafka"))


def test_env_names_follow_the_image_rule():
    assert kafka_settings.docker_env_name("num.partitions") == "KAFKA_NUM_PARTITIONS"
    assert kafka_settings.docker_env_name("a_b-c.d") == "KAFKA_A__B___C_D"
    for key in kafka_settings.BROKER_SETTINGS:
        assert setting_of(kafka_settings.docker_env_name(key)) == key


def test_the_kafka_in_use_runs_with_these_settings(kafka_bootstrap):
    """Whichever of the three the test run uses, the broker itself reports the settings."""
    if KAFKA_IN_USE["kind"] == "configured":
        pytest.skip(f"KAFKA_BOOTSTRAP_SERVERS={kafka_bootstrap} was set: a Kafka this run did not start")
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        node = str(admin.describe_cluster()["brokers"][0]["node_id"])
        response = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, node)])[0]
    finally:
        admin.close()
    entries = {entry[0]: entry[1] for resource in response.resources for entry in resource[4]}
    for key, value in kafka_settings.BROKER_SETTINGS.items():
        if key in NOT_REPORTED:
            continue
        assert entries.get(key) == value, f"{key}: broker says {entries.get(key)}, BROKER_SETTINGS {value}"


class _Unpullable:
    """Stands in for testcontainers' DockerContainer on a machine whose registry is unreachable."""

    def __init__(self, image, env):
        self.image, self.env, self.stopped = image, env, False

    def with_bind_ports(self, container_port, host_port):
        return self

    def start(self):
        import docker.errors

        raise docker.errors.APIError(f"pull access denied for {self.image}: dial tcp: lookup "
                                     "registry-1.docker.io: no such host")

    def stop(self):
        self.stopped = True


def test_an_image_that_cannot_be_pulled_falls_back_to_the_native_broker(kafka_bootstrap, monkeypatch):
    import conftest

    made = []
    monkeypatch.setattr(conftest, "docker_engine_answers", lambda: (True, "27.3.1"))
    monkeypatch.setattr(conftest, "container_class",
                        lambda: lambda image, env: made.append(_Unpullable(image, env)) or made[-1])
    monkeypatch.setenv("STREAMLAB_TEST_KAFKA", "auto")
    monkeypatch.delenv("STREAMLAB_KAFKA_SANDBOX_SERVERS", raising=False)
    said = []
    with ExitStack() as stack:
        servers = start_test_kafka(stack, say=said.append)
        assert servers == broker.status().bootstrap_servers, "the native broker"
        # the container's grading listener is not left named: the grader would ask a port nothing listens on
        assert "STREAMLAB_KAFKA_SANDBOX_SERVERS" not in os.environ
    assert made and made[0].image == KAFKA_IMAGE and made[0].stopped
    assert len(said) == 1 and "could not be started" in said[0] and "no such host" in said[0]
    assert "native broker" in said[0]
