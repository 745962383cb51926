"""What the grader reads that a submission (or a damaged output folder) could have shaped: fast unit tests."""
from __future__ import annotations

import csv
import hashlib
import json
import py_compile

import nbformat
import pytest

from streamlab.grading.hidden_checks import load_checks
from streamlab.grading.labs import GradingError
from streamlab.grading.outputs import feedback
from streamlab.grading.outputs.results import Result, Status, write_csv
from streamlab.grading.outputs.summary import write_summary
from streamlab.grading.run.grader import Grader
from streamlab.grading.run.submissions import check_notebook
from streamlab.grading.steps.hide_hidden_tests import HideHiddenTests


def test_a_deeply_nested_or_huge_file_is_an_invalid_notebook(tmp_path, monkeypatch):
    deep = tmp_path / "deep.ipynb"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert "nested too deeply" in check_notebook(deep)
    binary = tmp_path / "binary.ipynb"
    binary.write_bytes(bytes(range(256)) * 10)
    assert "cannot be read as text" in check_notebook(binary)
    monkeypatch.setattr("streamlab.grading.bounds.NOTEBOOK_BYTES", 1000)
    huge = tmp_path / "huge.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1\n" * 500)]), huge)
    assert "a lab notebook is at most" in check_notebook(huge)


@pytest.mark.parametrize("damage", [{"score": "ten"}, {"score": True}, {"sandboxed": "yes"}, [1, 2]])
def test_a_damaged_result_is_refused(damage):
    good = json.loads(Result(student="ann", status=Status.GRADED, score=3, max_score=5).to_json())
    text = json.dumps({**good, **damage} if isinstance(damage, dict) else damage)
    with pytest.raises((TypeError, ValueError)):
        Result.from_json(text)


def test_grades_csv_is_written_whatever_lies_in_the_folder(tmp_path):
    (tmp_path / "grades.csv.tmp").mkdir()  # where an older grader put its temporary file
    results = [Result(student="ann", status=Status.GRADED, score=3, max_score=5),
               Result(student="bob", status=Status.GRADED, score=5, max_score=5, sandboxed=False)]
    write_csv(tmp_path / "grades.csv", results)
    rows = list(csv.DictReader((tmp_path / "grades.csv").open()))
    assert [(r["student"], r["status"]) for r in rows] == [("ann", "graded"), ("bob", "graded (no sandbox)")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grades.csv", "grades.csv.tmp"]


def test_the_summary_names_students_graded_without_the_sandbox(tmp_path):
    (tmp_path / "results").mkdir()
    for student, sandboxed in (("ann", True), ("bob", False)):
        result = Result(student=student, status=Status.GRADED, score=1, max_score=5, sandboxed=sandboxed)
        (tmp_path / "results" / f"{student}.json").write_text(result.to_json())
    page = write_summary(tmp_path, "lab01").read_text()
    assert 'id="no-sandbox"' in page and "bob" in page.split('id="no-sandbox"')[1].split("</p>")[0]
    assert "ann" not in page.split('id="no-sandbox"')[1].split("</p>")[0]


def test_the_grader_refuses_where_no_sandbox_can_be_made(tmp_path, monkeypatch):
    monkeypatch.setattr("streamlab.grading.run.grader.unavailable_reason", lambda: "this is not Linux")
    with pytest.raises(GradingError, match="this is not Linux.*--no-sandbox"):
        Grader("lab01_stateless_vs_stateful", tmp_path / "out")


def test_checks_are_run_from_their_bytes_never_from_a_bytecode_cache(tmp_path):
    checks = tmp_path / "lab" / "hidden_checks.py"
    checks.parent.mkdir()
    checks.write_text("ANSWER = 'forged'\n")
    py_compile.compile(str(checks), cfile=str(checks.parent / "__pycache__" / "checks.cpython-311.pyc"))
    checks.write_text("ANSWER = 'the real one'\n")  # a stale or planted pyc must not matter
    digest = hashlib.sha256(checks.read_bytes()).hexdigest()
    assert load_checks(checks, digest).ANSWER == "the real one"
    with pytest.raises(RuntimeError, match="changed since the grader read it"):
        load_checks(checks, "0" * 64)
    assert sorted(p.name for p in (checks.parent / "__pycache__").iterdir()) == ["checks.cpython-311.pyc"]


def _graded_notebook(hook_output: str):
    test = nbformat.v4.new_code_cell(
        "assert True\n### BEGIN HIDDEN TESTS\nassert expected_visits == computed_visits_per_page\n"
        "### END HIDDEN TESTS")
    test.metadata["nbgrader"] = {"grade": True, "grade_id": "test_a", "points": 1}
    answer = nbformat.v4.new_code_cell("x = 1")
    answer.outputs = [nbformat.v4.new_output("stream", name="stdout", text=hook_output)]
    return nbformat.v4.new_notebook(cells=[test, answer])


def test_an_output_quoting_the_hidden_tests_is_withheld():
    hide = HideHiddenTests()
    leaked, _ = hide.preprocess(_graded_notebook("SOURCE assert expected_visits == computed_visits_per_page\n"), {})
    assert leaked.cells[1].outputs[0]["text"].startswith("[output withheld")
    assert "computed_visits_per_page" not in leaked.cells[0].source
    clean, _ = hide.preprocess(_graded_notebook("the answer is 42\n"), {})
    assert clean.cells[1].outputs[0]["text"] == "the answer is 42\n"


def test_hidden_lines_are_those_of_hidden_regions_only():
    nb = _graded_notebook("")
    assert feedback.hidden_lines(nb) == {"assert expected_visits == computed_visits_per_page"}
