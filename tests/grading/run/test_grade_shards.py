"""Shards for real (marker `labs`): one folder graded once whole and once as 2 shards in 2 separate processes
at the same time, then merged: the same grades.csv. Then a lost result: the merge refuses and names it, the
shard is run again (it grades only what it lost) and the merge gives the same grades again.

Kept cheap: one reference and one blank lab 01 (the two real gradings, one per shard) and a few files that are
not notebooks (no kernel), so the whole module grades four notebooks.
"""
from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from streamlab import grading
from streamlab.grading.run.shards import shard_of

ROOT = Path(__file__).resolve().parents[3]
LAB = grading.find_labs()[0]
TIMEOUT = ["--timeout", "600", "--cell-timeout", "300"]
INVALID = {"i_not_json": "{ not JSON", "j_not_a_notebook": json.dumps({"answer": 42}), "n_empty": "",
           "o_list": "[]", "p_truncated": '{"cells": [', "q_text": "my answers are in the e-mail"}

pytestmark = [pytest.mark.labs, pytest.mark.timeout(1500)]


def _in_shard(prefix: str, shard: int) -> str:
    """A name starting with ``prefix`` whose file lands in ``shard`` of 2."""
    return next(f"{prefix}{i}" for i in range(100) if shard_of(f"{prefix}{i}.ipynb", 2) == shard)


def _streamlab(*args: str, tag: str) -> subprocess.Popen:
    env = dict(os.environ, STREAMLAB_GRADE_RUN_TAG=tag)
    return subprocess.Popen([sys.executable, "-m", "streamlab", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=1400)
    print(out)
    print(err[-3000:], file=sys.stderr)
    return proc.returncode, out, err


def _grades(path: Path) -> dict[str, tuple]:
    """grades.csv without the seconds (the only column that may differ between two runs)."""
    with path.open(newline="") as handle:
        return {r["student"]: (r["score"], r["max_score"], r["status"], r["detail"], r["file"])
                for r in csv.DictReader(handle)}


@pytest.fixture(scope="module")
def runs(kafka_bootstrap, tmp_path_factory):
    base = Path(os.environ.get("STREAMLAB_DATA_DIR") or tmp_path_factory.mktemp("grading")) / "grading" / "shards"
    folder = base / "submissions"
    folder.mkdir(parents=True, exist_ok=True)
    name = grading.lab_notebooks(LAB)[0]
    reference, blank = _in_shard("e_reference", 1), _in_shard("f_blank", 2)
    nbformat.write(grading.reference_notebook(LAB, name), folder / f"{reference}.ipynb")
    nbformat.write(grading.released_notebook(LAB, name), folder / f"{blank}.ipynb")
    for student, text in INVALID.items():
        (folder / f"{student}.ipynb").write_text(text)
    tag = f"t{os.getpid()}-shards"
    single = _finish(_streamlab("grade", LAB, str(folder), "--out", str(base / "single"), "--jobs", "2", *TIMEOUT,
                                tag=f"{tag}-single"))
    procs = [_streamlab("grade", LAB, str(folder), "--out", str(base / f"shard-{k}"), "--shard", f"{k}/2",
                        "--jobs", "1", *TIMEOUT, tag=f"{tag}-{k}") for k in (1, 2)]   # at the same time
    shards = [_finish(proc) for proc in procs]
    merged = _finish(_streamlab("grade", "merge", str(base / "shard-1"), str(base / "shard-2"),
                                "--out", str(base / "merged"), tag=f"{tag}-merge"))
    return {"base": base, "folder": folder, "single": single, "shards": shards, "merged": merged, "tag": tag,
            "students": sorted([reference, blank, *INVALID]), "reference": reference, "blank": blank}


def test_shards_merged_give_the_single_runs_grades(runs):
    base = runs["base"]
    assert runs["single"][0] == 0, runs["single"][2][-2000:]
    for code, _, err in runs["shards"]:
        assert code == 0, err[-2000:]
    assert runs["merged"][0] == 0, runs["merged"][2][-2000:]
    single = _grades(base / "single" / "grades.csv")
    assert sorted(single) == runs["students"]
    assert single[runs["reference"]][:3] == (single[runs["reference"]][1], single[runs["reference"]][1], "graded")
    assert single[runs["blank"]][:1] == ("0",)
    assert _grades(base / "merged" / "grades.csv") == single
    for student in runs["students"]:
        assert (base / "merged" / "feedback" / f"{student}.html").is_file()


def test_each_shard_graded_its_share_only(runs):
    base, students = runs["base"], runs["students"]
    records = [json.loads((base / f"shard-{k}" / "run.json").read_text()) for k in (1, 2)]
    shares = [sorted(r["students"]) for r in records]
    assert shares == [[s for s in students if shard_of(f"{s}.ipynb", 2) == k] for k in (1, 2)]
    assert runs["reference"] in shares[0] and runs["blank"] in shares[1]
    for k, (record, (_, out, _)) in enumerate(zip(records, runs["shards"]), start=1):
        assert record["shard"] == f"{k}/2" and record["finished_at"] and record["folder_total"] == len(students)
        assert sorted(_grades(base / f"shard-{k}" / "grades.csv")) == shares[k - 1]
        progress = re.findall(rf"^  shard {k}/2: (\d+)/(\d+) done", out, flags=re.M)
        assert [int(done) for done, _ in progress] == list(range(1, len(shares[k - 1]) + 1))
        assert re.search(r"^Done in .* of wall time for \d+ submissions", out, flags=re.M), out
    single = json.loads((base / "single" / "run.json").read_text())
    assert {k: single[k] for k in ("solution_sha256", "checks_sha256", "grader", "settings", "folder_sha256")} == \
        {k: records[0][k] for k in ("solution_sha256", "checks_sha256", "grader", "settings", "folder_sha256")}


def test_the_summary_says_two_shards(runs):
    page = (runs["base"] / "merged" / "summary.html").read_text()
    assert '<span id="shards">2</span>' in page and '<span id="machines">1</span>' in page
    assert f'<span id="students">{len(runs["students"])}</span>' in page
    assert "from 2 shards on 1 machine" in runs["merged"][1]


def test_a_lost_result_is_refused_and_running_the_shard_again_recovers(runs):
    base = runs["base"]
    lost = next(s for s in INVALID if shard_of(f"{s}.ipynb", 2) == 2)
    (base / "shard-2" / "results" / f"{lost}.json").unlink()
    code, _, err = _finish(_streamlab("grade", "merge", str(base / "shard-1"), str(base / "shard-2"),
                                      "--out", str(base / "merged-again"), tag=runs["tag"] + "-m2"))
    assert code == 2 and f"has no result for 1 of its students: {lost}" in err, err
    assert not (base / "merged-again" / "grades.csv").exists()
    code, out, err = _finish(_streamlab("grade", LAB, str(runs["folder"]), "--out", str(base / "shard-2"),
                                        "--shard", "2/2", *TIMEOUT, tag=runs["tag"] + "-again"))
    assert code == 0, err[-2000:]
    graded_again = re.findall(r"^\[\d+/\d+\] (\S+): (?!.*skipped)", out, flags=re.M)
    assert graded_again == [lost], out   # nothing graded twice
    code, _, err = _finish(_streamlab("grade", "merge", str(base / "shard-1"), str(base / "shard-2"),
                                      "--out", str(base / "merged-again"), tag=runs["tag"] + "-m3"))
    assert code == 0, err
    assert _grades(base / "merged-again" / "grades.csv") == _grades(base / "single" / "grades.csv")
