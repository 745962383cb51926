"""One Kafka everywhere: the native broker, the Docker stack's broker, the Kubernetes grading Job's and the
test suite's container are one program (``streamlab.stack.broker``) with one configuration
(``broker.server_properties``: BROKER_SETTINGS on a network). The containers run the course image's
``kafka`` role and set only their network (``broker.NETWORK_VARIABLES``); these tests read each place that
starts a broker and fail if one sets anything else, or if the configuration they get differs.
"""
from __future__ import annotations

import os
import re
from contextlib import ExitStack

import pytest
import yaml
from conftest import KAFKA_IMAGE, KAFKA_IN_USE, kafka_container_env, start_test_kafka

from streamlab.stack import broker, docker_images, jars, kafka_settings
from streamlab.stack.paths import project_root

COMPOSE_FILE = project_root() / "docker" / "compose.yaml"
K8S_JOB = project_root() / "docker" / "k8s" / "grade-job.yaml"

# Where and how a broker listens and stores: these differ between deployments, by design.
PER_DEPLOYMENT = {
    "node.id", "process.roles", "listeners", "advertised.listeners", "listener.security.protocol.map",
    "inter.broker.listener.name", "controller.listener.names", "controller.quorum.voters", "log.dirs",
}
# What a container of the kafka role may set besides its network: where its data and jars are, its heap.
NOT_SETTINGS = {"STREAMLAB_CACHE_DIR", "STREAMLAB_DATA_DIR", "STREAMLAB_KAFKA_HEAP"}


def compose_kafka() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())["services"]["kafka"]


def k8s_kafka() -> dict:
    (job,) = [doc for doc in yaml.safe_load_all(K8S_JOB.read_text()) if doc and doc["kind"] == "Job"]
    pod = job["spec"]["template"]["spec"]
    containers = pod["containers"] + pod.get("initContainers", [])
    (kafka,) = [c for c in containers if c["name"] == "kafka"]
    return kafka


def interpolated(value: str) -> str:
    """Compose's ${NAME:-default}, as a run without NAME set sees it."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(value))


def network_of(env: dict[str, str]) -> broker.Network:
    return broker.Network(**{field: interpolated(env[v]) for field, v in broker.NETWORK_VARIABLES.items()})


def compose_env() -> dict[str, str]:
    env = compose_kafka()["environment"]
    assert isinstance(env, dict), "the kafka service's environment is a mapping"
    return env


def k8s_env() -> dict[str, str]:
    return {item["name"]: item["value"] for item in k8s_kafka()["env"]}


CONTAINERS = {
    "docker/compose.yaml (kafka service)": compose_env,
    "docker/k8s/grade-job.yaml (kafka container)": k8s_env,
    "tests' container (conftest.kafka_container_env)": lambda: kafka_container_env("127.0.0.1", 19092, 19094),
}


@pytest.mark.parametrize("where", CONTAINERS)
def test_a_container_sets_only_the_brokers_network(where):
    env = CONTAINERS[where]()
    others = set(env) - set(broker.NETWORK_VARIABLES.values()) - NOT_SETTINGS
    assert others == set(), f"{where} sets more than the broker's network: the course's settings are the image's"
    assert set(broker.NETWORK_VARIABLES.values()) <= set(env), f"{where} leaves part of the network unset"


def test_the_stacks_run_the_course_image_as_kafka():
    assert compose_kafka()["image"] == KAFKA_IMAGE == docker_images.COURSE_IMAGE
    assert compose_kafka()["command"] == ["kafka"]
    assert k8s_kafka()["args"] == ["kafka"]
    assert k8s_kafka()["image"].startswith(docker_images.COURSE_REPOSITORY)


def configurations(tmp_path, monkeypatch) -> dict[str, dict[str, str]]:
    monkeypatch.setenv("STREAMLAB_DATA_DIR", str(tmp_path))
    native = kafka_settings.read_properties(broker._write_config(broker.Network.native(19092, 19093, 19094)))
    found = {"native broker (server.properties)": native}
    for where, env in CONTAINERS.items():
        text = broker.server_properties(network_of(env()), tmp_path / "data")
        found[where] = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and line[0] != "#")
    return found


def test_every_broker_has_the_settings_learners_notice_and_one_kraft_node(tmp_path, monkeypatch):
    for where, settings in configurations(tmp_path, monkeypatch).items():
        visible = {k: v for k, v in settings.items() if k not in PER_DEPLOYMENT}
        assert visible == kafka_settings.BROKER_SETTINGS, where
        assert set(settings["process.roles"].split(",")) == {"broker", "controller"}, where
        assert settings["controller.quorum.voters"].startswith(settings["node.id"] + "@"), where
        listeners = {item.split("://")[0] for item in settings["listeners"].split(",")}
        assert kafka_settings.SANDBOX_LISTENER in listeners and "CONTROLLER" in listeners, where
        assert settings["inter.broker.listener.name"] in listeners, where


def test_serve_refuses_a_container_without_its_network(monkeypatch):
    for variable in broker.NETWORK_VARIABLES.values():
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(broker.BrokerError, match="the broker's network is not given: set STREAMLAB_KAFKA_LISTENERS"):
        broker.serve()


def test_one_kafka_version():
    assert f'name="kafka_{jars.SCALA_BINARY}" rev="{jars.KAFKA_VERSION}"' in jars._SPECS["kafka"]
    assert f'name="kafka-tools" rev="{jars.KAFKA_VERSION}"' in jars._SPECS["tools"]
    if jars.is_cached("kafka"):
        assert any(j.name == f"kafka_{jars.SCALA_BINARY}-{jars.KAFKA_VERSION}.jar" for j in jars.jars("kafka"))


# Settings the broker does not show through DescribeConfigs (static, or a password-type value); the
# authorization they set up is tested by what it does (tests/grading/sandbox/test_tenancy.py).
NOT_REPORTED = {"super.users", "allow.everyone.if.no.acl.found", "listener.name.sandbox.scram-sha-256.sasl.jaas.config"}


def test_the_kafka_in_use_runs_with_these_settings(kafka_bootstrap):
    """Whichever broker the test run uses, the broker itself reports the settings."""
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


def test_a_container_that_cannot_start_leaves_the_native_broker(kafka_bootstrap, monkeypatch):
    """STREAMLAB_TEST_KAFKA=docker on a machine where the course image was never built (a laptop with Docker
    and no registry, say): one line says why, and the run uses the native broker; nothing is pulled."""
    import conftest

    monkeypatch.setattr(conftest, "docker_engine_answers", lambda: (True, "20.10.24"))
    monkeypatch.setattr(docker_images, "image_id", lambda name: None)
    monkeypatch.setattr(conftest, "container_class", lambda: pytest.fail("no container is made without the image"))
    monkeypatch.setenv("STREAMLAB_TEST_KAFKA", "docker")
    monkeypatch.delenv("STREAMLAB_KAFKA_SANDBOX_SERVERS", raising=False)
    said = []
    with ExitStack() as stack:
        servers = start_test_kafka(stack, say=said.append)
        assert servers == broker.status().bootstrap_servers, "the native broker"
        # no container's grading listener is left named: the grader would ask a port nothing listens on
        assert "STREAMLAB_KAFKA_SANDBOX_SERVERS" not in os.environ
    assert len(said) == 1 and "could not be started" in said[0]
    assert f"no {KAFKA_IMAGE} image here" in said[0] and "native broker" in said[0]


def test_docker_is_not_tried_unless_asked(kafka_bootstrap, monkeypatch):
    """The default: a machine with a Docker engine runs the suite on the native broker, as one without."""
    import conftest

    monkeypatch.delenv("STREAMLAB_TEST_KAFKA", raising=False)
    monkeypatch.setattr(conftest, "docker_engine_answers", lambda: pytest.fail("Docker was asked"))
    with ExitStack() as stack:
        assert start_test_kafka(stack, say=pytest.fail) == broker.status().bootstrap_servers
