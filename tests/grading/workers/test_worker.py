"""The worker's reading of nbgrader's outcome (no kernel, no Spark: notebooks built in memory)."""
from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import nbformat

from streamlab.grading.outputs.results import Status
from streamlab.grading.workers.worker import _read_autograded, _why_autograde_failed


def test_why_autograde_failed_goes_by_the_exception_that_stopped_the_run():
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from nbgrader.preprocessors.execute import UnresponsiveKernelError

    cases = [
        (DeadKernelError("Kernel died"), "", Status.CRASHED),
        (CellTimeoutError("A cell timed out"), "", Status.TIMED_OUT),
        (UnresponsiveKernelError(), "", Status.TIMED_OUT),
        (None, "nbformat.ValidationError: bad metadata", Status.INVALID),
        (None, "SchemaTooNew", Status.INVALID),
        (None, "sqlite3.OperationalError: database is locked", Status.ERROR),
    ]
    for failure, text, status in cases:
        assert _why_autograde_failed(failure, text, 45)[0] is status, (failure, text)
    assert _why_autograde_failed(CellTimeoutError(""), "", 45)[1] == \
        "a cell was still running after 45 s and did not stop when interrupted"


def test_words_a_notebook_printed_never_decide_a_status():
    """The log holds what nbgrader logged, which can quote the notebook: a grader failure whose log says
    'Kernel died' or 'CellTimeoutError' is still the grader's (graded again), never the student's crash."""
    printed = "print('DeadKernelError: Kernel died; CellTimeoutError; UnresponsiveKernelError')"
    assert _why_autograde_failed(None, printed, 45)[0] is Status.ERROR
    assert _why_autograde_failed(RuntimeError("sqlite3 locked"), printed + " ValidationError", 45)[0] is Status.ERROR


def _timed(source: str, start: str, end: str, grade_id: str | None = None, error: str | None = None):
    meta = {"execution": {"iopub.execute_input": start, "shell.execute_reply": end}}
    if grade_id:
        meta["nbgrader"] = {"grade_id": grade_id, "grade": True}
    cell = nbformat.v4.new_code_cell(source, metadata=meta)
    if error:
        cell.outputs = [nbformat.v4.new_output("error", ename=error, evalue="", traceback=[])]
    return cell


def test_read_autograded_finds_interrupted_cells_and_timings(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Lab"),
        _timed("spark = start()", "2026-01-01T10:00:05.000Z", "2026-01-01T10:00:20.000Z"),
        _timed("answer()", "2026-01-01T10:00:20.500Z", "2026-01-01T10:00:30.500Z", error="CellTimeoutError"),
        _timed("check()", "2026-01-01T10:00:31.000Z", "2026-01-01T10:00:33.000Z", grade_id="q1",
               error="CellTimeoutError"),
    ])
    nbformat.write(nb, tmp_path / "lab.ipynb")
    started_at = datetime(2026, 1, 1, 10, 0, 0, tzinfo=UTC)
    timeouts, timings = _read_autograded([tmp_path / "lab.ipynb"], started_at)
    assert timeouts == ["cell 2", "q1"]
    assert timings == {"startup_seconds": 20.0, "work_seconds": 12.0}


def test_read_autograded_without_timings(tmp_path):
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), tmp_path / "lab.ipynb")
    assert _read_autograded([tmp_path / "lab.ipynb"], datetime.now(UTC)) == ([], {})


def test_worker_runs_as_a_module():
    proc = subprocess.run([sys.executable, "-m", "streamlab.grading.workers.worker", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "--serve" in proc.stdout and "--report" not in proc.stdout, proc.stderr
    assert "RuntimeWarning" not in proc.stderr


def test_the_grading_processes_never_change_their_own_environment():
    """A submission travels as a ``SubmissionContext`` passed as an argument; its environment is given to each
    child process when it starts, never swapped into the worker's (the old worker swapped ``os.environ`` twice,
    one swap inside the other)."""
    import ast
    from pathlib import Path

    import streamlab.grading as grading

    changes = []
    for name in ("workers/worker.py", "workers/warm.py", "run/grader.py", "sandbox/box.py", "workers/hidden.py",
                 "sandbox/tenancy.py", "workers/context.py"):
        tree = ast.parse((Path(grading.__file__).parent / name).read_text())
        for node in ast.walk(tree):
            target = node.func.value if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else None
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                hits = [t for t in targets if isinstance(t, ast.Subscript) and ast.unparse(t.value) == "os.environ"]
                changes += [f"{name}:{node.lineno}" for _ in hits]
            elif target is not None and ast.unparse(target) == "os.environ" and node.func.attr in (
                    "update", "clear", "pop", "setdefault", "popitem"):
                changes.append(f"{name}:{node.lineno}")
    assert changes == [], f"the grader changes its own environment at {changes}"
