"""Merging shards' outputs (``streamlab grade merge``) from outputs built in memory: no kernel, no Spark."""
from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from shard_outputs import CLASS, LAB, SETTINGS, make_output, shards

from streamlab.grading.outputs.results import Result, write_csv
from streamlab.grading.outputs.summary import write_summary
from streamlab.grading.run.merge import MergeRefused, merge
from streamlab.grading.run.runinfo import RunRecord, describe_runs, read_runs

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def two(tmp_path) -> list[Path]:
    first, second = shards(2)
    assert first and second, "the class splits over both shards"
    return [make_output(tmp_path / "shard-1", "1/2", first, machine="node-a"),
            make_output(tmp_path / "shard-2", "2/2", second, machine="node-b")]


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_merged_shards_give_the_single_runs_grades(tmp_path, two):
    results, runs = merge(two, tmp_path / "merged")
    write_csv(tmp_path / "merged" / "grades.csv", results)
    single = make_output(tmp_path / "single", "1/1", list(CLASS))
    write_csv(single / "grades.csv", [Result.from_json(p.read_text()) for p in (single / "results").glob("*.json")])
    merged_rows = _rows(tmp_path / "merged" / "grades.csv")
    assert merged_rows == _rows(single / "grades.csv")
    assert [r["student"] for r in merged_rows] == sorted(CLASS)
    # feedback and logs came along, and the results point at the merged copies
    for result in results:
        assert Path(result.feedback) == tmp_path.resolve() / "merged" / "feedback" / f"{result.student}.html"
        assert Path(result.feedback).read_text() == f"<p>feedback of {result.student}</p>"
        assert Path(result.log).read_text() == f"log of {result.student}\n"
    assert [r.shard for r in read_runs(tmp_path / "merged")] == ["1/2", "2/2"]
    assert describe_runs(runs) == "2 shards on 2 machines (node-a: 1/2; node-b: 2/2)"


def test_summary_says_how_many_shards_and_machines(tmp_path, two):
    results, runs = merge(two, tmp_path / "merged")
    page = write_summary(tmp_path / "merged", LAB, [r.student for r in results], runs=runs).read_text()
    assert '<span id="shards">2</span>' in page and '<span id="machines">2</span>' in page
    assert '<span id="students">8</span>' in page
    assert len(re.findall(r"<tr><td>[12]/2</td>", page)) == 2


def _refusal(paths, dest) -> str:
    before = sorted(Path(dest).rglob("*")) if Path(dest).exists() else None
    with pytest.raises(MergeRefused) as caught:
        merge(paths, dest)
    after = sorted(Path(dest).rglob("*")) if Path(dest).exists() else None
    assert after == before, "a refused merge writes nothing"
    return str(caught.value)


def test_a_missing_shard_is_named(tmp_path):
    first, second, third = shards(3)
    a = make_output(tmp_path / "a", "1/3", first)
    c = make_output(tmp_path / "c", "3/3", third)
    message = _refusal([a, c], tmp_path / "merged")
    assert "shard 2/3 is missing" in message and "--shard 2/3" in message


def test_shards_of_a_different_lab_version_or_settings_are_refused(tmp_path):
    first, second = shards(2)
    a = make_output(tmp_path / "a", "1/2", first)
    b = make_output(tmp_path / "b", "2/2", second, solution_sha256="b" * 64)
    message = _refusal([a, b], tmp_path / "m1")
    assert "different solution" in message and str(a) in message and str(b) in message
    b = make_output(tmp_path / "b2", "2/2", second, settings={**SETTINGS, "sandbox": False, "limits": None})
    message = _refusal([a, b], tmp_path / "m2")
    assert "different settings" in message and "no sandbox" in message
    b = make_output(tmp_path / "b3", "2/2", second, checks_sha256="d" * 64)
    assert "different hidden checks" in _refusal([a, b], tmp_path / "m3")
    b = make_output(tmp_path / "b4", "2/2", second, grader="streamlab 0.2.0, nbgrader 0.9.5, grading code 0")
    assert "different grader" in _refusal([a, b], tmp_path / "m4")
    b = make_output(tmp_path / "b5", "2/2", second, lab="lab02_y")
    assert "different lab:" in _refusal([a, b], tmp_path / "m5")
    b = make_output(tmp_path / "b6", "2/2", second, folder_total=9, folder_sha256="e" * 64)
    assert "different submissions folder" in _refusal([a, b], tmp_path / "m6")


def test_different_splits_are_refused(tmp_path):
    first, _ = shards(2)
    a = make_output(tmp_path / "a", "1/2", first)
    b = make_output(tmp_path / "b", "2/3", shards(3)[1])
    assert "different number of shards" in _refusal([a, b], tmp_path / "m")


def test_a_student_graded_twice_with_different_scores_is_refused(tmp_path, two):
    first = shards(2)[0]
    student = first[0]
    again = make_output(tmp_path / "again", "1/2", first, scores={student: 1 if CLASS[student][0] != 1 else 2})
    message = _refusal([*two, again], tmp_path / "m")
    assert f"{student} was graded twice with different results" in message
    assert str(two[0]) in message and str(again) in message


def test_the_same_shard_twice_with_the_same_results_is_fine(tmp_path, two):
    copy = make_output(tmp_path / "copy", "1/2", shards(2)[0])
    results, runs = merge([*two, copy], tmp_path / "m")
    assert sorted(r.student for r in results) == sorted(CLASS) and len(runs) == 3


def test_an_unfinished_shard_or_a_lost_result_is_refused_and_a_rerun_recovers(tmp_path, two):
    a, b = two
    lost = sorted(RunRecord.from_dict(json.loads((b / "run.json").read_text())).students)[0]
    (b / "results" / f"{lost}.json").unlink()
    message = _refusal(two, tmp_path / "m")
    assert f"has no result for 1 of its students: {lost}" in message and str(b) in message
    record = json.loads((b / "run.json").read_text())
    record["finished_at"] = ""
    (b / "run.json").write_text(json.dumps(record))
    assert "did not finish" in _refusal(two, tmp_path / "m")
    # the shard is run again into its folder: the missing result is back, the run finished
    make_output(b, "2/2", shards(2)[1])
    results, _ = merge(two, tmp_path / "m")
    assert lost in {r.student for r in results}


def test_outputs_that_are_not_shards_are_refused(tmp_path, two):
    (tmp_path / "empty").mkdir()
    assert "no run.json" in _refusal([two[0], tmp_path / "empty"], tmp_path / "m")
    assert "is not a folder" in _refusal([tmp_path / "nowhere"], tmp_path / "m")
    assert "one of the outputs" in _refusal(two, two[0])
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "thesis.tex").write_text("mine")
    assert "other things in it" in _refusal(two, tmp_path / "busy")
    assert (tmp_path / "busy" / "thesis.tex").read_text() == "mine"


def test_merging_again_replaces_an_earlier_merge(tmp_path, two):
    merge(two, tmp_path / "m")
    (tmp_path / "m" / "results" / "stale.json").write_text("{}")
    results, _ = merge(two, tmp_path / "m")
    assert not (tmp_path / "m" / "results" / "stale.json").exists()
    assert len(results) == len(CLASS)
    merged = read_runs(tmp_path / "m")
    assert "a merged output" in _refusal([tmp_path / "m"], tmp_path / "m2") and len(merged) == 2


def _streamlab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamlab", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def test_merge_command(tmp_path, two):
    roster = tmp_path / "roster.csv"
    roster.write_text("file,id,name,email,section\nana.ipynb,S1,Ana A,ana@x.edu,A\nzoe.ipynb,S9,Zoe Z,zoe@x.edu,B\n")
    proc = _streamlab("grade", "merge", *map(str, two), "--out", str(tmp_path / "m"), "--roster", str(roster))
    assert proc.returncode == 0, proc.stderr
    assert "Merged 8 student(s) of lab01_x from 2 shards on 2 machines" in proc.stdout
    assert "zoe" in proc.stdout.lower() and "not in the roster (7)" in proc.stdout
    rows = {r["student"] or r["file"]: r for r in _rows(tmp_path / "m" / "grades.csv")}
    assert rows["ana"]["id"] == "S1" and rows["ben"]["id"] == ""
    assert rows["zoe.ipynb"]["status"] == "no submission" and rows["zoe.ipynb"]["score"] == ""
    page = (tmp_path / "m" / "summary.html").read_text()
    assert '<span id="missing">1</span>' in page and '<span id="unknown">7</span>' in page
    refused = _streamlab("grade", "merge", str(two[0]), "--out", str(tmp_path / "m2"))
    assert refused.returncode == 2 and "shard 2/2 is missing" in refused.stderr
    assert "--out" in _streamlab("grade", "merge", "--help").stdout
