"""streamlab.stack.broker: the native KRaft broker — a busy port, a crash, a recovery, a settings change, a
folder deleted under a running broker.

The real thing (four broker starts, a SIGKILL, a recovery: about 40 s) is marked ``slow``:
``make test`` runs it, ``make check`` does not. The quick tests below check the same decisions —
which port, "has exited", "older settings", "still runs" — from the files a broker leaves, without starting one.
"""
from __future__ import annotations

import json
import os
import shutil
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
    from streamlab.stack import broker

    broker.stop(quiet=True)


def test_a_taken_port_is_avoided():
    from streamlab.stack import broker

    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]
        assert not broker.port_is_free(taken)
        chosen = broker._free_port(taken)
    assert chosen != taken


def test_status_of_a_broker_that_died(own_broker_dir):
    """broker.json names a process that is gone: status says it exited and where its log is, and
    `streamlab kafka status` fails."""
    from streamlab.stack import broker

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    broker.home()  # creates the broker's folder
    (own_broker_dir / "kafka" / "broker.json").write_text(json.dumps({"pid": gone.pid, "port": 19999}))
    dead = broker.status()
    assert not dead.running and "has exited" in dead.detail and "broker.log" in dead.detail
    proc = streamlab("kafka", "status")
    assert proc.returncode == 1 and "has exited" in proc.stdout



def test_a_broker_whose_folder_was_deleted_is_found_and_stopped(own_broker_dir):
    """The broker's folder deleted while it ran (a learner's `rm -rf .streamlab`): no broker.json names it, yet
    it holds its port and heap. status names its pid and what to do, and `streamlab kafka stop` stops it (it
    said "The broker was not running." and left it running)."""
    from streamlab.stack import broker

    props = broker.home() / "server.properties"  # a stand-in with a broker's command line: no JVM to wait for
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "kafka.Kafka", str(props)],
                             cwd=broker.home())
    try:
        deadline = time.monotonic() + 30
        while not broker._is_our_broker(stray.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        # In its folder it could be a broker another process just started, before its broker.json: start leaves it
        assert broker._strays() == [stray.pid] and not broker._folder_gone(stray.pid)
        shutil.rmtree(own_broker_dir)
        assert broker._folder_gone(stray.pid), "the folder made again at its path is another folder"
        state = broker.status()
        assert not state.running and f"still runs (pid {stray.pid}) that broker.json does not name" in state.detail
        assert "`streamlab kafka stop` stops it" in state.detail, state.detail
        proc = streamlab("kafka", "stop")
        assert proc.returncode == 0 and f"Stopped the broker (pid {stray.pid})" in proc.stdout, proc.stdout
        assert stray.wait(timeout=30) == -signal.SIGTERM
        assert broker.status().detail == "not started"
    finally:
        stray.kill()
        stray.wait()

def test_settings_of_an_older_course_are_noticed(own_broker_dir):
    from streamlab.stack import broker

    assert broker.stale_settings() == {}  # never started: nothing to compare
    props = broker._write_config(broker.Network.native(19999, 20999, 21999))
    assert broker.stale_settings() == {}
    props.write_text(props.read_text().replace("auto.create.topics.enable=true", "auto.create.topics.enable=false"))
    assert broker.stale_settings() == {"auto.create.topics.enable": ("false", "true")}


@pytest.mark.slow  # four real broker starts and a recovery after SIGKILL (~40 s)
def test_busy_port_then_crash_then_recovery(own_broker_dir, capsys):
    from kafka import KafkaConsumer, KafkaProducer

    import streamlab as sl
    from streamlab.stack import broker

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

    launched = broker.start(quiet=True, wait=False)  # how the test suite overlaps start-up with collection
    assert launched.port == state.port and "starting" in launched.detail
    again = broker.wait_ready()
    assert again.running and again.pid == launched.pid != state.pid
    assert topic in sl.list_topics()
    assert [r["value"] for r in sl.read_topic(topic)] == ["m0", "m1", "m2"]
    assert broker.log_file().stat().st_size > 0

    # A broker started with other settings (by an older version of the course) is restarted with the
    # current ones when started again; a restart keeps its address and its topics.
    props = broker.home() / "server.properties"
    props.write_text(props.read_text().replace("auto.create.topics.enable=true", "auto.create.topics.enable=false"))
    old = broker.status()
    assert old.running and "older settings" in old.detail
    capsys.readouterr()
    renewed = broker.start()
    assert "auto.create.topics.enable=false -> true" in capsys.readouterr().out
    assert renewed.running and renewed.pid != old.pid and not broker.stale_settings()
    assert renewed.port == again.port, "a restart keeps the broker's address"
    assert topic in sl.list_topics()

    # Its folder deleted while it runs: the next start stops it (it held the port and its heap, and the start
    # took "another program" to hold it) and starts a new broker, which works.
    shutil.rmtree(own_broker_dir)
    capsys.readouterr()
    fresh = broker.start()
    assert f"still running (pid {renewed.pid})" in capsys.readouterr().out
    assert fresh.running and fresh.pid != renewed.pid and not broker._is_our_broker(renewed.pid)
    assert sl.new_topic("after", partitions=1) in sl.list_topics()

    assert broker.stop(quiet=True)
    stopped = broker.status()
    assert not stopped.running and "stopped" in stopped.detail


def test_a_broker_just_started_is_judged_by_its_process_not_its_command_line():
    """Right after the fork its command line is still Python's, not Kafka's: start-up must not take
    that for an exit (it did once, under load). A process that really exits is reported with its status."""
    from streamlab.stack import broker

    free = broker._free_port(29092)
    alive = subprocess.Popen(["sleep", "30"])
    try:
        assert not broker._is_our_broker(alive.pid)
        with pytest.raises(broker.BrokerError, match="did not accept clients"):
            broker.wait_ready(1, pid=alive.pid, port=free, proc=alive)
    finally:
        alive.kill()
        alive.wait()
    gone = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    gone.wait()
    with pytest.raises(broker.BrokerError, match=r"exited during start-up \(exit status 3\)"):
        broker.wait_ready(5, pid=gone.pid, port=free, proc=gone)


def test_waiting_for_a_broker_that_was_never_started_says_how_to_start_it(own_broker_dir):
    from streamlab.stack import broker

    with pytest.raises(broker.BrokerError, match="streamlab kafka start"):
        broker.wait_ready(timeout=1)
