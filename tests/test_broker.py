"""The native KRaft broker and the command line, including what happens on bad input."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest


def streamlab(*args, env=None, timeout=180):
    return subprocess.run([sys.executable, "-m", "streamlab", *args], capture_output=True, text=True,
                          timeout=timeout, env=env or os.environ.copy())


@pytest.fixture
def own_broker_dir(tmp_path, monkeypatch):
    """A second, private native broker (its own data dir); stopped at the end whatever happens."""
    monkeypatch.setenv("STREAMLAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    yield tmp_path / "data"
    from streamlab import broker

    broker.stop(quiet=True)


def test_busy_port_then_crash_then_recovery(own_broker_dir):
    from kafka import KafkaConsumer, KafkaProducer

    import streamlab as sl
    from streamlab import broker

    # Someone else holds the preferred port: the broker picks another and says so.
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    taken = blocker.getsockname()[1]
    try:
        state = broker.start(taken, quiet=True)
    finally:
        blocker.close()
    assert state.running and state.port != taken
    assert sl.bootstrap_servers() == f"127.0.0.1:{state.port}"

    # Any standard client: kafka-python with a consumer group and committed offsets.
    topic = sl.new_topic("survives", partitions=1)
    producer = KafkaProducer(bootstrap_servers=state.bootstrap_servers)
    for i in range(3):
        producer.send(topic, f"m{i}".encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=state.bootstrap_servers, group_id="g1",
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    assert [m.value for m in consumer] == [b"m0", b"m1", b"m2"]
    consumer.commit()
    consumer.close()

    # The broker dies: status says so and points at the log; start recovers, topics survive.
    os.kill(state.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while broker.status().running and time.monotonic() < deadline:
        time.sleep(0.2)
    dead = broker.status()
    assert not dead.running and "has exited" in dead.detail and "broker.log" in dead.detail
    proc = streamlab("kafka", "status")
    assert proc.returncode == 1 and "has exited" in proc.stdout

    again = broker.start(quiet=True)
    assert again.running and again.pid != state.pid
    assert topic in sl.list_topics()
    assert [r["value"] for r in sl.read_topic(topic)] == ["m0", "m1", "m2"]
    assert broker.log_file().stat().st_size > 0

    assert broker.stop(quiet=True)
    stopped = broker.status()
    assert not stopped.running and "stopped" in stopped.detail
    assert broker.start(quiet=True).port == again.port, "a restart keeps the broker's address"


def test_missing_java_gets_a_clear_message(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "KAFKA_BOOTSTRAP_SERVERS")}
    env.update(PATH=str(tmp_path), STREAMLAB_DATA_DIR=str(tmp_path / "data"))
    proc = streamlab("kafka", "start", env=env)
    assert proc.returncode == 2
    assert "No Java found" in proc.stderr and "JDK 17" in proc.stderr and "Traceback" not in proc.stderr
    doctor = streamlab("doctor", "--quick", env=env)
    assert doctor.returncode == 1 and "FAIL java" in doctor.stdout and "JDK 17" in doctor.stdout


def test_wrong_java_version_gets_a_clear_message(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "java").write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    (fake / "java").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    env.update(JAVA_HOME=str(tmp_path), STREAMLAB_DATA_DIR=str(tmp_path / "data"))
    proc = streamlab("kafka", "start", env=env)
    assert proc.returncode == 2 and "Java 11" in proc.stderr and "needs Java 17" in proc.stderr


def test_doctor_passes_here(kafka_bootstrap):
    proc = streamlab("doctor", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "spark reads kafka  read 3 of 3 records" in proc.stdout


def test_status_of_a_never_started_broker(tmp_path):
    env = dict(os.environ, STREAMLAB_DATA_DIR=str(tmp_path))
    proc = streamlab("kafka", "status", env=env)
    assert proc.returncode == 1 and "not started" in proc.stdout
