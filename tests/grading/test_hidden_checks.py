"""streamlab.grading.hidden_checks: the checks a grader runs outside the student's kernel.

Fast tests: fake checkpoint folders on disk, topics on the real broker, no Spark query.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types

import nbformat
import pytest

import streamlab as sl
from streamlab.grading import hidden_checks as hc
from streamlab.grading.labs import find_labs, solutions_dir


def _checkpoint(root, name="lab99-part", *, metadata=True, commits=(), offsets=()):
    path = root / "checkpoints" / f"{name}-a1b2c3"
    (path / "commits").mkdir(parents=True)
    (path / "offsets").mkdir()
    if metadata:
        (path / "metadata").write_text(json.dumps({"id": "0f0f0f0f-0000-0000-0000-000000000000"}))
    for batch in commits:
        (path / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    for batch in offsets:
        (path / "offsets" / str(batch)).write_text('v1\n{"batchWatermarkMs":0}\n{"t-a1b2c3":{"0":3}}\n')
    return path


def test_a_real_looking_checkpoint_is_found(tmp_path):
    _checkpoint(tmp_path, commits=[0], offsets=[0])
    ckpt = hc.Artifacts(tmp_path, "").checkpoint("lab99-part")
    assert ckpt.last_committed_batch() == 0
    assert hc.committed_offsets(ckpt, "t-a1b2c3") == {0: 3}


@pytest.mark.parametrize("kwargs, message", [
    ({"metadata": False, "commits": [0], "offsets": [0]}, "no query id"),
    ({"commits": [], "offsets": [0]}, "no committed batch"),
    ({"commits": [0, 1], "offsets": [0]}, "batch 1 is committed but has no offsets"),
])
def test_a_hand_made_checkpoint_fails(tmp_path, kwargs, message):
    _checkpoint(tmp_path, **kwargs)
    with pytest.raises(hc.CheckFailed, match=message):
        hc.Artifacts(tmp_path, "").checkpoint("lab99-part")


def test_missing_and_ambiguous_checkpoints_fail(tmp_path):
    with pytest.raises(hc.CheckFailed, match="no checkpoint named 'lab99-part'"):
        hc.Artifacts(tmp_path, "").checkpoint("lab99-part")
    _checkpoint(tmp_path, commits=[0], offsets=[0])
    (tmp_path / "checkpoints" / "lab99-part-ffffff").mkdir()
    with pytest.raises(hc.CheckFailed, match="2 checkpoints"):
        hc.Artifacts(tmp_path, "").checkpoint("lab99-part")


def test_a_longer_name_is_not_mistaken_for_the_checkpoint(tmp_path):
    _checkpoint(tmp_path, name="lab99-part-two", commits=[0], offsets=[0])
    with pytest.raises(hc.CheckFailed, match="no checkpoint"):
        hc.Artifacts(tmp_path, "").checkpoint("lab99-part")


def test_run_checks_turns_every_failure_into_a_result():
    module = types.ModuleType("fake_checks")

    @hc.check("test_a")
    def passes(run):
        pass

    @hc.check("test_b", "test_c")
    def asserts(run):
        assert 1 == 2, "the counts are wrong"

    @hc.check("test_d")
    def breaks(run):
        raise KeyError("path")

    module.passes, module.asserts, module.breaks = passes, asserts, breaks
    results = {r.name: r for r in hc.run_checks(module, hc.Artifacts("/nonexistent", ""))}
    assert results["passes"].passed
    assert not results["asserts"].passed and results["asserts"].detail == "the counts are wrong"
    assert results["asserts"].cells == ["test_b", "test_c"]
    assert not results["breaks"].passed and results["breaks"].detail.startswith("KeyError")
    with pytest.raises(ValueError):
        hc.check()


def test_output_rejects_records_that_are_not_rows(kafka_bootstrap, monkeypatch):
    monkeypatch.setenv("STREAMLAB_TOPIC_PREFIX", "hc-test-")
    topic = sl.new_topic("lab99-out")
    try:
        artifacts = hc.Artifacts(topic_prefix="hc-test-")
        sl.produce(topic, [{"path": "/a", "count": 1, "batch_id": 0}])
        assert artifacts.output("lab99-out").to_dict("records") == [{"path": "/a", "count": 1, "batch_id": 0}]
        artifacts.records("lab99-out")[0]["value"]["count"] = 99  # one check changing what it was given
        assert artifacts.records("lab99-out")[0]["value"]["count"] == 1  # changes nothing for the next
        sl.produce(topic, ["hand-made"])
        assert len(artifacts.output("lab99-out")) == 1  # what the run left is read once (nothing changes it then)
        with pytest.raises(hc.CheckFailed, match="not an output row"):
            hc.Artifacts(topic_prefix="hc-test-").output("lab99-out")
        with pytest.raises(hc.CheckFailed, match="no topic named 'lab99-missing'"):
            artifacts.topic("lab99-missing")
    finally:
        sl.delete_topic(topic)


# Run in a Python of its own, so that its peak memory is this read's (in the suite's process, an earlier test's peak
# hid it: five records decoded at once passed there).
HUGE_READ = """
import json, resource
from streamlab.grading import hidden_checks as hc
def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
artifacts = hc.Artifacts(topic_prefix="hc-huge-")
artifacts.records("lab99-small-out")  # the imports and the first connection: their memory is not the read's
before = peak_mb()
try:
    artifacts.output("lab99-huge-out")
    said = "read"
except hc.CheckFailed as err:
    said = str(err)
print(json.dumps({"said": said, "grown_mb": peak_mb() - before}))
"""


@pytest.mark.slow
def test_huge_records_are_refused_one_by_one_before_they_are_decoded(kafka_bootstrap, monkeypatch):
    """A topic of gzip'd 48 MB records (each ~50 kB on the wire) made the old checks decode them all: a 6.7 GB
    worker. Then they decoded every record one poll brought (five here: 240 MB and more) before looking at any. Now
    the first record over ``bounds.RECORD_BYTES`` fails the check, the only one decoded."""
    from kafka import KafkaProducer

    monkeypatch.setenv("STREAMLAB_TOPIC_PREFIX", "hc-huge-")
    topic, small = sl.new_topic("lab99-huge-out"), sl.new_topic("lab99-small-out")
    sl.produce(small, [{"batch_id": 0, "path": "/a"}])
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, compression_type="gzip",
                             max_request_size=100 * 2**20)
    value = b'{"batch_id": 0, "path": "' + b"a" * (48 * 2**20) + b'"}'
    try:
        for _ in range(5):
            producer.send(topic, value).get(timeout=60)
        producer.close()
        del value
        proc = subprocess.run([sys.executable, "-c", HUGE_READ], capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap))
        assert proc.returncode == 0, proc.stderr[-2000:]
        read = json.loads(proc.stdout.strip().splitlines()[-1])
        assert re.search(r"holds \d+ bytes; at most 1048576 are read", read["said"]), read
        assert read["grown_mb"] < 150, f"reading grew the checks' process by {read['grown_mb']:.0f} MB: " \
                                       f"more than one record decoded (one: about 100 MB, five: 240 MB and more)"
    finally:
        sl.delete_topic(topic)
        sl.delete_topic(small)


@pytest.mark.parametrize("lab", find_labs())
def test_every_graded_cell_has_a_hidden_check(lab):
    """Points come only from cells a hidden check confirms: a lab without hidden_checks.py, or a graded
    cell no check names, could be faked from inside the notebook."""
    path = solutions_dir() / lab / "hidden_checks.py"
    assert path.exists(), f"{lab} has no hidden_checks.py beside its notebook"
    checks = hc.checks_of(hc.load_checks(path))
    covered = {cell for c in checks for cell in c.cells}
    graded = set()
    for notebook in (solutions_dir() / lab).glob("*.ipynb"):
        for cell in nbformat.read(notebook, as_version=4).cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade"):
                graded.add(meta["grade_id"])
    assert graded, f"{lab} has no graded cells"
    assert graded <= covered, f"{lab}: no hidden check confirms {sorted(graded - covered)}"
    assert covered <= graded, f"{lab}: checks name cells that are not graded: {sorted(covered - graded)}"
