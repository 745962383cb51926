"""The docker tier: what a Docker user runs, run for real (docker/compose.yaml and the course image).

One compose project for the whole tier, under a throw-away name, on free ports of 127.0.0.1 (never a
native broker's 9092). In order:
  * the images: the base made here when no registry serves it (``make docker-base``), the course image
    built once per content hash (a second build reuses it);
  * ``up`` of kafka + jupyter until healthy; the broker is the course's own (same settings as the native
    one); JupyterLab answers with its token; kafka-python and kcat on the host produce and consume
    through the published port; lessons 00 and 01 execute inside the JupyterLab container, with no error
    and nothing on stderr;
  * ``--profile cluster``: a Kafka job runs on the compose Spark master and worker and is listed completed;
  * ``--profile grader``: lab 01's reference scores full marks and the blank lab 0, graded in the grader
    container with the sandbox on;
  * testcontainers starts the tests' Kafka from the course image (tests/conftest.py, as
    ``STREAMLAB_TEST_KAFKA=docker`` does for a whole run);
  * ``down -v`` leaves no container, network or volume of the run.

Skipped, in one line, where no Docker engine answers or Compose v2 is missing (`.ci/run` installs both).
Run alone with:  python -m pytest -m docker tests/docker
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from contextlib import ExitStack
from pathlib import Path

import pytest

from streamlab.stack import broker, docker_images, kafka_settings

pytestmark = [pytest.mark.docker, pytest.mark.timeout(3600)]

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker" / "compose.yaml"
LAB = "lab01_stateless_vs_stateful"
# The set-up lesson in the compose JupyterLab: its doctor, Spark, and Kafka read and streamed through the connector,
# against the compose broker. Lesson 01 runs in the same image in test_classroom.py (three servers at once), so
# running it here too proved nothing more and cost about 80 s of the docker tier.
LESSONS = ["00_setup"]
UP_TIMEOUT_S = 600
NOTEBOOK_TIMEOUT_S = 900


def _unavailable() -> str | None:
    import conftest

    if shutil.which("docker") is None:
        return "the docker tier needs a Docker engine: apt-get install -y docker.io (then start dockerd)"
    answers, detail = conftest.docker_engine_answers()
    if not answers:
        return f"the docker tier is skipped: no Docker engine answers ({detail}; .ci/run starts one)"
    if docker_images.compose_command() != ["docker", "compose"]:
        return "the docker tier needs Compose v2 (`docker compose`): bash docker/install-compose.sh"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Stack:
    """One `docker compose` project of docker/compose.yaml, on free ports of 127.0.0.1."""

    PORTS = ("KAFKA_HOST_PORT", "JUPYTER_PORT", "SPARK_UI_PORT", "SPARK_MASTER_UI_PORT", "SPARK_WORKER_UI_PORT",
             "JUPYTER_CLUSTER_PORT", "SPARK_CLUSTER_UI_PORT")

    def __init__(self) -> None:
        self.project = f"streamlab-test-{uuid.uuid4().hex[:8]}"
        self.token = uuid.uuid4().hex
        self.ports = {name: _free_port() for name in self.PORTS}
        self.env = {**os.environ, **{k: str(v) for k, v in self.ports.items()}, "JUPYTER_TOKEN": self.token}
        self.grades = ROOT / "grades" / self.project  # the grader's /grades/<project>
        # the grader profile's data folder (STREAMLAB_DATA_DIR=/grades/.streamlab): removed if this run made it
        self.grader_data = ROOT / "grades" / ".streamlab"
        self.grader_data_was_there = self.grader_data.exists()

    @property
    def kafka(self) -> str:
        return f"127.0.0.1:{self.ports['KAFKA_HOST_PORT']}"

    def compose(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        command = ["docker", "compose", "-f", str(COMPOSE_FILE), "-p", self.project, *args]
        proc = subprocess.run(command, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"`docker compose {' '.join(args)}` exited {proc.returncode}\n"
                                 f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}\n--- logs\n{self.logs()}")
        return proc

    def logs(self) -> str:
        proc = subprocess.run(["docker", "compose", "-f", str(COMPOSE_FILE), "-p", self.project, "--profile", "*",
                               "logs", "--no-color", "--tail", "40"],
                              cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120)
        return (proc.stdout + proc.stderr)[-6000:]

    def exec(self, service: str, *command: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return self.compose("exec", "-T", service, *command, timeout=timeout, check=False)

    def down(self) -> None:
        self.compose("--profile", "*", "down", "-v", "--remove-orphans", "--timeout", "20", timeout=300, check=False)
        shutil.rmtree(self.grades, ignore_errors=True)
        if not self.grader_data_was_there:
            shutil.rmtree(self.grader_data, ignore_errors=True)

    def leftovers(self) -> dict[str, list[str]]:
        label = f"label=com.docker.compose.project={self.project}"
        found = {}
        for kind, command in (("containers", ["ps", "-a"]), ("networks", ["network", "ls"]),
                              ("volumes", ["volume", "ls"])):
            proc = docker_images.docker(*command, "--filter", label, "--format", "{{.Names}}" if kind == "containers"
                                        else "{{.Name}}")
            found[kind] = proc.stdout.split()
        return found


@pytest.fixture(scope="session")
def engine():
    docker_images.wait_for_makers()  # `.ci/run` may still be making Compose v2 or the images
    reason = _unavailable()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def images(engine):
    """The base (pulled where a registry serves it, else made here) and the course image (or the one `.ci/run`
    started making while the suite set up: the tier waits for it)."""
    started = time.monotonic()
    tag, built = docker_images.images()
    print(f"\ndocker tier images: {'built' if built else 'reused'} {tag} in {time.monotonic() - started:.0f}s")
    return tag


@pytest.fixture(scope="session")
def stack(images):
    stack = Stack()
    try:
        started = time.monotonic()
        stack.compose("up", "-d", "--wait", "--wait-timeout", str(UP_TIMEOUT_S), "kafka", "jupyter",
                      timeout=UP_TIMEOUT_S + 60)
        print(f"\ncompose up to healthy: {time.monotonic() - started:.0f}s")
        yield stack
    finally:
        stack.down()


# ---- the images ------------------------------------------------------------------------------------------

def test_the_course_image_is_built_once_per_content(images):
    tag, built = docker_images.build(say=lambda _: None)
    assert (tag, built) == (images, False), "nothing changed: the image of the same content is reused"
    assert docker_images.image_id(docker_images.COURSE_IMAGE) == docker_images.image_id(tag)


def test_the_image_has_python_311_java_17_and_the_baked_jars(images):
    proc = docker_images.docker(
        "run", "--rm", "--entrypoint", "sh", docker_images.COURSE_IMAGE, "-c",
        "python --version && java -version 2>&1 | head -1 && ls $STREAMLAB_CACHE_DIR/jars && streamlab doctor --help",
        timeout=120)
    assert "Python 3.11." in proc.stdout and 'version "17.' in proc.stdout, proc.stdout
    assert {"connector", "kafka"} <= set(proc.stdout.split()), "the connector and the broker are in the image"


# ---- kafka + jupyter -------------------------------------------------------------------------------------

def test_compose_up_reaches_healthy(stack):
    rows = [json.loads(line) for line in stack.compose("ps", "--format", "json").stdout.splitlines() if line]
    assert {row["Service"]: row["Health"] for row in rows} == {"kafka": "healthy", "jupyter": "healthy"}
    published = {p["URL"] for row in rows for p in row.get("Publishers", []) if p.get("PublishedPort")}
    assert published == {"127.0.0.1"}, f"every port is published on 127.0.0.1 only: {published}"


def test_the_broker_is_the_course_broker(stack):
    """The compose Kafka is the native broker's jars and settings in a container (one configuration)."""
    proc = stack.exec("kafka", "cat", "/data/streamlab/kafka/server.properties")
    assert proc.returncode == 0, proc.stderr
    settings = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line and line[0] != "#")
    assert kafka_settings.differences(settings) == {}
    assert settings["advertised.listeners"].startswith(f"HOST://{stack.kafka},")


def test_jupyterlab_answers_with_its_token_only(stack):
    base = f"http://127.0.0.1:{stack.ports['JUPYTER_PORT']}"
    with urllib.request.urlopen(f"{base}/api/status?token={stack.token}", timeout=30) as response:
        assert response.status == 200 and "kernels" in json.loads(response.read())
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{base}/api/status", timeout=30)
    assert refused.value.code == 403
    with urllib.request.urlopen(f"{base}/?token={stack.token}", timeout=30) as response:
        assert "/lab/tree/notebooks/00_setup.ipynb" in response.url, "it opens on the course"


def test_kafka_python_on_the_host_produces_and_consumes(stack):
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"docker-host-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=stack.kafka, acks="all", request_timeout_ms=30000)
    for i in range(3):
        producer.send(topic, key=b"k", value=f"v{i}".encode()).get(timeout=60)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=stack.kafka, auto_offset_reset="earliest",
                             group_id=None, consumer_timeout_ms=20000)
    values = [record.value for record in consumer]
    consumer.close()
    assert values == [b"v0", b"v1", b"v2"]


def test_kcat_on_the_host_produces_and_consumes(stack):
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed: apt-get install -y kcat")
    topic = f"docker-kcat-{uuid.uuid4().hex[:8]}"
    produced = subprocess.run(["kcat", "-b", stack.kafka, "-P", "-t", topic, "-K:"], input="a:1\nb:2\n", text=True,
                              capture_output=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", "-b", stack.kafka, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
                               "-f", "%k=%s\\n"], capture_output=True, text=True, timeout=60)
    assert consumed.stdout.split() == ["a=1", "b=2"], consumed.stderr


@pytest.mark.parametrize("lesson", LESSONS)
def test_a_lesson_executes_inside_the_jupyter_container(stack, lesson):
    """As a Docker learner runs it: in the JupyterLab container, against the compose broker."""
    started = time.monotonic()
    proc = stack.exec("jupyter", "jupyter", "nbconvert", "--to", "notebook", "--execute", f"notebooks/{lesson}.ipynb",
                      "--output-dir", "/tmp/executed", "--output", lesson,
                      f"--ExecutePreprocessor.timeout={NOTEBOOK_TIMEOUT_S}", timeout=NOTEBOOK_TIMEOUT_S + 120)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    print(f"\n{lesson} inside the container: {time.monotonic() - started:.0f}s")
    notebook = json.loads(stack.exec("jupyter", "cat", f"/tmp/executed/{lesson}.ipynb").stdout)
    outputs = [o for cell in notebook["cells"] if cell["cell_type"] == "code" for o in cell.get("outputs", [])]
    assert outputs, "the lesson's cells ran"
    assert [o for o in outputs if o["output_type"] == "error"] == []
    assert ["".join(o["text"]) for o in outputs if o.get("name") == "stderr"] == [], "nothing on stderr"


# ---- the cluster profile ---------------------------------------------------------------------------------

CLUSTER_JOB = """
import json, sys, uuid
import streamlab as sl
from streamlab.stack import kafka
topic = kafka.new_topic("docker-cluster")
kafka.produce(topic, ({"user": f"u{i % 3}", "n": i} for i in range(30)), key="user")
spark = sl.spark(app_name=sys.argv[1])
rows = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap_servers())
        .option("subscribe", topic).load().selectExpr("CAST(key AS STRING) AS user").groupBy("user").count()
        .collect())
print(json.dumps({"master": spark.sparkContext.master, "counts": sorted((r.user, r["count"]) for r in rows)}))
spark.stop()
"""


def test_the_cluster_profile_runs_a_kafka_job_on_the_compose_cluster(stack):
    stack.compose("--profile", "cluster", "up", "-d", "--wait", "--wait-timeout", str(UP_TIMEOUT_S),
                  "spark-master", "spark-worker", "jupyter-cluster", timeout=UP_TIMEOUT_S + 60)
    app = f"docker-tier-{uuid.uuid4().hex[:6]}"
    proc = stack.exec("jupyter-cluster", "python", "-c", CLUSTER_JOB, app, timeout=600)
    assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"master": "spark://spark-master:7077", "counts": [["u0", 10], ["u1", 10], ["u2", 10]]}
    ui = f"http://127.0.0.1:{stack.ports['SPARK_MASTER_UI_PORT']}/json/"
    deadline = time.monotonic() + 60
    while True:
        with urllib.request.urlopen(ui, timeout=10) as response:
            master = json.loads(response.read())
        done = [a for a in master.get("completedapps", []) if a["name"] == app]
        if done or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert done and done[0]["state"] == "FINISHED", master
    assert len(master["workers"]) == 1 and master["workers"][0]["state"] == "ALIVE"


# ---- the grader profile ----------------------------------------------------------------------------------

def test_the_grader_profile_grades_lab01_in_its_container_with_the_sandbox_on(stack):
    submissions = stack.grades / "submissions"
    submissions.mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / LAB / f"{LAB}.ipynb", submissions / "reference.ipynb")
    shutil.copy(ROOT / "labs" / LAB / f"{LAB}.ipynb", submissions / "blank.ipynb")
    started = time.monotonic()
    proc = stack.compose("--profile", "grader", "run", "--rm", "grader", "streamlab", "grade", LAB,
                         f"/grades/{stack.project}/submissions", "--out", f"/grades/{stack.project}/out",
                         "--jobs", "1", timeout=1500, check=False)
    print(f"\nlab01, two submissions graded in the grader container: {time.monotonic() - started:.0f}s")
    out = stack.grades / "out"
    assert (out / "grades.csv").is_file(), f"{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}"
    with (out / "grades.csv").open(newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert (rows["reference"]["status"], float(rows["reference"]["score"])) == \
        ("graded", float(rows["reference"]["max_score"])), rows["reference"]
    assert float(rows["reference"]["score"]) > 0
    assert (rows["blank"]["status"], float(rows["blank"]["score"])) == ("graded", 0.0), rows["blank"]
    run = json.loads((out / "run.json").read_text())
    assert run["settings"]["sandbox"] is True, "every submission ran in the sandbox"
    assert proc.returncode == 0, proc.stderr[-3000:]


# ---- testcontainers --------------------------------------------------------------------------------------

def test_testcontainers_starts_the_tests_kafka_from_the_course_image(images, monkeypatch):
    """What STREAMLAB_TEST_KAFKA=docker does for a whole run: the course broker in a container."""
    import conftest

    monkeypatch.delenv("STREAMLAB_KAFKA_SANDBOX_SERVERS", raising=False)
    with ExitStack() as stack:
        servers = conftest.start_kafka_container(stack)
        assert servers.startswith("127.0.0.1:")
        ok, detail = broker.ping(servers)
        assert ok, detail
        sandbox = os.environ["STREAMLAB_KAFKA_SANDBOX_SERVERS"]
        with socket.create_connection(tuple(sandbox.rsplit(":", 1)), timeout=10):
            pass  # the grader's SANDBOX listener is published too
        names = docker_images.docker("ps", "--filter", f"ancestor={docker_images.COURSE_IMAGE}",
                                     "--format", "{{.Names}} {{.Ports}}").stdout
        assert servers.split(":")[1] in names, names
    after = docker_images.docker("ps", "-a", "--format", "{{.Ports}}").stdout
    assert f":{servers.split(':')[1]}->" not in after, "the container is gone with the run"


# ---- last: nothing left behind ---------------------------------------------------------------------------

def test_down_leaves_no_container_network_or_volume(stack):
    assert stack.leftovers()["containers"], "the stack ran"
    stack.down()
    assert stack.leftovers() == {"containers": [], "networks": [], "volumes": []}
    assert not stack.grades.exists()
    assert stack.grader_data_was_there or not stack.grader_data.exists(), "the grader's data folder is gone too"
