"""The docker tier's class: `streamlab classroom up`, three students through the hub, lesson 01 in all three servers
at once, lab 01 handed out, submitted, collected, graded (sandboxed) and returned, one student hostile, then down.

In order (one classroom for the module, on free ports of 127.0.0.1):
  * ``up`` starts the class's Kafka and JupyterHub; ``up`` again says where it runs and starts nothing;
  * alice, bob and mallory are made and their servers started through the hub's REST API (with the instructor's
    token), each a container with its memory and CPU limits;
  * lesson 01 runs in the three servers at the same time, cell by cell through the hub's proxy (a kernel's
    websocket), its Kafka through each student's door as the student's principal;
  * lab 01: handed out; the reference answer saved by alice, parts A and B answered by bob (the suite's partial
    answer), the blank by mallory; each hands it in with ``streamlab submit``; collected, graded by
    ``streamlab grade`` (sandboxed), the feedback returned;
  * mallory, from her own kernel, tries to list, read, delete and fence alice's topics, groups and transactional
    ids, the broker's other listeners and alice's server: each is refused, and alice's topics are unchanged;
  * a server killed, a broker restarted, a notebook over its memory limit: no student's work is lost;
  * ``down`` leaves no container, network or volume of the class.

Run alone with:  python -m pytest -p no:xdist -m docker tests/docker/test_classroom.py
"""
from __future__ import annotations

import csv
import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import nbformat
import pytest
from test_stack import engine, images  # noqa: F401 - the docker tier's fixtures: the engine, the course image

from streamlab import grading
from streamlab.classroom import KAFKA_CONTAINER, NETWORK, hub

pytestmark = [pytest.mark.docker, pytest.mark.timeout(3600)]

ROOT = Path(__file__).resolve().parents[2]
LAB = "lab01_stateless_vs_stateful"
STUDENTS = ("alice", "bob", "mallory")


def _kafka(code: str) -> str:
    """Python run inside the class's Kafka container, as its administrator (PLAINTEXT on its loopback)."""
    proc = subprocess.run(["docker", "exec", KAFKA_CONTAINER, "python", "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


END_OFFSETS = textwrap.dedent("""
    import json
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers="127.0.0.1:19092")
    parts = [TopicPartition(t, p) for t in c.topics() if t.startswith("alice-") for p in c.partitions_for_topic(t)]
    print(json.dumps(sorted([tp.topic, tp.partition, o] for tp, o in c.end_offsets(parts).items())))
""")


@pytest.fixture(scope="module")
def classroom(images, tmp_path_factory):  # noqa: F811 - the fixture imported above
    if not shutil.which("configurable-http-proxy"):
        pytest.skip("the classroom needs JupyterHub's proxy: npm install -g configurable-http-proxy@5.3.0")
    directory = tmp_path_factory.mktemp("classroom")
    roster = directory / "students.txt"
    roster.write_text("".join(f"{name}\n" for name in STUDENTS))
    said = []
    try:
        started = time.monotonic()
        hub.up(roster, ip="127.0.0.1", port=hub.free_port(), directory=directory / "state", say=said.append)
        print(f"\nthe classroom's hub answered {time.monotonic() - started:.0f} s after `up`")
        yield {"dir": directory / "state", "roster": roster, "said": said, "hub": hub.Hub(directory / "state"),
               "work": directory}
    finally:
        hub.down(directory=directory / "state", say=said.append)
        volumes = [f"streamlab-classroom-work-{name}" for name in (*STUDENTS, "teacher")] + [hub.KAFKA_VOLUME]
        subprocess.run(["docker", "volume", "rm", "-f", *volumes], capture_output=True, timeout=120)


def test_up_again_says_where_the_class_runs(classroom):
    said = []
    saved = hub.up(classroom["roster"], ip="127.0.0.1", port=1, directory=classroom["dir"], say=said.append)
    assert saved["pid"] == json.loads((classroom["dir"] / "state.json").read_text())["pid"]
    assert said and "already running at" in said[0] and "nothing was started again" in said[0]


def test_three_students_start_through_the_hub(classroom):
    failures = []

    def start(name):
        try:
            classroom["hub"].start(name)
        except Exception as err:  # noqa: BLE001
            failures.append((name, err))

    threads = [threading.Thread(target=start, args=(name,)) for name in STUDENTS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, (failures, (classroom["dir"] / "hub.log").read_text()[-3000:])
    assert set(classroom["hub"].running()) == set(STUDENTS)
    inspect = json.loads(subprocess.run(["docker", "inspect", "streamlab-classroom-alice"], capture_output=True,
                                        text=True, check=True).stdout)[0]["HostConfig"]
    assert inspect["Memory"] == 3 * 2**30, "each server has its memory limit"
    assert inspect["NanoCpus"] == 10**9 or inspect["CpuQuota"] == inspect["CpuPeriod"] > 0, "and one CPU"
    status, lesson = classroom["hub"].contents("alice", "zh/notebooks/00_setup.ipynb")
    assert status == 200 and lesson["content"]["metadata"]["streamlab"]["language"] == "zh", "the course in Chinese too"


def test_lesson_01_runs_in_three_servers_at_once(classroom):
    results = {}

    def lesson(name):
        kernel = classroom["hub"].kernel(name, "notebooks/01_stateless_vs_stateful.ipynb")
        try:
            results[name] = kernel.run_notebook(ROOT / "notebooks" / "01_stateless_vs_stateful.ipynb")
        finally:
            kernel.close()

    started = time.monotonic()
    threads = [threading.Thread(target=lesson, args=(name,)) for name in STUDENTS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"\nlesson 01 in three servers at once: {time.monotonic() - started:.0f} s")
    assert results == dict.fromkeys(STUDENTS, "ok"), results
    topics = json.loads(_kafka(END_OFFSETS))
    assert topics, "alice's lesson wrote her topics, named with her prefix"


def test_lab_01_goes_out_and_comes_back_through_the_hub(classroom):
    the_hub = classroom["hub"]
    assert hub.hand_out(LAB, directory=classroom["dir"], say=lambda _: None) == dict.fromkeys(STUDENTS, "handed out")
    assert hub.hand_out(LAB, directory=classroom["dir"], say=lambda _: None) == \
        dict.fromkeys(STUDENTS, "already has it (kept)"), "a second hand-out never writes over a student's work"
    reference = json.loads(nbformat.writes(grading.reference_notebook(LAB, LAB)))
    bobs_score, bobs = _partly_answered()
    for name, answer in (("alice", reference), ("bob", bobs)):  # their answers, saved as JupyterLab saves them
        assert the_hub.put_file(name, f"labs/{LAB}/{LAB}.ipynb", answer, notebook=True) == 200
    for name in STUDENTS:
        kernel = the_hub.kernel(name, f"labs/{LAB}/{LAB}.ipynb")
        try:
            status, printed = kernel.run(f"import subprocess\nprint(subprocess.run(['streamlab', 'submit', '{LAB}'], "
                                         f"capture_output=True, text=True).stdout)")
        finally:
            kernel.close()
        assert status == "ok" and "Submitted" in printed, (name, printed)
    collected = classroom["work"] / "collected"
    assert hub.collect(LAB, collected, directory=classroom["dir"], say=lambda _: None) == \
        dict.fromkeys(STUDENTS, "collected")
    grades = classroom["work"] / "grades"
    proc = subprocess.run([sys.executable, "-m", "streamlab", "grade", LAB, str(collected / "submitted"),
                           "--out", str(grades), "--jobs", "2"], capture_output=True, text=True, timeout=1500,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {row["student"]: row for row in csv.DictReader((grades / "grades.csv").open())}
    assert {name: float(rows[name]["score"]) for name in STUDENTS} == \
        {"alice": float(rows["alice"]["max_score"]), "bob": bobs_score, "mallory": 0}, rows
    assert hub.return_feedback(LAB, grades, directory=classroom["dir"], say=lambda _: None) == \
        dict.fromkeys(STUDENTS, "returned")
    status, page = the_hub.contents("alice", f"feedback/{LAB}.html")
    assert status == 200 and page["content"] == (grades / "feedback" / "alice.html").read_text(), "alice has her page"


def _partly_answered() -> tuple[float, dict]:
    """Lab 01 as handed out, with the answers of tests/submissions' partial.py typed in (parts A and B; part C
    left as it was), and the score the suite's grading test gives it."""
    path = ROOT / "tests" / "submissions" / LAB / "partial.py"
    spec = importlib.util.spec_from_file_location("partial_lab01", path)
    partial = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(partial)
    notebook = grading.released_notebook(LAB, LAB)
    for cell in grading.answer_cells(notebook):
        cell.source = partial.ANSWERS.get(cell.metadata.nbgrader.grade_id, cell.source).strip("\n")
    return float(partial.EXPECTED_SCORE), json.loads(nbformat.writes(notebook))


HOSTILE = textwrap.dedent("""
    import json, os, socket, urllib.error, urllib.request
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaError
    found = {}
    admin = KafkaAdminClient(bootstrap_servers=os.environ["KAFKA_BOOTSTRAP_SERVERS"])
    found["sees"] = sorted(t for t in admin.list_topics() if not t.startswith("mallory-"))
    victim = VICTIM
    try:
        found["delete"] = str(admin.delete_topics([victim]))
    except KafkaError as err:
        found["delete"] = type(err).__name__
    consumer = KafkaConsumer(bootstrap_servers=os.environ["KAFKA_BOOTSTRAP_SERVERS"], consumer_timeout_ms=5000)
    try:
        from kafka import TopicPartition
        consumer.assign([TopicPartition(victim, 0)])
        consumer.seek_to_beginning()
        found["read"] = len(list(consumer))
    except KafkaError as err:
        found["read"] = type(err).__name__
    try:
        found["groups"] = [g for g in admin.list_consumer_groups() if not str(g).startswith("('mallory-")]
    except KafkaError as err:
        found["groups"] = type(err).__name__
    try:  # it answers a (group, error) pair per group
        found["delete group"] = [e.__name__ for _, e in admin.delete_consumer_groups(["alice-lesson"])]
    except KafkaError as err:
        found["delete group"] = [type(err).__name__]
    try:
        KafkaProducer(bootstrap_servers=os.environ["KAFKA_BOOTSTRAP_SERVERS"], transactional_id="alice-tx",
                      max_block_ms=10000).init_transactions()
        found["fence"] = "fenced"
    except KafkaError as err:
        found["fence"] = type(err).__name__
    for port in (19092, 9093):
        try:
            socket.create_connection(("kafka", port), timeout=5).close()
            found[f"port {port}"] = "open"
        except OSError as err:
            found[f"port {port}"] = type(err).__name__
    request = urllib.request.Request("http://streamlab-classroom-alice:8888/user/alice/api/contents",
                                     headers={"Authorization": "token " + os.environ["JUPYTERHUB_API_TOKEN"]})
    try:
        found["alice's server"] = urllib.request.urlopen(request, timeout=10).status
    except urllib.error.HTTPError as err:
        found["alice's server"] = err.code
    except OSError as err:
        found["alice's server"] = type(err).__name__
    print(json.dumps(found))
""")


def test_a_hostile_student_is_refused_and_changes_nothing(classroom):
    before = json.loads(_kafka(END_OFFSETS))
    victim = next(topic for topic, _, end in before if end > 0)  # one of alice's topics that holds records
    kernel = classroom["hub"].kernel("mallory", f"labs/{LAB}/{LAB}.ipynb")
    try:
        status, printed = kernel.run(HOSTILE.replace("VICTIM", repr(victim)))
    finally:
        kernel.close()
    assert status == "ok", printed
    found = json.loads(printed.strip().splitlines()[-1])
    assert found["sees"] == [], "mallory sees no topic but her own"
    assert found["delete"] == "TopicAuthorizationFailedError", found
    assert found["read"] in (0, "TopicAuthorizationFailedError"), found  # kafka-python's consumer reads nothing
    assert found["groups"] == [], found
    assert found["delete group"] == ["GroupAuthorizationFailedError"], found
    assert found["fence"] == "TransactionalIdAuthorizationFailedError", found
    assert found["port 19092"] == found["port 9093"] == "ConnectionRefusedError", found
    assert found["alice's server"] in (403, 302), found
    assert json.loads(_kafka(END_OFFSETS)) == before, "alice's topics are as they were"


def test_a_server_that_dies_comes_back_with_the_students_work(classroom):
    the_hub = classroom["hub"]
    def work():  # the sources of bob's cells, as he saved them
        return [cell["source"] for cell in the_hub.contents("bob", f"labs/{LAB}/{LAB}.ipynb")[1]["content"]["cells"]]

    before = work()
    assert any("### BEGIN SOLUTION" not in source and "lag_alerts" in source for source in before)
    subprocess.run(["docker", "kill", "streamlab-classroom-bob"], check=True, capture_output=True, timeout=60)
    deadline = time.monotonic() + 120  # the hub looks at each server every Spawner.poll_interval
    while "bob" in the_hub.running():
        assert time.monotonic() < deadline, "the hub never saw that bob's server died"
        time.sleep(2)
    the_hub.start("bob")
    assert work() == before, "bob's work is on his volume"


def test_a_broker_restart_keeps_every_students_topics_and_login(classroom):
    before = json.loads(_kafka(END_OFFSETS))
    subprocess.run(["docker", "restart", hub.KAFKA_CONTAINER], check=True, capture_output=True, timeout=180)
    hub.wait_for_kafka()  # `docker restart` returns when the container runs, a few seconds before Kafka answers
    kernel = classroom["hub"].kernel("alice", "notebooks/01_stateless_vs_stateful.ipynb")
    try:
        status, printed = kernel.run(textwrap.dedent("""
            import os, streamlab as sl
            from kafka import KafkaAdminClient
            sl.produce(sl.new_topic("after-restart"), [{"n": 1}])
            print(sorted(KafkaAdminClient(bootstrap_servers=os.environ["KAFKA_BOOTSTRAP_SERVERS"]).list_topics()))
        """))
    finally:
        kernel.close()
    assert status == "ok", printed
    listed = set(eval(printed.strip().splitlines()[-1]))  # noqa: S307 - a list of names the kernel printed
    assert {topic for topic, _, _ in before} < listed, "her topics, and a new one, as alice, after the restart"
    after = {tuple(row) for row in json.loads(_kafka(END_OFFSETS))}
    assert {tuple(row) for row in before} <= after, "every record of hers is still there"


def test_a_notebook_over_the_memory_limit_loses_its_kernel_not_the_server(classroom):
    the_hub = classroom["hub"]
    kernel = the_hub.kernel("mallory", f"labs/{LAB}/{LAB}.ipynb")
    try:  # 3.5 GB, every page touched, in a 3 GB container: the kernel is the process the kernel's OOM killer stops
        status, printed = kernel.run("hog = bytearray(int(3.5 * 2**30))\nhog[::4096] = b'1' * len(hog[::4096])",
                                     timeout=300)
    finally:
        kernel.close()
    assert status == "died", printed
    assert "mallory" in the_hub.running(), "her server stays"
    kernel = the_hub.kernel("mallory", f"labs/{LAB}/{LAB}.ipynb")
    try:
        assert kernel.run("print(6 * 7)", timeout=120) == ("ok", "42\n"), "a new kernel works"
    finally:
        kernel.close()
    assert the_hub.contents("mallory", f"labs/{LAB}/{LAB}.ipynb")[0] == 200, "and her files are there"


def test_down_leaves_nothing_running(classroom):
    said = []
    hub.down(directory=classroom["dir"], say=said.append)
    assert "stopped" in said[-1]
    containers = subprocess.run(["docker", "ps", "-a", "--filter", "name=^streamlab-classroom", "--format",
                                 "{{.Names}}"], capture_output=True, text=True, check=True).stdout.split()
    assert containers == []
    assert subprocess.run(["docker", "network", "inspect", NETWORK], capture_output=True).returncode != 0
    assert hub.status(directory=classroom["dir"], say=said.append) == 1
