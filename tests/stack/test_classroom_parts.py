"""The classroom's parts that need no Docker (the class itself runs in the docker tier, tests/docker/test_classroom.py):
the roster, `up`'s refusals, `streamlab submit`, a student's and a teacher's principal, and the Kafka door's
login as the student on the course's native broker."""
from __future__ import annotations

import secrets
import socket
import threading
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.parser import KafkaProtocol
from traitlets.config import Config

from streamlab.classroom import admit, hub, student
from streamlab.grading.sandbox.tenancy import Principal, sandbox_servers
from streamlab.stack.paths import project_root


def test_a_roster_names_each_student_once_in_names_kafka_and_docker_take(tmp_path):
    roster = tmp_path / "students.txt"
    roster.write_text("alice\n# a comment\n\nbob  # and one here\n")
    assert hub.read_roster(roster) == ["alice", "bob"]
    roster.write_text("alice\nBob.Smith\n")
    with pytest.raises(hub.ClassroomError, match="'Bob.Smith'"):
        hub.read_roster(roster)
    roster.write_text("alice\nalice\n")
    with pytest.raises(hub.ClassroomError, match="twice"):
        hub.read_roster(roster)


def test_up_names_a_busy_port_before_starting_anything(tmp_path):
    roster = tmp_path / "students.txt"
    roster.write_text("alice\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        port = busy.getsockname()[1]
        with pytest.raises(hub.ClassroomError, match=f"port {port} .*--port"):
            hub.up(roster, ip="127.0.0.1", port=port, directory=tmp_path / "state", say=lambda _: None)
    assert not (tmp_path / "state").exists(), "nothing was made"


def test_a_class_in_chinese_opens_on_the_chinese_lesson_and_hands_out_the_chinese_lab(tmp_path, monkeypatch):
    """The hub's config, read as JupyterHub reads it, for a class in each language; and the lab each hands out."""
    config_file = Path(hub.CONFIG)
    roster = tmp_path / "roster.txt"
    roster.write_text("alice\nteacher\n")
    urls = {}
    for language in ("en", "zh"):
        config = Config()
        env = {"STREAMLAB_CLASSROOM_DIR": str(tmp_path), "STREAMLAB_CLASSROOM_ROSTER": str(roster),
               "STREAMLAB_CLASSROOM_TEACHER": "teacher", "STREAMLAB_CLASSROOM_IP": "127.0.0.1",
               "STREAMLAB_CLASSROOM_PORT": "8000", "STREAMLAB_CLASSROOM_HUB_IP": "127.0.0.1",
               "STREAMLAB_CLASSROOM_TOKEN": "x", "STREAMLAB_CLASSROOM_IMAGE": "image",
               "STREAMLAB_CLASSROOM_MEMORY": "3g", "STREAMLAB_CLASSROOM_CPUS": "1",
               "STREAMLAB_CLASSROOM_COURSE": str(project_root()), "STREAMLAB_CLASSROOM_LANGUAGE": language}
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        exec(compile(config_file.read_text(), str(config_file), "exec"), {"get_config": lambda c=config: c})
        urls[language] = config.Spawner.default_url
        mounted = {spec["bind"] for spec in config.DockerSpawner.volumes.values() if isinstance(spec, dict)}
        assert "/course/zh/notebooks" in mounted
    assert urls == {"en": "/lab/tree/notebooks/00_setup.ipynb", "zh": "/lab/tree/zh/notebooks/00_setup.ipynb"}
    lab = "lab01_stateless_vs_stateful"
    assert hub.released_lab(lab, "zh") == project_root() / "zh" / "labs" / lab / f"{lab}.ipynb"
    assert hub.released_lab(lab).parent.parent == project_root() / "labs"


def test_submit_copies_the_lab_with_its_time_and_says_what_was_handed_out(tmp_path):
    with pytest.raises(FileNotFoundError, match="no lab has been handed out to you yet"):
        student.submit("lab01", work=tmp_path)
    (tmp_path / "labs" / "lab02").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="handed out to you: lab02"):
        student.submit("lab01", work=tmp_path)
    (tmp_path / "labs" / "lab01").mkdir()
    (tmp_path / "labs" / "lab01" / "lab01.ipynb").write_text('{"cells": []}')
    copy = student.submit("lab01", work=tmp_path)
    assert copy == tmp_path / "submitted" / "lab01" / "lab01.ipynb" and copy.read_text() == '{"cells": []}'
    assert (copy.parent / "timestamp.txt").read_text().startswith("20")
    # A lab by the start of its name, as `streamlab grade` takes it, when one handed-out lab fits
    (tmp_path / "labs" / "lab03_state_backends").mkdir()
    (tmp_path / "labs" / "lab03_state_backends" / "lab03_state_backends.ipynb").write_text('{"cells": [1]}')
    assert student.submit("lab03", work=tmp_path) == tmp_path / "submitted" / "lab03_state_backends" / \
        "lab03_state_backends.ipynb"
    with pytest.raises(FileNotFoundError, match="handed out to you: lab01, lab02, lab03_state_backends"):
        student.submit("lab0", work=tmp_path)  # three fit: none is guessed


def topic_with_records(servers: str, name: str) -> str:
    """Topic ``name`` with 3 records, made by the administrator (ANONYMOUS, on the PLAINTEXT listener)."""
    admin = KafkaAdminClient(bootstrap_servers=servers)
    admin.create_topics([NewTopic(name, 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=servers)
    for i in range(3):
        producer.send(name, f"record {i}".encode())
    producer.close()
    return name


@pytest.fixture
def listener(kafka_bootstrap):
    servers = sandbox_servers(kafka_bootstrap)
    if servers is None:
        pytest.skip(f"the Kafka at {kafka_bootstrap} has no SANDBOX listener (the course's native broker has one)")
    return servers


def _metadata_through(port: int) -> list[str]:
    """The topics a Metadata request for all topics answers through the door on ``port``."""
    protocol = KafkaProtocol(client_id="test")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        protocol.send_request(MetadataRequest[1](topics=None))
        sock.sendall(protocol.send_bytes())
        while True:
            responses = protocol.receive_bytes(sock.recv(65536))
            if responses:
                return sorted(topic[1] for topic in responses[0][1].topics)


def test_the_door_logs_in_as_the_student_who_sees_only_their_own_topics(kafka_bootstrap, listener):
    name = f"s{secrets.token_hex(4)}"
    mine = topic_with_records(kafka_bootstrap, f"{name}-events")
    theirs = topic_with_records(kafka_bootstrap, f"other{secrets.token_hex(3)}-events")
    made = admit.admit(name, servers=kafka_bootstrap)
    try:
        assert made["user"] == name and made["prefix"] == f"{name}-" and len(made["password"]) > 20
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        ready = threading.Event()
        threading.Thread(target=student.serve_door, args=(listener, name, made["password"]),
                         kwargs={"port": port, "ready": ready.set}, daemon=True).start()
        assert ready.wait(10)
        assert _metadata_through(port) == [mine], "the student's principal describes its own topics only"
        admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        assert {mine, theirs} <= set(admin.list_topics()), "the administrator sees both"
        admin.delete_topics([mine, theirs])
        admin.close()
    finally:
        Principal(kafka_bootstrap, name=name).remove()


@pytest.mark.slow
def test_a_teachers_principal_reads_every_topic(kafka_bootstrap, listener):
    name = f"t{secrets.token_hex(4)}"
    theirs = topic_with_records(kafka_bootstrap, f"other{secrets.token_hex(3)}-events")
    made = admit.admit(name, teacher=True, servers=kafka_bootstrap)
    try:
        consumer = KafkaConsumer(bootstrap_servers=listener, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=name,
                                 sasl_plain_password=made["password"], consumer_timeout_ms=5000)
        consumer.assign([TopicPartition(theirs, 0)])
        consumer.seek_to_beginning()
        assert len(list(consumer)) == 3, "a teacher reads a student's topic"
        consumer.close()
        assert made["prefix"] == f"{name}-", "and writes only its own"
    finally:
        Principal(kafka_bootstrap, name=name).remove()
        KafkaAdminClient(bootstrap_servers=kafka_bootstrap).delete_topics([theirs])


@pytest.fixture
def a_students_server(tmp_path):
    """A Jupyter server as a student's container runs it, under /user/mallory/ with a token: the instructor's tools
    reach it as they reach one through the hub (``hub.Hub`` with its url and token)."""
    import os
    import subprocess
    import sys
    import time
    import urllib.request

    from conftest import _free_port

    port, token = _free_port(), secrets.token_hex(16)
    (tmp_path / "lab.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    log = (tmp_path / "server.log").open("w")
    command = [sys.executable, "-m", "jupyter", "server", f"--port={port}", "--ServerApp.ip=127.0.0.1",
               "--ServerApp.base_url=/user/mallory/", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={tmp_path}", "--no-browser", *(["--allow-root"] if os.geteuid() == 0 else [])]
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), JUPYTER_CONFIG_DIR=str(tmp_path / "config"))
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    classroom = hub.Hub.__new__(hub.Hub)
    classroom.url, classroom.token = f"http://127.0.0.1:{port}", token
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{classroom.url}/user/mallory/api/status?token={token}", timeout=5).close()
            break
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.3)
    try:
        yield classroom
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
        log.close()


@pytest.mark.slow
def test_a_kernel_that_died_under_a_cell_answers_the_next_connection(a_students_server):
    """The docker tier's memory-limit test once waited 38 minutes (until stopped by hand): its second connection
    sent a cell to the kernel the server was still restarting, the request was lost, and the server's pings kept the
    wait alive. Now a connection waits until the kernel answers, and no cell waits past its time limit."""
    kernel = a_students_server.kernel("mallory", "lab.ipynb")
    try:
        assert kernel.run("print(6 * 7)") == ("ok", "42\n")
        status, _ = kernel.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    finally:
        kernel.close()
    assert status == "died"
    kernel = a_students_server.kernel("mallory", "lab.ipynb")  # at once, while the server restarts it
    try:
        assert kernel.run("print(6 * 7)", timeout=60) == ("ok", "42\n"), "the restarted kernel ran the cell"
        status, printed = kernel.run("import time\ntime.sleep(30)", timeout=3)
    finally:
        kernel.close()
    assert status == "timeout" and "no reply from the kernel within 3 s" in printed
