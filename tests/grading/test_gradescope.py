"""streamlab grade gradescope: a lab's Gradescope autograder, and what it writes for one submission.

Fast: the zip is laid out as Gradescope runs it (two executable scripts at its top, the package, this lab's
answer key and no other), every results.json the runner can write fits Gradescope's published format (the
schema below), and what a student uploads is read as ``streamlab grade`` reads a folder: a link to the answer
key, two notebooks or an oversized file is an invalid submission, scored 0, without running anything.

Heavy (marker ``labs``): the zip unpacked into an ``/autograder`` folder as Gradescope lays it out, and its
``run_autograder`` run on the reference answers (full marks, every test passed, in the sandbox) and on a
blank lab whose cells forge results.json and rewrite the grader's files (0 points, the grader's own results).
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import nbformat
import pytest

from streamlab import grading
from streamlab.grading import bounds, gradescope
from streamlab.grading.outputs.results import CellGrade, Result, Status, WorkerReport

ROOT = Path(__file__).resolve().parents[2]
LAB = grading.find_labs()[0]
(NOTEBOOK,) = grading.lab_notebooks(LAB)

# Gradescope's results.json, as its "Autograder Specifications" page describes it ("Output format"): a
# top-level score or a score on each test, and these fields only.
VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
FORMAT = {"enum": ["text", "html", "simple_format", "md", "ansi"]}
GRADESCOPE_RESULTS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number"}, "execution_time": {"type": "number"}, "output": {"type": "string"},
        "output_format": FORMAT, "test_output_format": FORMAT, "test_name_format": FORMAT,
        "visibility": VISIBILITY, "stdout_visibility": VISIBILITY, "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "score": {"type": "number"}, "max_score": {"type": "number"},
                "status": {"enum": ["passed", "failed"]}, "name": {"type": "string"}, "name_format": FORMAT,
                "number": {"type": "string"}, "output": {"type": "string"}, "output_format": FORMAT,
                "tags": {"type": "array", "items": {"type": "string"}}, "visibility": VISIBILITY,
                "extra_data": {"type": "object"}},
        }},
        "leaderboard": {"type": "array"},
    },
    "anyOf": [{"required": ["score"]},
              {"required": ["tests"], "properties": {"tests": {"items": {"required": ["score"]}}}}],
}


def _valid(results: dict) -> dict:
    jsonschema.validate(results, GRADESCOPE_RESULTS)
    return results


@pytest.fixture(scope="module")
def autograder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gradescope") / "autograder.zip"
    proc = subprocess.run([sys.executable, "-m", "streamlab", "grade", "gradescope", LAB[:5], "--out", str(out)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "Upload it to the assignment's Autograder settings" in proc.stdout
    return out


def _unpacked(zip_path: Path, root: Path) -> Path:
    """``root`` laid out as Gradescope does: the zip in source/, run_autograder beside it, submission/."""
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
        for info in zf.infolist():  # extractall drops the modes
            if info.external_attr >> 16:
                os.chmod(root / "source" / info.filename, (info.external_attr >> 16) & 0o777)
    (root / "run_autograder").write_bytes((root / "source" / "run_autograder").read_bytes())
    (root / "run_autograder").chmod(0o755)
    (root / "submission").mkdir()
    return root


# ----------------------------------------------------------------------------- the package

def test_the_zip_is_what_gradescope_runs_and_holds_this_lab_alone(autograder):
    with zipfile.ZipFile(autograder) as zf:
        names = zf.namelist()
        modes = {i.filename: (i.external_attr >> 16) for i in zf.infolist()}
        scripts = {name: zf.read(name).decode() for name in ("setup.sh", "run_autograder")}
    for name, text in scripts.items():
        assert stat.S_ISREG(modes[name]) and modes[name] & 0o111, f"{name} must be executable"
        check = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
        assert check.returncode == 0, f"{name}: {check.stderr}"
    assert f"-m streamlab grade gradescope {LAB} --run" in scripts["run_autograder"]
    assert "openjdk-17-jdk-headless python3.11" in scripts["setup.sh"] and "bubblewrap" in scripts["setup.sh"]
    assert "course/streamlab/grading/gradescope.py" in names and "course/requirements.txt" in names
    assert {n.split("/")[2] for n in names if n.startswith("course/solutions/")} == {LAB}, "this lab's key only"
    assert f"course/solutions/{LAB}/hidden_checks.py" in names
    assert not [n for n in names if n.startswith(("course/tests/", "course/notebooks/")) or "__pycache__" in n]


def test_a_visibility_gradescope_does_not_know_is_refused(tmp_path):
    with pytest.raises(grading.GradingError, match="visibility"):
        gradescope.package(LAB, tmp_path / "a.zip", visibility="students")
    assert not (tmp_path / "a.zip").exists()


# ----------------------------------------------------------------------------- results.json

def _cells(*scores):
    return [CellGrade(NOTEBOOK, f"test_{i}", score, 2.0) for i, score in enumerate(scores)]


def test_every_results_json_fits_gradescopes_format():
    report = WorkerReport(Status.GRADED, 3.0, 4.0, cells=_cells(2.0, 1.0),
                          checks=[{"name": "counts", "cells": ["test_1"], "passed": False, "detail": "u1: 3, not 4"}])
    graded = Result("submission", Status.GRADED, score=3.0, max_score=4.0, seconds=41.6, report=report)
    results = _valid(gradescope.results_json(LAB, graded, box_note="Graded in the sandbox (...)."))
    assert results["score"] == 3.0 == sum(t["score"] for t in results["tests"])
    assert [t["status"] for t in results["tests"]] == ["passed", "failed"]
    assert results["tests"][1]["output"].endswith("FAILED: counts: u1: 3, not 4")
    assert results["extra_data"] == {"lab": LAB, "status": "graded", "sandboxed": True}
    assert results["output_format"] == results["test_output_format"] == "text", "nothing a student made is HTML"
    for status in (Status.TIMED_OUT, Status.CRASHED, Status.INVALID, Status.LIMIT, Status.ERROR):
        failed = Result("submission", status, detail="why")
        results = _valid(gradescope.results_json(LAB, failed, visibility="after_published",
                                                 box_note="Graded WITHOUT the sandbox: no bwrap."))
        assert results["score"] == 0 and results["tests"] == [] and "why" in results["output"]
        assert results["extra_data"]["sandboxed"] is False and "WITHOUT the sandbox" in results["output"]
    assert "not your work" in gradescope.results_json(LAB, Result("s", Status.ERROR))["output"]


def test_the_schema_catches_what_gradescope_would_reject():
    for wrong in ({"tests": [{"name": "no score"}]}, {"score": "10"}, {"score": 1, "visibility": "students"},
                  {"score": 1, "tests": [{"score": 1, "max": 2}]}):
        with pytest.raises(jsonschema.ValidationError):
            _valid(wrong)


# ----------------------------------------------------------------------------- what a student uploads (hostile)

def _run_without_grading(root: Path) -> dict:
    """The runner on ``root``: these uploads must be refused before anything starts (no broker, no grader:
    KAFKA_BOOTSTRAP_SERVERS unset would start one, and this test's root has no jars)."""
    results = gradescope.run(LAB, root)
    assert json.loads((root / "results" / "results.json").read_text()) == results
    return _valid(results)


def test_a_link_to_the_answer_key_is_not_graded(autograder, tmp_path):
    """A naive runner copies the lab's notebook by name: here that name is a link to the reference answers in
    the autograder's own source folder, which would have scored full marks."""
    root = _unpacked(autograder, tmp_path / "autograder")
    key = root / "source" / "course" / "solutions" / LAB / f"{NOTEBOOK}.ipynb"
    (root / "submission" / f"{NOTEBOOK}.ipynb").symlink_to(key)
    (root / "submission" / "work").symlink_to(key.parent, target_is_directory=True)
    results = _run_without_grading(root)
    assert results["score"] == 0 and results["extra_data"]["status"] == "invalid notebook"
    assert f"upload {NOTEBOOK}.ipynb" in results["output"]
    assert not (root / "grading" / "submissions" / "submission.ipynb").exists(), "nothing was copied"


def test_two_notebooks_or_an_oversized_one_are_not_graded(autograder, tmp_path, monkeypatch):
    root = _unpacked(autograder, tmp_path / "autograder")
    released = grading.released_notebook(LAB, NOTEBOOK)
    for name in ("mine.ipynb", "copy.ipynb"):
        nbformat.write(released, root / "submission" / name)
    assert "2 notebooks in your submission" in _run_without_grading(root)["output"]
    (root / "submission" / "copy.ipynb").unlink()
    monkeypatch.setattr(bounds, "NOTEBOOK_BYTES", 100)
    results = _run_without_grading(root)
    assert results["score"] == 0 and "mine.ipynb is " in results["output"]
    assert "a lab notebook is at most 100 bytes" in results["output"]


def test_the_labs_notebook_is_found_by_name_beside_other_files(tmp_path):
    (tmp_path / "nested").mkdir()
    named = tmp_path / "nested" / f"{NOTEBOOK}.ipynb"
    for path in (named, tmp_path / "scratch.ipynb", tmp_path / ".ipynb_checkpoints" / f"{NOTEBOOK}.ipynb"):
        path.parent.mkdir(exist_ok=True)
        path.write_text("{}")
    assert gradescope.submitted_notebook(tmp_path, LAB) == (named, "")
    named.unlink()
    assert gradescope.submitted_notebook(tmp_path, LAB) == (tmp_path / "scratch.ipynb", "")


# ----------------------------------------------------------------------------- the real run

FORGED = {"score": 999, "tests": [], "output": "forged"}


def _forger(root: Path):
    """The blank lab whose first cell forges results.json and rewrites the grader's files, as a submission
    that runs with the grader's powers could."""
    notebook = grading.released_notebook(LAB, NOTEBOOK)
    course = root / "source" / "course"
    targets = [course / "solutions" / LAB / "hidden_checks.py", course / "streamlab" / "grading" / "gradescope.py"]
    notebook.cells.insert(0, nbformat.v4.new_code_cell(
        "import json, pathlib\n"
        f"for target in {[str(t) for t in targets]!r}:\n"
        "    try:\n"
        "        pathlib.Path(target).write_text('raise SystemExit(0)\\n')\n"
        "    except OSError as err:\n"
        "        print('cannot write', target, err)\n"
        f"for results in [pathlib.Path({str(root / 'results' / 'results.json')!r})]:\n"
        "    try:\n"
        "        results.parent.mkdir(parents=True, exist_ok=True)\n"
        f"        results.write_text(json.dumps({FORGED!r}))\n"
        "    except OSError as err:\n"
        "        print('cannot write', results, err)\n"))
    return notebook, targets


def _run_autograder(root: Path) -> dict:
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "STREAMLAB_CACHE_DIR": str(ROOT / ".cache"),
           "STREAMLAB_AUTOGRADER_VENV": str(Path(sys.executable).parents[1])}  # setup.sh's venv: this one
    proc = subprocess.run([str(root / "run_autograder")], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return _valid(json.loads((root / "results" / "results.json").read_text()))


@pytest.mark.labs
@pytest.mark.timeout(1200)
def test_run_autograder_grades_the_reference_and_not_a_forger(autograder, tmp_path):
    reference = _unpacked(autograder, tmp_path / "reference")
    nbformat.write(grading.reference_notebook(LAB, NOTEBOOK), reference / "submission" / f"{NOTEBOOK}.ipynb")
    results = _run_autograder(reference)
    assert results["extra_data"] == {"lab": LAB, "status": "graded", "sandboxed": True}
    assert results["score"] == sum(t["max_score"] for t in results["tests"]) > 0
    assert all(t["status"] == "passed" and "passed:" in t["output"] for t in results["tests"])

    forger = _unpacked(autograder, tmp_path / "forger")
    notebook, targets = _forger(forger)
    before = {t: t.read_bytes() for t in targets}
    nbformat.write(notebook, forger / "submission" / "answers.ipynb")
    results = _run_autograder(forger)
    assert results["score"] == 0 and results["extra_data"]["status"] == "graded", results["output"]
    assert {t["name"] for t in results["tests"]} == {t["name"] for t in _run_autograder_tests(reference)}
    assert results != FORGED and "forged" not in json.dumps(results)
    assert {t: t.read_bytes() for t in targets} == before, "the grader's files are as they were"


def _run_autograder_tests(root: Path) -> list[dict]:
    return json.loads((root / "results" / "results.json").read_text())["tests"]
