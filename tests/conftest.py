"""Shared fixtures: a real Kafka broker and one SparkSession for the whole test run.

Kafka, in this order: ``KAFKA_BOOTSTRAP_SERVERS`` if set; a Kafka container (testcontainers)
when a Docker engine answers; otherwise the course's native KRaft broker (started here and
stopped at the end if it was not already running). The chosen address is exported as
``KAFKA_BOOTSTRAP_SERVERS`` so that notebooks and graded labs, run in child processes, use it too.
"""
from __future__ import annotations

import os
import subprocess

import pytest

os.environ.setdefault("STREAMLAB_SPARK_UI", "false")


def docker_engine_answers() -> tuple[bool, str]:
    try:
        proc = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, f"docker client unusable: {err}"
    if proc.returncode != 0:
        return False, (proc.stderr.strip().splitlines() or ["docker info failed"])[-1]
    return True, proc.stdout.strip()


@pytest.fixture(scope="session")
def kafka_bootstrap():
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if configured:
        yield configured
        return
    if os.environ.get("STREAMLAB_TEST_KAFKA", "auto") in ("auto", "docker") and docker_engine_answers()[0]:
        from testcontainers.community.kafka import KafkaContainer

        with KafkaContainer("confluentinc/cp-kafka:7.6.0").with_kraft() as container:
            os.environ["KAFKA_BOOTSTRAP_SERVERS"] = container.get_bootstrap_server()
            yield os.environ["KAFKA_BOOTSTRAP_SERVERS"]
            del os.environ["KAFKA_BOOTSTRAP_SERVERS"]
        return
    from streamlab import broker

    already_running = broker.status().running
    state = broker.start(quiet=True)
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = state.bootstrap_servers
    yield state.bootstrap_servers
    del os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    if not already_running:
        broker.stop(quiet=True)


@pytest.fixture(scope="session")
def spark(kafka_bootstrap):
    import streamlab

    session = streamlab.spark()
    yield session
    streamlab.stop_all_queries(session)
    session.stop()
