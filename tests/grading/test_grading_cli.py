"""`streamlab grade` and `streamlab release-labs` as a user calls them (no grading)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
