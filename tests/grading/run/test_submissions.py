"""Finding submissions in both layouts, and telling notebooks from junk (no kernel, no Spark)."""
from __future__ import annotations

import json

import nbformat
import pytest

from streamlab.grading import GradingError, check_notebook, find_labs, find_submissions, lab_notebooks
from streamlab.grading.run import submissions as submissions_module
from streamlab.grading.run.submissions import Submission, name_problem

LAB = find_labs()[0]


def _name() -> str:
    names = lab_notebooks(LAB)
    assert len(names) == 1, names
    return names[0]


def test_flat_folder_of_student_notebooks(tmp_path):
    for file in ("ana.lopez.ipynb", "bob.ipynb", "notes.txt"):
        (tmp_path / file).write_text("{}")
    found = find_submissions(tmp_path, LAB)
    assert [(s.student, s.files[_name()].name, s.origin.name, s.refused) for s in found] == [
        ("ana.lopez", "ana.lopez.ipynb", "ana.lopez.ipynb", None), ("bob", "bob.ipynb", "bob.ipynb", None)]


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


@pytest.mark.parametrize("raw", ["ana", "a.b@uni.edu", "x+tag", "_lice", "Z-9_z", "a" * 100])
def test_plain_names_are_ids_as_they_are(raw):
    assert name_problem(raw) is None


@pytest.mark.parametrize("raw, problem", [
    ("ana lópez", "contains 'ó' (U+00F3)"), ("", "empty"), ("a" * 101, "101 characters"),
    (".ana", "starts with '.'"), ("-rf", "starts with '-'"), ("a..b", "'..'"), ("ana\n", "'\\n' (U+000A)"),
    ("аna", "'а' (U+0430)"),   # a Cyrillic а: looks like ana, is another name
])
def test_other_names_are_refused_and_say_why(raw, problem):
    assert problem in name_problem(raw)


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
    (json.dumps({"metadata": {"name": ""}, "nbformat": 3, "nbformat_minor": 0,  # as Jupyter wrote it before 2015
                 "worksheets": [{"cells": [{"cell_type": "code", "input": "1 + 1", "language": "python",
                                            "metadata": {}, "outputs": []}], "metadata": {}}]}).encode(),
     "is a Jupyter notebook in the old format 3 (before 2015), which the grader does not read: open it in JupyterLab"),
    (json.dumps({"cells": [{"cell_type": "spreadsheet"}], "nbformat": 4, "nbformat_minor": 5,
                 "metadata": {}}).encode(), "is not a valid Jupyter notebook"),
])
def test_check_notebook_on_junk(tmp_path, content, expected):
    path = tmp_path / "junk.ipynb"
    path.write_bytes(content)
    assert expected in check_notebook(path)


def test_an_old_format_named_by_a_4000_digit_number_is_quoted_cut():
    """The format 3 reason quotes the notebook's ``nbformat``: a student's 4,001-digit one (Python reads up to 4,300)
    made a 4.2 KB reason for grades.csv and every page; it is quoted cut, as a cell's metadata is."""
    from streamlab.grading import bounds

    reason = submissions_module.check_notebook_bytes(
        ('{"worksheets": [], "nbformat": 1' + "0" * 4000 + "}").encode(), "x.ipynb")
    shown = "1" + "0" * (bounds.METADATA_SHOWN_CHARS - 1) + "..."
    assert reason.startswith(f"x.ipynb is a Jupyter notebook in the old format {shown} (before 2015)"), reason[:200]
    assert len(reason) < 400


def test_check_notebook_accepts_a_notebook(tmp_path):
    path = tmp_path / "ok.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), path)
    assert check_notebook(path) is None


def test_a_course_folder_is_read_from_its_submitted_folder(tmp_path):
    """nbgrader's course folder also holds source/<lab>/ and release/<lab>/: they are not students."""
    for folder in ("source", "release", "submitted/carla"):
        (tmp_path / folder / LAB).mkdir(parents=True)
        (tmp_path / folder / LAB / f"{_name()}.ipynb").write_text("{}")
    assert [s.student for s in find_submissions(tmp_path, LAB)] == ["carla"]


def test_a_folder_named_like_a_notebook_is_refused(tmp_path):
    (tmp_path / "ana.ipynb").mkdir()
    [found] = find_submissions(tmp_path, LAB)
    assert found.student == "ana" and found.refused.startswith("'ana.ipynb' is a folder: a folder is not a submission")
