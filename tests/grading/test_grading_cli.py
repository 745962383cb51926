"""`streamlab grade` and `streamlab release-labs` as a user calls them (no grading)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _streamlab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamlab", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_unknown_lab_is_a_usage_error(tmp_path):
    proc = _streamlab("grade", "lab99", str(tmp_path))
    assert proc.returncode == 2 and "no single lab matches 'lab99'" in proc.stderr


def test_no_submissions_is_said_plainly(tmp_path):
    proc = _streamlab("grade", "lab01", str(tmp_path))
    assert proc.returncode == 1 and "No submissions found" in proc.stdout, proc.stderr


def test_help_names_the_options():
    proc = _streamlab("grade", "--help")
    for option in ("--out", "--force", "--timeout", "--cell-timeout", "--jobs"):
        assert option in proc.stdout, proc.stderr
    assert "--out" in _streamlab("release-labs", "--help").stdout


def test_help_names_the_shard_and_roster_options_and_the_tools():
    text = _streamlab("grade", "--help").stdout
    assert "--shard" in text and "--roster" in text and "grade merge" in text and "grade export" in text
    assert "--format" in _streamlab("grade", "export", "--help").stdout


def test_a_bad_shard_is_a_usage_error(tmp_path):
    proc = _streamlab("grade", "lab01", str(tmp_path), "--shard", "0/4")
    assert proc.returncode == 2 and "numbered from 1" in proc.stderr


@pytest.mark.slow
def test_an_empty_shard_still_leaves_its_record_for_the_merge(tmp_path):
    """A small class over many shards: a shard with nobody in it grades nothing (no Kafka, no kernel) and
    says so in run.json, so that the merge does not take it for a missing shard."""
    import json

    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "ana.ipynb").write_text("not a notebook")   # ana.ipynb is in shard 4 of 4
    proc = _streamlab("grade", "lab01", str(tmp_path / "subs"), "--shard", "1/4", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert "Grading 0 submission(s) of lab01_stateless_vs_stateful (shard 1/4: 0 of the folder's 1)" in proc.stdout
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    assert (record["shard"], record["students"], record["folder_total"]) == ("1/4", {}, 1)
    assert record["finished_at"] and record["settings"]["sandbox"] is True
    assert (tmp_path / "out" / "grades.csv").read_text().startswith("student,score")


def test_the_banner_says_which_limits_this_machine_does_not_enforce(monkeypatch):
    """In the grader container the control groups are read-only: the banner named a 4096 MB memory limit that
    nothing enforced (found by the docker tier). It names what does not hold, and why."""
    from streamlab.grading.sandbox import box as sandbox

    monkeypatch.setattr(sandbox, "enforced_limits", lambda: {"disk"})
    assert sandbox.not_enforced_here() == ("; NOT enforced here: memory, processes, CPU time (no writable control "
                                      "groups; in a container, the container's own limits hold instead)")
    monkeypatch.setattr(sandbox, "enforced_limits", lambda: {"memory", "processes", "CPU time", "disk"})
    assert sandbox.not_enforced_here() == ""
