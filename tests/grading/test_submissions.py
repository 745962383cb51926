"""Finding submissions in both layouts, and telling notebooks from junk (no kernel, no Spark)."""
from __future__ import annotations

import json

import nbformat
import pytest

from streamlab.grading import GradingError, check_notebook, find_labs, find_submissions, lab_notebooks
from streamlab.grading import submissions as submissions_module
from streamlab.grading.submissions import Submission, student_id

LAB = find_labs()[0]


def _name() -> str:
    names = lab_notebooks(LAB)
    assert len(names) == 1, names
    return names[0]


def test_flat_folder_of_student_notebooks(tmp_path):
    for file in ("Ana Lopez.ipynb", "bob.ipynb", "notes.txt"):
        (tmp_path / file).write_text("{}")
    found = find_submissions(tmp_path, LAB)
    assert [(s.student, s.files[_name()].name, s.origin.name) for s in found] == [
        ("Ana_Lopez", "Ana Lopez.ipynb", "Ana Lopez.ipynb"), ("bob", "bob.ipynb", "bob.ipynb")]


def test_nbgrader_layout_in_a_course_folder(tmp_path):
    name = _name()
    submitted = tmp_path / "submitted"
    (submitted / "carla" / LAB).mkdir(parents=True)
    (submitted / "carla" / LAB / f"{name}.ipynb").write_text("{}")
    (submitted / "carla" / LAB / "timestamp.txt").write_text("2026-01-01 10:00:00")
    (submitted / "dan" / LAB).mkdir(parents=True)
    (submitted / "dan" / LAB / "my copy.ipynb").write_text("{}")  # renamed: still graded
    (submitted / "eve" / LAB).mkdir(parents=True)                 # nothing handed in
    (submitted / "fay" / "another_lab").mkdir(parents=True)       # not this lab
    for folder in (tmp_path, submitted):  # the course folder or its submitted/ folder
        found = {s.student: s for s in find_submissions(folder, LAB)}
        assert sorted(found) == ["carla", "dan", "eve"]
        assert [p.name for p in found["carla"].extra] == ["timestamp.txt"]
        assert found["carla"].origin == submitted / "carla" / LAB
        assert found["dan"].files[name].name == "my copy.ipynb"
        assert check_notebook(found["eve"].files[name]).endswith("is missing")


def test_flat_layout_needs_a_single_notebook_lab(tmp_path, monkeypatch):
    (tmp_path / "ana.ipynb").write_text("{}")
    monkeypatch.setattr(submissions_module, "lab_notebooks", lambda lab: ["part1", "part2"])
    with pytest.raises(GradingError, match="has 2 notebooks"):
        find_submissions(tmp_path, LAB)


def test_not_a_folder(tmp_path):
    with pytest.raises(GradingError, match="is not a folder"):
        find_submissions(tmp_path / "missing", LAB)
    assert find_submissions(tmp_path, LAB) == []


def test_student_ids_are_safe_and_unique():
    taken: set[str] = set()
    ids = [student_id(raw, taken) for raw in ("ana lópez", "ana_l_pez", "a.b@uni.edu", "...", "?")]
    assert ids == ["ana_l_pez", "ana_l_pez-2", "a.b@uni.edu", "student", "student-2"]


def test_submission_hash_follows_content(tmp_path):
    path = tmp_path / "a.ipynb"
    path.write_text("{}")
    submission = Submission("a", {"lab": path}, path)
    before = submission.sha256()
    assert Submission("b", {"lab": path}, path).sha256() == before
    path.write_text("{ }")
    assert submission.sha256() != before
    assert Submission("a", {"lab": tmp_path / "gone.ipynb"}, path).sha256() != before


@pytest.mark.parametrize("content, expected", [
    (b"{ this is not JSON, just a broken download\n", "is not JSON"),
    (b"\xff\xfe\x00binary", "cannot be read as text (UnicodeDecodeError)"),
    (json.dumps({"student": "i", "answer": 42}).encode(), "is JSON but not a Jupyter notebook"),
    (json.dumps([1, 2]).encode(), "is JSON but not a Jupyter notebook"),
    (json.dumps({"cells": [{"cell_type": "spreadsheet"}], "nbformat": 4, "nbformat_minor": 5,
                 "metadata": {}}).encode(), "is not a valid Jupyter notebook"),
])
def test_check_notebook_on_junk(tmp_path, content, expected):
    path = tmp_path / "junk.ipynb"
    path.write_bytes(content)
    assert expected in check_notebook(path)


def test_check_notebook_accepts_a_notebook(tmp_path):
    path = tmp_path / "ok.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), path)
    assert check_notebook(path) is None
