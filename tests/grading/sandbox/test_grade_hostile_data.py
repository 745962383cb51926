"""Hostile submissions against what the grader does *outside* the box (marker `labs`): every grade stays its owner's.

The sandbox holds (``test_grade_hostile``); these attack what the grader reads afterwards, or how it names and
files what it is given. One run of lab 01, one submission at a time (``--jobs 1``), so each attacker is graded
before the victims, whose right grades are asserted:

    a_zipbomb    a checkpoint where the checks look, whose state zip's ``metadata`` expands to 600 MB
                 (the old grader's checks parsed it in the worker's one JVM, which died: the next student got 0)
    b_records    its output topic holds gzip'd 48 MB records (the old checks decoded them: a 6.7 GB worker);
                 the record-by-record refusal itself: tests/grading/test_hidden_checks.py
    c_outputs    outputs of 4 x 6 MB and one 20 MB image (the old feedback page: hundreds of MB; ZeroMQ drops the
                 20 MB one with its connection, which the old grader never made again: no later cell had outputs)
    d_door       300 connections to the broker at once, then a 2,000-partition topic
    e_html       script, event handlers and javascript: links in its outputs and markdown
    f_tenancy    lists the consumer groups, deletes another tenant's group's offsets, fences its producer;
                 then, in the same kernel, the two attacks of the third round on the broker's own state below
    h_deep       a checkpoint of 500 folders within folders, past PATH_MAX (the grader's walk of its work
                 folder failed with ENAMETOOLONG: a grader error, every run); beside it, for the checks' look
                 for a committed batch while the notebook runs: a FIFO for commits, a link back into the
                 checkpoints folder, and 1,500 checkpoint folders (the look takes in 1,000)
    g_exfil      keeps every cell's source from a pre_run_cell hook and prints it base64'd and reversed (the old
                 grader ran hidden tests in the kernel: eight hidden lines were read back from the feedback page)
    s_link       a symbolic link to the solution notebook            -> invalid notebook, never read
    t_sparse     a 3 GB sparse file                                  -> invalid notebook, by stat alone
    u_tampered   a test cell turned into an answer cell              -> invalid notebook
    u_types      nbgrader metadata of types its schema refuses: a test cell's grade "yes", its points "abc", an
                 answer cell's grade id an object (the old grader: a grader error, graded again by every run,
                 never scored)                                       -> invalid notebook, each named
    "zz victim"  a name the old grader turned into zz_victim (pushing the real one to zz_victim-2)
                                                                     -> graded under its own exact name
    a newline in a name, and a 249-character name                    -> invalid notebook
    zz_victim    the reference answers, graded last, after every attacker -> full marks, under its own name

And the third round, against what submissions *share* (the slot's log, the broker, the worker's memory, the
grader's words and files), each family an attacker, with the reference answers graded right after the broker's
heap:

    i_stderr     1.3 GB to its stderr (the old grader's slot log reached 1 GB: every later kernel in that slot
                 died at its first write, EFBIG, and was "crashed")       -> limit exceeded (disk), its own
    j_heap       64 connections at once, each one 16 MB request, then 64 of 2 MB (the old door's caps: the
                 broker's 512 MB heap ran out, the next two references were 0/10 with NoBrokersAvailable); then
                 its kernel ends itself (its own lab stalled minutes behind its requests) -> crashed, its own
    (f_tenancy)  a topic of its own with segment.ms=1, and the same config altered onto another (the broker
                 opened a file per request until it died, and stayed down) -> refused: creating by the door,
                 altering by Kafka (the principal has no ALTER_CONFIGS)
    (f_tenancy)  100 transactional ids (all kept by the broker for seven days) -> at most 16
    m_bytes      350 MB to a topic of its own (the produce quota alone let a slot write ~18 GB) -> at most 64 MB
    n_display    one 0.9 MB display update copied by display id into 1,000 outputs (a 950 MB notebook, a
                 3.7 GB worker)                                            -> the update is not kept
    o_expand     a 20 MB notebook whose metadata holds 7 million objects (the worker grew past 14 GB)
                                                                          -> invalid notebook, never parsed
    jz_words     the reference answers, graded right after j_heap, but Part B's count column is named
                 OutOfMemoryError and holds "2.0", which a check's message quotes (the old runner read the words as
                 the checks' JVM failing: a grader error, run after run) -> graded: Part B fails, every other part
                 earns its points (the broker serves the submission after j_heap)
    worker1      the blank lab, under the id whose log was the slot's own (it truncated it) -> graded, its
                 own log in logs/, the grader's whole in grader/; with one answer cell pasted twice, as a learner
                 keeps a try (the old grader: invalid notebook, by nbgrader's DeduplicateIds), and another made
                 markdown by a keystroke (the old grader refused it; nbgrader makes it code) -> graded
"""
from __future__ import annotations

import copy
import csv
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from intruders import notebook_name, with_attack

from streamlab import grading
from streamlab.grading.sandbox.box import unavailable_reason

ROOT = Path(__file__).resolve().parents[3]
LAB = grading.find_labs()[0]
WHY_NOT = unavailable_reason()

pytestmark = [pytest.mark.labs, pytest.mark.timeout(2100),
              pytest.mark.skipif(WHY_NOT is not None, reason=f"no sandbox here: {WHY_NOT}")]

# Every crafted artifact takes the name the lab's checks look for; later calls for that name get another one,
# so the crafted artifact is the only one the checks find.
DIVERT = '''
import streamlab as sl
_new_topic, _new_checkpoint = sl.new_topic, sl.new_checkpoint
def _divert(real, taken):
    def make(name, *args, **kwargs):
        return real(name + "-x" if name in taken else name, *args, **kwargs)
    return make
'''

ATTACKS = {
    "a_zipbomb": DIVERT + '''
import json, os, zipfile
ckpt = _new_checkpoint("lab01-requests")
root = ckpt.path
for folder in ("offsets", "commits", "state/0/0"):
    os.makedirs(os.path.join(root, folder), exist_ok=True)
json.dump({"id": "00000000-0000-0000-0000-000000000001"}, open(os.path.join(root, "metadata"), "w"))
open(os.path.join(root, "offsets", "0"), "w").write('v1\\n{"batchWatermarkMs":0}\\n{}\\n')
open(os.path.join(root, "commits", "0"), "w").write('v1\\n{"nextBatchWatermarkMs":0}\\n')
with zipfile.ZipFile(os.path.join(root, "state/0/0/1.zip"), "w", zipfile.ZIP_DEFLATED) as archive:
    with archive.open("metadata", "w", force_zip64=True) as entry:
        block = b"{" + b" " * (8 * 2**20 - 1)
        for _ in range(75):
            entry.write(block)
print("ZIP", os.path.getsize(os.path.join(root, "state/0/0/1.zip")))
sl.new_checkpoint = _divert(_new_checkpoint, {"lab01-requests"})
''',
    "b_records": DIVERT + '''
from kafka import KafkaProducer
topic = _new_topic("lab01-requests-out")
producer = KafkaProducer(bootstrap_servers=sl.bootstrap_servers(), compression_type="gzip",
                         max_request_size=200 * 2**20)
value = b'{"batch_id": 0, "path": "' + b"a" * (48 * 2**20) + b'", "count": 1}'
for _ in range(12):
    producer.send(topic, value).get(timeout=60)
producer.close()
print("SENT", topic)
sl.new_topic = _divert(_new_topic, {"lab01-requests-out"})
''',
    "c_outputs": '''
import base64
from IPython.display import publish_display_data
for size in (6, 6, 6, 6, 20):
    publish_display_data({"image/png": base64.b64encode(b"\\x00" * (size * 2**20 * 3 // 4)).decode()})
''',
    "d_door": '''
import os, socket
host, port = os.environ["KAFKA_BOOTSTRAP_SERVERS"].split(",")[0].rsplit(":", 1)
held = []
for _ in range(300):
    try:
        held.append(socket.create_connection((host, int(port)), timeout=5))
    except OSError:
        break
import time; time.sleep(2)
alive = 0
for sock in held:
    sock.setblocking(False)
    try:
        alive += sock.recv(1) != b""
    except BlockingIOError:
        alive += 1
    except OSError:
        pass
    sock.close()
print("OPEN", alive, "of", len(held))
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
try:
    admin = KafkaAdminClient(bootstrap_servers=os.environ["KAFKA_BOOTSTRAP_SERVERS"], request_timeout_ms=20000)
    admin.create_topics([NewTopic(os.environ["STREAMLAB_TOPIC_PREFIX"] + "flood", 2000, 1)])
    print("CREATED", 2000, "partitions")  # printed apart, so the page's copy of this source never matches
except Exception as err:
    print("refused", type(err).__name__)
''',
    "e_html": '''
from IPython.display import HTML, SVG, Javascript, display
display(HTML('<script>document.title="PWNED"</script><img src=x onerror="document.title=\\'PWNED\\'">'
             '<a href="javascript:document.title=\\'PWNED\\'">click</a>'))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" onload="document.title=\\'PWNED\\'"><rect/></svg>'))
display(Javascript('document.title="PWNED"'))
''',
    "f_tenancy": '''
import os
from kafka import KafkaAdminClient, KafkaProducer
servers = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=20000)
for name, attempt in [("LIST", lambda: admin.list_consumer_groups()),
                      ("OFFSETS", lambda: admin.list_consumer_group_offsets(GUARD_GROUP)),
                      ("DELETE", lambda: admin.delete_consumer_groups([GUARD_GROUP])),
                      ("FENCE", lambda: KafkaProducer(bootstrap_servers=servers, transactional_id=GUARD_TX,
                                                      max_block_ms=10000).init_transactions())]:
    try:
        print(name, "DID", attempt())
    except Exception as err:
        print(name, "refused", type(err).__name__)


from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
prefix = os.environ["STREAMLAB_TOPIC_PREFIX"]
for name, attempt in [  # a new client each time: the door closes the connection of a refused request
        ("CREATE", lambda admin: admin.create_topics([NewTopic(prefix + "seg", 1, 1,
                                                                 topic_configs={"segment.ms": "1"})])),
        ("PLAIN", lambda admin: admin.create_topics([NewTopic(prefix + "plain", 1, 1)])),
        ("ALTER", lambda admin: admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, prefix + "plain",
                                                                    configs={"segment.ms": "1"})]).resources)]:
    try:
        admin = KafkaAdminClient(bootstrap_servers=os.environ["KAFKA_BOOTSTRAP_SERVERS"], request_timeout_ms=5000)
        print(name, "DID", attempt(admin))
    except Exception as err:
        print(name, "refused", type(err).__name__)


made = 0
for i in range(100):
    try:
        producer = KafkaProducer(bootstrap_servers=os.environ["KAFKA_BOOTSTRAP_SERVERS"], max_block_ms=5000,
                                 transactional_id=f"{os.environ['STREAMLAB_TOPIC_PREFIX']}tx-{i}")
        producer.init_transactions()
        made += 1
        producer.close(timeout=1)
    except Exception as err:
        print("REFUSED at", i, type(err).__name__)
        break
print("TXIDS", made)
''',
    "h_deep": '''
import os
root = os.path.join(os.environ["STREAMLAB_DATA_DIR"], "checkpoints", "lab01-requests-abcdef")
os.makedirs(root, exist_ok=True)
here = os.open(root, os.O_RDONLY)
for _ in range(500):
    os.mkdir("dddddddddd", dir_fd=here)
    deeper = os.open("dddddddddd", os.O_RDONLY, dir_fd=here)
    os.close(here)
    here = deeper
os.close(here)
checkpoints = os.path.dirname(root)  # and for the look the checks take while the notebook runs (their Spark
os.mkdir(os.path.join(checkpoints, "fifo-0a1b2c"))  # starts at a committed batch): commits as a FIFO,
os.mkfifo(os.path.join(checkpoints, "fifo-0a1b2c", "commits"))
os.symlink(checkpoints, os.path.join(checkpoints, "loop-0a1b2c"))  # a link back into itself,
for i in range(1500):  # and more checkpoint folders than the look takes in (bounds.CHECKS_LOOK_ENTRIES)
    os.mkdir(os.path.join(checkpoints, f"many-{i:06x}"))
print("PLANTED")
''',
    "i_stderr": '''
import os
chunk, written = b"E" * 2**20, 0
try:
    for _ in range(1300):
        written += os.write(2, chunk)
except OSError as err:
    print("STOPPED", err.errno)
print("WROTE", written // 2**20, "MB")
''',
    "j_heap": '''
import os, socket, struct, threading
host, port = os.environ["KAFKA_BOOTSTRAP_SERVERS"].split(",")[0].rsplit(":", 1)
def send(size):
    sock = None
    try:
        sock = socket.create_connection((host, int(port)), timeout=10)
        body = struct.pack(">hhih", 0, 3, 1, -1) + b"\\0" * (size - 10)
        sock.sendall(struct.pack(">i", len(body)) + body)
        sock.recv(1)
    except OSError:
        pass
    finally:
        if sock is not None:
            sock.close()
for size in (16 * 2**20, 2 * 2**20 - 100):
    threads = [threading.Thread(target=send, args=(size,)) for _ in range(64)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
os._exit(0)  # its own lab would wait minutes for its Kafka: ended here, its row is crashed (0 points)
''',
    "m_bytes": '''
import os
from kafka import KafkaProducer
producer = KafkaProducer(bootstrap_servers=os.environ["KAFKA_BOOTSTRAP_SERVERS"], batch_size=2**20 - 4096,
                         max_request_size=2**20 - 1024, linger_ms=5, delivery_timeout_ms=10000,
                         request_timeout_ms=8000, max_block_ms=10000)
topic, value, sent = os.environ["STREAMLAB_TOPIC_PREFIX"] + "bulk", b"x" * (512 * 1024), 0
try:
    for _ in range(700):
        producer.send(topic, value).get(timeout=20)
        sent += len(value)
except Exception as err:
    print("REFUSED", type(err).__name__)
finally:
    print("BYTES", sent // 2**20)
producer.close(timeout=1)
''',
    "n_display": '''
from IPython.display import display, update_display
for _ in range(1000):
    display({"text/plain": "x"}, raw=True, display_id="same")
update_display({"text/plain": "y" * 900_000}, raw=True, display_id="same")
print("UPDATED")
''',
    "jz_words": '''
from pyspark.sql import functions as F
def _loud(requests):
    counts = requests.dropDuplicates(["path", "method"]).groupBy("path").count()
    return counts.select("path", F.format_string("%d.0", "count").alias("OutOfMemoryError"))  # "2.0", not 2
get_ipython().events.register("post_run_cell", lambda *_: get_ipython().user_ns.update(distinct_methods=_loud))
''',
    "g_exfil": '''
import base64
def keep(info):
    print("ENC", base64.b64encode(info.raw_cell[::-1].encode()).decode())
get_ipython().events.register("pre_run_cell", keep)
''',
}


ON_REFERENCE = {"jz_words"}  # attacks on the reference answers (the others on the blank lab)


def _name() -> str:
    return notebook_name(LAB)


def _mistyped():
    nb = grading.released_notebook(LAB, _name())
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"]
    tests[0].metadata["nbgrader"]["grade"] = "yes"
    tests[-1].metadata["nbgrader"]["points"] = "abc"
    grading.answer_cells(nb)[0].metadata["nbgrader"]["grade_id"] = {"x": [1]}
    return nb


def _learner_slips():
    nb = grading.released_notebook(LAB, _name())
    slip = grading.answer_cells(nb)[1]
    slip.cell_type = "markdown"   # JupyterLab's "m" in command mode
    del slip["outputs"], slip["execution_count"]
    answer = grading.answer_cells(nb)[0]
    at = nb.cells.index(answer)
    for n in (1, 2):
        pasted = copy.deepcopy(answer)
        pasted["id"] = f"pasted-{n}"
        nb.cells.insert(at + n, pasted)
    return nb


def _tampered():
    nb = grading.released_notebook(LAB, _name())
    test_cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
                     and not c.metadata["nbgrader"].get("solution"))
    test_cell.metadata["nbgrader"]["solution"] = True  # now an answer cell: the student writes its "test"
    test_cell.source = "pass"
    return nb


@pytest.fixture(scope="module")
def hostile(kafka_bootstrap, tmp_path_factory):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    base = Path(os.environ.get("STREAMLAB_DATA_DIR") or tmp_path_factory.mktemp("grading")) / "grading" / "data"
    submissions, out = base / "submissions", base / "out"
    submissions.mkdir(parents=True)
    stamp = f"{os.getpid()}-{int(time.time())}"
    # another tenant's consumer group with a committed offset, and its live transactional producer
    guard_topic, guard_group, guard_tx = f"guard-{stamp}", f"guard-group-{stamp}", f"guard-tx-{stamp}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    from kafka.admin import NewTopic
    admin.create_topics([NewTopic(guard_topic, 1, 1)])
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=guard_group, enable_auto_commit=False)
    consumer.assign([TopicPartition(guard_topic, 0)])
    consumer.commit({TopicPartition(guard_topic, 0): OffsetAndMetadata(0, "", -1)})
    consumer.close()
    guard_producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=guard_tx)
    guard_producer.init_transactions()

    for student, code in ATTACKS.items():
        head = f"GUARD_GROUP = {guard_group!r}\nGUARD_TX = {guard_tx!r}\n"
        nbformat.write(with_attack(LAB, head + code, on_reference=student in ON_REFERENCE),
                       submissions / f"{student}.ipynb")
    reference = grading.reference_notebook(LAB, _name())
    nbformat.write(reference, submissions / "zz_victim.ipynb")
    nbformat.write(_learner_slips(), submissions / "worker1.ipynb")
    blank = nbformat.writes(grading.released_notebook(LAB, _name())).encode()
    at = blank.index(b'"metadata": {') + len(b'"metadata": {')
    (submissions / "o_expand.ipynb").write_bytes(blank[:at] + b'"x": [' + b"{}," * 7_000_000 + b"{}], " + blank[at:])
    nbformat.write(grading.released_notebook(LAB, _name()), submissions / "zz victim.ipynb")
    nbformat.write(_tampered(), submissions / "u_tampered.ipynb")
    nbformat.write(_mistyped(), submissions / "u_types.ipynb")
    nbformat.write(grading.released_notebook(LAB, _name()), submissions / "w\nname.ipynb")
    nbformat.write(grading.released_notebook(LAB, _name()), submissions / ("l" * 243 + ".ipynb"))
    (submissions / "s_link.ipynb").symlink_to(ROOT / "solutions" / LAB / f"{LAB}.ipynb")
    with (submissions / "t_sparse.ipynb").open("wb") as handle:
        handle.truncate(3 * 2**30)

    # run through a fresh Python that reports its children's peak memory: this grading run's alone
    measured = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
                "print('PEAK_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
                "sys.exit(code)")
    command = [sys.executable, "-c", measured, sys.executable, "-m", "streamlab", "grade", LAB, str(submissions),
               "--out", str(out), "--timeout", "420", "--cell-timeout", "120", "--jobs", "1"]
    started = time.monotonic()
    run_tag = f"hd{stamp}"  # every topic, group and process of this run starts with it
    # the grader's data folder is not the broker's (as for an instructor who set STREAMLAB_DATA_DIR, or started the
    # broker from another checkout): no saved state there names the broker's SANDBOX listener, the broker does
    env = {**os.environ, "STREAMLAB_GRADE_RUN_TAG": run_tag, "STREAMLAB_DATA_DIR": str(base / "grader-data")}
    proc = subprocess.run(command, capture_output=True, text=True, timeout=2000, cwd=ROOT, env=env)
    peak_kb = int(re.search(r"PEAK_KB (\d+)", proc.stderr).group(1))
    print(proc.stdout)
    print(proc.stderr[-3000:], file=sys.stderr)
    with (out / "grades.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    yield {"proc": proc, "rows": rows, "by_student": {r["student"]: r for r in rows}, "out": out,
           "submissions": submissions, "seconds": time.monotonic() - started, "peak_kb": peak_kb,
           "guard": (guard_topic, guard_group, guard_tx, guard_producer), "bootstrap": kafka_bootstrap,
           "run_tag": run_tag}
    guard_producer.close()
    admin.close()  # idle through the whole run: the broker may have closed its connection (connections.max.idle.ms)
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.delete_topics([guard_topic])
    admin.close()


def _row(hostile, student):
    assert student in hostile["by_student"], (student, sorted(hostile["by_student"]), hostile["proc"].stdout[-2000:])
    return hostile["by_student"][student]


def _result(hostile, student) -> grading.Result:
    return grading.Result.from_json((hostile["out"] / "results" / f"{student}.json").read_text())


def _page(hostile, student) -> str:
    return (hostile["out"] / "feedback" / f"{student}.html").read_text(encoding="utf-8")


def test_the_run_ends_with_exit_0_and_a_row_per_file(hostile):
    assert hostile["proc"].returncode == 0, hostile["proc"].stderr[-3000:]
    assert len(hostile["rows"]) == len(os.listdir(hostile["submissions"]))


def test_the_victim_keeps_full_marks_under_its_own_name(hostile):
    row = _row(hostile, "zz_victim")
    assert (row["status"], row["score"]) == ("graded", row["max_score"]), row
    assert _row(hostile, "zz_victim")["file"].endswith("/zz_victim.ipynb")


def test_a_student_named_like_a_slot_keeps_its_own_log_and_the_slots(hostile):
    row = _row(hostile, "worker1")  # the blank lab (an answer pasted twice): graded, 0, its own log, the slot's beside
    assert (row["status"], float(row["score"])) == ("graded", 0.0), row
    own, slot = hostile["out"] / "logs" / "worker1.log", hostile["out"] / "grader" / "worker1.log"
    assert "Autograding" in own.read_text(errors="replace") and slot.exists()


@pytest.mark.parametrize("student", ["a_zipbomb", "b_records", "c_outputs", "d_door", "e_html", "f_tenancy",
                                     "g_exfil", "h_deep", "m_bytes", "n_display"])
def test_attackers_earn_nothing_and_are_graded(hostile, student):
    row = _row(hostile, student)
    assert (row["status"], float(row["score"])) == ("graded", 0.0), row


def test_what_a_student_makes_of_the_checkpoints_folder_is_looked_at_and_graded(hostile):
    assert "PLANTED" in _said(hostile, "h_deep"), "the attack did not run: this test would prove nothing"
    result = _result(hostile, "h_deep")
    assert result.status.value == "graded" and result.checks, result  # the checks gave their verdicts
    assert not [c for c in result.checks if c.passed], result.checks


def test_a_checkpoint_that_expands_is_refused_before_it_is_read(hostile):
    details = " ".join(check.detail for check in _result(hostile, "a_zipbomb").checks)
    assert "is not one a Spark query of this lab writes" in details and "expands" in details, details


def test_outputs_are_kept_within_their_caps(hostile):
    page = hostile["out"] / "feedback" / "c_outputs.html"
    assert page.stat().st_size < 8 * 2**20, page.stat().st_size
    assert "the grader kept no more output here" in page.read_text(encoding="utf-8")


def test_a_message_past_the_kernels_bound_costs_no_later_cell_its_outputs(hostile):
    """The 20 MB image is refused by ZeroMQ with its connection; the old grader never connected it again, so the lab's
    own set-up cell, run after the attack, lost its output (and every later cell waited out its "idle")."""
    text = re.sub("<[^>]+>", "", _page(hostile, "c_outputs"))
    assert re.search(r"Spark \d+\.\d+\.\d+, Kafka at ", text), text[-3000:]


def test_the_door_caps_connections_and_partitions(hostile, kafka_bootstrap):
    text = re.sub("<[^>]+>", "", _page(hostile, "d_door"))
    opened = re.search(r"OPEN (\d+) of (\d+)", text)
    assert opened and int(opened.group(1)) <= 64, text[-2000:]
    assert "CREATED 2000 partitions" not in text
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        assert not [t for t in admin.list_topics() if t.endswith("flood")]
    finally:
        admin.close()


def test_the_feedback_page_is_inert(hostile):
    page = _page(hostile, "e_html")
    head = page[page.index("<head"):]
    assert re.match(r"<head[^>]*>\s*<meta http-equiv=\"Content-Security-Policy\"", head), head[:300]
    assert 'document.title="PWNED"</script>' not in page
    assert not re.search(r"<(img|svg|a)\b[^>]*\s(onerror|onload|href=\"javascript:)", page, re.I)


def test_another_tenants_group_and_producer_are_untouched(hostile, kafka_bootstrap):
    from kafka import KafkaAdminClient, TopicPartition

    if "STREAMLAB_KAFKA_SANDBOX_SERVERS" not in os.environ:  # the native broker: found by asking it
        assert "enforced by Kafka's ACLs" in hostile["proc"].stdout, hostile["proc"].stdout[:2000]
    topic, group, _, producer = hostile["guard"]
    text = re.sub("<[^>]+>", "", _page(hostile, "f_tenancy"))
    assert "DELETE DID" not in text and "FENCE DID" not in text and "OFFSETS DID" not in text, text[-1500:]
    listed = re.search(r"LIST DID (.*)", text)
    assert listed is None or group not in listed.group(1)
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        assert TopicPartition(topic, 0) in admin.list_consumer_group_offsets(group)
    finally:
        admin.close()
    producer.begin_transaction()  # not fenced: its transactions still commit
    producer.send(topic, b"still mine")
    producer.commit_transaction()


def test_a_name_keeps_its_exact_id(hostile):
    row = _row(hostile, "zz victim")
    assert (row["status"], float(row["score"])) == ("graded", 0.0), row
    assert row["file"].endswith("/zz victim.ipynb")


def test_odd_files_and_names_are_invalid_rows_never_run(hostile):
    invalid = [r for r in hostile["rows"] if r["status"] == "invalid notebook"]
    assert len(invalid) == 7, [(r["student"], r["detail"]) for r in hostile["rows"]]
    assert all(float(r["score"]) == 0 for r in invalid)
    details = " ".join(r["detail"] for r in invalid)
    assert "symbolic link" in details, details
    assert _row(hostile, "u_tampered")["status"] == "invalid notebook"
    types = _row(hostile, "u_types")["detail"]
    assert all(says in types for says in ('has grade: "yes"', 'its points are "abc"', 'not text ({"x": [1]})')), types
    assert _row(hostile, "s_link")["status"] == "invalid notebook"
    assert _row(hostile, "t_sparse")["status"] == "invalid notebook"
    course = hostile["out"] / "course"  # the lab's template stays; no student's folder does
    assert not course.exists() or [p.name for p in course.iterdir()] in ([], [".template"])


def test_a_sparse_file_is_never_read(hostile):
    # a 3 GB file read into memory would make some grading process at least that large (the old grader: 6.4 GB)
    assert hostile["peak_kb"] < 2.5 * 2**20, hostile["peak_kb"]


def test_no_encoding_of_the_kernels_outputs_carries_the_answer_key_out(hostile):
    import base64
    import html

    text = html.unescape(re.sub("<[^>]+>", "", _page(hostile, "g_exfil")))
    sources = [base64.b64decode(blob).decode()[::-1] for blob in re.findall(r"ENC ([A-Za-z0-9+/=]+)", text)]
    released = "\n".join(cell.source for cell in grading.released_notebook(LAB, _name()).cells)
    tests = [c.source for c in grading.released_notebook(LAB, _name()).cells
             if c.metadata.get("nbgrader", {}).get("grade")]
    assert any(test.strip().splitlines()[0] in source for test in tests for source in sources), \
        "the attack did not read the test cells back: this test would prove nothing"
    checks = [line.strip() for line in (ROOT / "solutions" / LAB / "hidden_checks.py").read_text().splitlines()
              if len(line.strip()) > 30 and line.strip() not in released]
    kernel_saw = "\n".join(sources)
    assert "BEGIN HIDDEN TESTS" not in kernel_saw
    assert not [line for line in checks if line in kernel_saw]


# ---------------------------------------------------------------- the third round: what submissions share

def _said(hostile, student) -> str:
    import html

    return html.unescape(re.sub("<[^>]+>", "", _page(hostile, student)))


def test_a_flood_of_stderr_is_its_own_disk_limit_never_the_slots_log(hostile):
    row = _row(hostile, "i_stderr")
    assert row["status"] == "limit exceeded" and "disk" in row["detail"], row
    slot_logs = list((hostile["out"] / "grader").glob("worker*.log"))
    assert slot_logs and all(log.stat().st_size < 16 * 2**20 for log in slot_logs)
    assert (hostile["out"] / "logs" / "i_stderr.log").stat().st_size < 2 * 2**20
    crashed = [r["student"] for r in hostile["rows"] if r["status"] == "crashed"]
    assert crashed == ["j_heap"], "no kernel after it died at its first write (j_heap ends its own)"


def test_the_brokers_heap_holds_and_the_next_submission_earns_its_points(hostile):
    # its kernel ends itself after the attack (its own lab stalled minutes behind the requests it had sent)
    row = _row(hostile, "j_heap")
    assert row["status"] == "crashed" and float(row["score"]) == 0, row
    refused = _result(hostile, "j_heap").usage.get("kafka_refused", 0)
    assert refused >= 64, _result(hostile, "j_heap").usage  # every 16 MB request closed at the door
    assert not [r for r in hostile["rows"] if r["status"] == "grader error"], \
        [(r["student"], r["detail"]) for r in hostile["rows"] if r["status"] == "grader error"]
    # graded next (by name): the reference answers with Part B's column renamed. Its kernel and checks reach the
    # broker: every part but B earns all its points (the old door's broker gave the next submissions 0)
    students = [r["student"] for r in hostile["rows"]]
    assert students[students.index("j_heap") + 1] == "jz_words", students
    result = _result(hostile, "jz_words")
    failed = [check for check in result.checks if not check.passed]
    assert failed and all("OutOfMemoryError" in check.detail for check in failed), result.checks
    lost = {cell for check in failed for cell in check.cells}
    cells = {cell.grade_id: cell for cell in result.report.cells}
    assert result.score == result.max_score - sum(cells[c].max_score for c in lost), (result.score, result.checks)


def test_topic_configs_are_refused(hostile):
    """Creating with configs: at the door. Altering: by the broker, whose ACLs give the principal no ALTER_CONFIGS
    (its error code in the answer: 29, TOPIC_AUTHORIZATION_FAILED)."""
    said = _said(hostile, "f_tenancy")
    assert "CREATE refused" in said and "PLAIN DID" in said, said[-1500:]
    altered = re.search(r"ALTER DID \[\((\d+)", said)
    assert altered is not None and altered.group(1) == "29", said[-1500:]


def test_transactional_ids_and_bytes_stay_within_the_budget(hostile):
    made = re.search(r"TXIDS (\d+)", _said(hostile, "f_tenancy"))
    assert made and int(made.group(1)) <= 16, _said(hostile, "f_tenancy")[-1500:]
    usage = _result(hostile, "m_bytes").usage
    assert usage["kafka_produced_mb"] <= 64, usage
    written = re.search(r"BYTES (\d+)", _said(hostile, "m_bytes"))
    assert written and int(written.group(1)) <= 64 and "REFUSED" in _said(hostile, "m_bytes")


def test_a_display_update_copied_a_thousand_times_is_not_kept(hostile):
    page = hostile["out"] / "feedback" / "n_display.html"
    assert "UPDATED" in _said(hostile, "n_display")
    assert page.stat().st_size < 8 * 2**20, page.stat().st_size


def test_a_notebook_that_expands_in_memory_is_refused_unparsed(hostile):
    row = _row(hostile, "o_expand")
    assert row["status"] == "invalid notebook" and "JSON objects and arrays" in row["detail"], row


def test_a_checks_words_in_the_students_data_are_a_failed_part_not_a_grader_error(hostile):
    result = _result(hostile, "jz_words")
    assert result.status == "graded" and 0 < result.score < result.max_score, result.detail
    assert any("OutOfMemoryError" in check.detail for check in result.checks), result.checks


def test_the_broker_keeps_nothing_of_the_graded_submissions(hostile, kafka_bootstrap):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        left = [t for t in admin.list_topics() if t.startswith(hostile["run_tag"])]
        groups = [g for g, *_ in admin.list_consumer_groups() if g.startswith(hostile["run_tag"])]
    finally:
        admin.close()
    assert left == [] and groups == []
