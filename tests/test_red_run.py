"""A red run explains itself (tests/red_run.py): run a small failing suite and read its last screen."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
pytest_plugins = ["red_run"]
"""

FAILING = '''
import subprocess
import pytest


@pytest.fixture
def graded():
    """Shaped like a lab's grader run in tests/grading/test_grade_labs.py."""
    rows = {"e_reference": {"student": "e_reference", "status": "graded", "score": "10", "max_score": "10",
                            "seconds": "61.2", "detail": ""},
            "h_slow": {"student": "h_slow", "status": "timed out", "score": "0", "max_score": "10",
                       "seconds": "420.3", "detail": "the submission did not finish within 420 s"}}
    return {"lab": "lab01_demo", "proc": subprocess.CompletedProcess([], 0, "", ""), "seconds": 512.0,
            "out": "/somewhere/out", "rows": rows}


def test_fine():
    assert True


def test_a_grading_outcome(graded):
    row = graded["rows"]["h_slow"]
    assert row["status"] == "graded", row


def test_plain_failure():
    raise RuntimeError("the broker went away\\nsecond line")


def test_a_child_process_failed():
    stderr = ("Traceback (most recent call last):\\n    File 'x.py', line 1, in <module>\\n      main()\\n"
              "  AttributeError: 'NoneType' object has no attribute 'invalid_metadata'\\n")
    assert 1 == 0, stderr


@pytest.fixture
def broken():
    raise OSError("no such folder")


def test_setup_error(broken):
    pass
'''


def test_a_red_run_names_every_failure_its_first_line_the_graders_rows_and_the_kept_logs(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_demo.py").write_text(FAILING)
    kept = tmp_path / "run"
    kept.mkdir()
    env = {**os.environ, "STREAMLAB_DATA_DIR": str(kept)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                           "--durations=30", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    screen = proc.stdout[proc.stdout.index("what failed (4)"):]
    assert "slowest" not in screen, "the durations come before, so the block stays on the last screen"
    assert "short test summary info" in screen
    assert "test_demo.py::test_a_grading_outcome\n    AssertionError: {'student': 'h_slow'" in screen
    assert "test_demo.py::test_plain_failure\n    RuntimeError: the broker went away\n" in screen
    assert ("test_demo.py::test_a_child_process_failed\n"
            "    AssertionError: AttributeError: 'NoneType' object has no attribute 'invalid_metadata'\n") in screen
    assert "test_demo.py::test_setup_error (in setup)\n    OSError: no such folder" in screen
    assert "grading lab01_demo: exit status 0, 512 s, output in /somewhere/out" in screen
    assert "  h_slow: timed out, 0/10, 420.3 s - the submission did not finish within 420 s" in screen
    assert "  e_reference: graded, 10/10, 61.2 s\n" in screen
    assert f"kept for diagnosis: {kept}" in screen
    assert "test_fine" not in screen
    assert (kept / "failures.txt").read_text().startswith("test_demo.py::test_a_grading_outcome\n")


def test_a_green_run_says_nothing_more(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_demo.py").write_text("def test_fine():\n    assert True\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                           "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "STREAMLAB_DATA_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "what failed" not in proc.stdout
    assert not (tmp_path / "failures.txt").exists()
