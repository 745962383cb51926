"""Who a submission is, and what counts as one: the attacks that beat the grader, each refused (no kernel).

A student's id is the exact name of their file or folder, never a cleaned-up one; a name that is not plain
is refused, not renamed; only regular files are read, never through a link, never a FIFO, never past the
size limit; a notebook whose nbgrader cells differ from the lab's is an invalid notebook.
"""
from __future__ import annotations

import builtins
import copy
import os
import resource
import threading
import uuid
from pathlib import Path

import nbformat
import pytest

from streamlab.grading import bounds
from streamlab.grading.labs import GradingError, find_labs, lab_notebooks, released_notebook, solutions_dir
from streamlab.grading.outputs.exports import canvas
from streamlab.grading.outputs.results import Result, Status
from streamlab.grading.outputs.roster import match, parse_roster
from streamlab.grading.run.submissions import GRADE_CELLS_FIX, check_notebook, find_submissions, name_problem

LAB = find_labs()[0]
NAME = lab_notebooks(LAB)[0]


def _by_origin(folder: Path) -> dict[str, object]:
    return {s.origin.name: s for s in find_submissions(folder, LAB)}


# ----------------------------------------------------------------------------- ids are exact names

def test_a_look_alike_file_cannot_take_a_students_id_or_grade(tmp_path):
    """The attack: ``zz victim.ipynb`` became ``zz_victim`` and pushed the real one to ``zz_victim-2``, so the
    roster gave the victim the attacker's 0. Now each keeps its exact name as its id (a space is a plain
    character: learning platforms' downloads have them), so the victim keeps the id and the grade, and the
    attacker's file is not in the roster."""
    (tmp_path / "zz victim.ipynb").write_text("{}")
    (tmp_path / "zz_victim.ipynb").write_text("{}")
    found = _by_origin(tmp_path)
    victim, attacker = found["zz_victim.ipynb"], found["zz victim.ipynb"]
    assert victim.student == "zz_victim" and victim.refused is None
    assert attacker.student == "zz victim" and attacker.refused is None

    results = [Result(student=victim.student, status=Status.GRADED, score=10, max_score=10, file=str(victim.origin)),
               Result(student=attacker.student, status=Status.GRADED, score=0, max_score=10,
                      file=str(attacker.origin))]
    matched = match(parse_roster("file,id,name,email,section\nzz_victim.ipynb,S1,Vic Tim,v@x.edu,A\n"),
                    [(r.student, r.file) for r in results])
    assert matched.found["zz_victim"].id == "S1" and matched.unknown == [attacker.student]
    with pytest.raises(GradingError, match="not in the roster"):
        canvas(results, matched, "Lab 1", 10)
    assert canvas(results, matched, "Lab 1", 10, allow_unlisted=True)[2] == ["Vic Tim", "", "S1", "v@x.edu", "A", "10"]


def test_names_a_cleanup_would_merge_stay_apart(tmp_path):
    for name in ("_lice", "lice", "Lice", "lice.", "a.b"):
        (tmp_path / f"{name}.ipynb").write_text("{}")
    found = _by_origin(tmp_path)
    assert sorted(s.student for s in found.values()) == ["Lice", "_lice", "a.b", "lice", "lice."]
    assert all(s.refused is None for s in found.values())


@pytest.mark.parametrize("name", ["a" * 249, "ana\nbob", "a..b", "аna", "-rf", ".hidden", "ana\u200b", "Ünal",
                                  " ana", "ana ", "an  a"])
def test_odd_names_are_refused_never_renamed(tmp_path, name):
    """A 249-character name was a grader error (exit 1); a newline, '..', a Cyrillic look-alike, a leading '-'
    or '.', an invisible character: each is a refused submission, with the raw name in the reason."""
    try:
        (tmp_path / f"{name}.ipynb").write_text("{}")
    except OSError:  # a file system that cannot hold the name: then no student can hand it in either
        pytest.skip(f"this file system does not take {name!r}")
    (tmp_path / "ana.ipynb").write_text("{}")
    found = _by_origin(tmp_path)
    odd = found[f"{name}.ipynb"]
    assert odd.student.startswith("invalid~") and name_problem(odd.student) is not None
    assert repr(name) in odd.refused and "rename it" in odd.refused
    assert found["ana.ipynb"].student == "ana" and found["ana.ipynb"].refused is None


def test_student_folders_are_ids_as_they_are(tmp_path):
    for student in ("carla", "carla_", "Carla Diaz"):
        (tmp_path / student / LAB).mkdir(parents=True)
        (tmp_path / student / LAB / f"{NAME}.ipynb").write_text("{}")
    found = {s.origin.parent.name: s for s in find_submissions(tmp_path, LAB)}
    assert found["carla"].student == "carla" and found["carla_"].student == "carla_"
    assert found["Carla Diaz"].student == "Carla Diaz" and found["Carla Diaz"].refused is None


# ----------------------------------------------------------------------------- only regular files, never followed

class _Opened:
    """Every path opened while it is active (os.open and open), to show a file was never opened."""

    def __init__(self, monkeypatch):
        self.paths: list[str] = []
        real_os_open, real_open = os.open, builtins.open

        def os_open(path, *args, **kwargs):
            self.paths.append(os.fspath(path))
            return real_os_open(path, *args, **kwargs)

        def open_(file, *args, **kwargs):
            if isinstance(file, (str, bytes, os.PathLike)):
                self.paths.append(os.fsdecode(file))
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(os, "open", os_open)
        monkeypatch.setattr(builtins, "open", open_)

    def touched(self, *paths: Path) -> bool:
        names = {str(p) for p in paths} | {str(p.resolve()) for p in paths}
        return any(p in names for p in self.paths)


def test_a_link_to_the_solution_is_refused_without_being_read(tmp_path, monkeypatch):
    """The attack: a submission that was a symbolic link to the lab's solution scored 10/10."""
    solution = solutions_dir() / LAB / f"{NAME}.ipynb"
    (tmp_path / "mallory.ipynb").symlink_to(solution)
    (tmp_path / "linked_dir.ipynb").symlink_to(tmp_path, target_is_directory=True)
    opened = _Opened(monkeypatch)
    found = _by_origin(tmp_path)
    for origin in ("mallory.ipynb", "linked_dir.ipynb"):
        submission = found[origin]
        assert submission.student == origin.removesuffix(".ipynb")  # the name is plain: the id is kept
        assert "is a symbolic link: a symbolic link is not a submission" in submission.refused
        submission.sha256()
        assert "symbolic link" in check_notebook(submission.files[NAME])
    assert not opened.touched(solution, tmp_path / "mallory.ipynb")


def test_links_in_nbgrader_folders_are_refused(tmp_path, monkeypatch):
    """A link as the student's folder, the lab folder, the notebook or timestamp.txt: never followed."""
    elsewhere = tmp_path / "elsewhere" / LAB
    elsewhere.mkdir(parents=True)
    (elsewhere / f"{NAME}.ipynb").write_text("{}")
    subs = tmp_path / "subs"
    (subs / "honest" / LAB).mkdir(parents=True)
    (subs / "honest" / LAB / f"{NAME}.ipynb").write_text("{}")
    (subs / "student_link").symlink_to(elsewhere.parent, target_is_directory=True)
    (subs / "lab_link").mkdir()
    (subs / "lab_link" / LAB).symlink_to(elsewhere, target_is_directory=True)
    (subs / "notebook_link" / LAB).mkdir(parents=True)
    (subs / "notebook_link" / LAB / f"{NAME}.ipynb").symlink_to(elsewhere / f"{NAME}.ipynb")
    (subs / "stamp_link" / LAB).mkdir(parents=True)
    (subs / "stamp_link" / LAB / f"{NAME}.ipynb").write_text("{}")
    (subs / "stamp_link" / LAB / "timestamp.txt").symlink_to("/etc/hostname")
    opened = _Opened(monkeypatch)
    found = {s.student: s for s in find_submissions(subs, LAB)}
    assert sorted(found) == ["honest", "lab_link", "notebook_link", "stamp_link", "student_link"]
    assert found["honest"].refused is None
    for student, shown in (("student_link", "'student_link'"), ("lab_link", f"'lab_link/{LAB}'"),
                           ("notebook_link", f"'notebook_link/{LAB}/{NAME}.ipynb'"),
                           ("stamp_link", f"'stamp_link/{LAB}/timestamp.txt'")):
        assert f"{shown} is a symbolic link" in found[student].refused, found[student].refused
        assert found[student].extra == []
        found[student].sha256()
    assert not opened.touched(elsewhere / f"{NAME}.ipynb", Path("/etc/hostname"))


def _finishes(function, seconds: float = 20.0):
    """``function()``'s value, or a failure if it is still blocked after ``seconds`` (opening a FIFO blocks)."""
    outcome = {}
    worker = threading.Thread(target=lambda: outcome.setdefault("value", function()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{function} blocked"
    return outcome["value"]


def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.ipynb")
    (tmp_path / "nested" / "eve" / LAB).mkdir(parents=True)
    os.mkfifo(tmp_path / "nested" / "eve" / LAB / f"{NAME}.ipynb")
    for folder, origin in ((tmp_path, "pipe.ipynb"), (tmp_path / "nested", LAB)):
        submission = _finishes(lambda folder=folder, origin=origin: _by_origin(folder)[origin])
        assert "a FIFO (named pipe) is not a submission" in submission.refused
        _finishes(submission.sha256)
        assert "FIFO" in _finishes(lambda submission=submission: check_notebook(submission.files[NAME]))


def test_a_huge_sparse_file_is_refused_by_its_size_before_it_is_opened(tmp_path, monkeypatch):
    """The attack: a 3 GB sparse file took the grader to 6.4 GB of memory before the 64 MB limit refused it."""
    huge = tmp_path / "ana.ipynb"
    huge.touch()
    os.truncate(huge, 3 * 2**30)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux
    opened = _Opened(monkeypatch)
    submission = _by_origin(tmp_path)["ana.ipynb"]
    assert submission.refused is None  # a regular file with a plain name: the size is check_notebook's to refuse
    limit_mb = bounds.NOTEBOOK_BYTES // 2**20
    assert check_notebook(huge) == f"ana.ipynb is 3072 MB; a lab notebook is at most {limit_mb} MB"
    first = submission.sha256()
    assert not opened.touched(huge)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before < 200 * 1024
    os.truncate(huge, 3 * 2**30 + 1)   # the hash still sees a change of the file
    assert submission.sha256() != first


def test_the_limit_is_read_from_bounds(tmp_path, monkeypatch):
    small = tmp_path / "ana.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1\n" * 500)]), small)
    assert check_notebook(small) is None
    monkeypatch.setattr(bounds, "NOTEBOOK_BYTES", 1000)
    assert "a lab notebook is at most 1000 bytes" in check_notebook(small)


# ----------------------------------------------------------------------------- the lab's nbgrader cells

def _cells_by_id(notebook) -> dict:
    return {c.metadata["nbgrader"]["grade_id"]: c for c in notebook.cells if "nbgrader" in c.metadata}


def _first(notebook, role: str):
    key = {"test": "grade", "answer": "solution", "locked": "locked"}[role]
    return next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get(key)
                and (role != "locked" or not c.metadata["nbgrader"].get("grade")))


def _write(notebook, path: Path) -> Path:
    nbformat.write(notebook, path)
    return path


def test_the_released_lab_matches_its_source(tmp_path):
    path = _write(released_notebook(LAB), tmp_path / "ana.ipynb")
    assert check_notebook(path, lab=LAB) is None and check_notebook(path, lab=LAB, name=NAME) is None


def test_a_test_cell_turned_into_an_answer_cell_is_an_invalid_notebook(tmp_path):
    """The attack: a student set ``solution: true`` on a locked test cell (a grader error, graded again every run)."""
    notebook = released_notebook(LAB)
    test = _first(notebook, "test")
    test.metadata["nbgrader"]["solution"] = True
    problem = check_notebook(_write(notebook, tmp_path / "ana.ipynb"), lab=LAB)
    grade_id = test.metadata["nbgrader"]["grade_id"]
    assert problem == (f"ana.ipynb: its nbgrader cells differ from the lab's: the lab's test cell {grade_id!r} has "
                       f"solution: true (the lab's: false). {GRADE_CELLS_FIX}")
    assert check_notebook(tmp_path / "ana.ipynb") is None   # without the lab: a notebook like any other


def _copy(cell):
    """A copy of ``cell`` as a notebook editor pastes it: the same metadata, a cell id of its own."""
    copied = copy.deepcopy(cell)
    copied["id"] = uuid.uuid4().hex[:8]
    return copied


def _copy_test_cell(notebook):
    notebook.cells.append(_copy(_first(notebook, "test")))


def _unknown_graded_cell(notebook):
    cell = nbformat.v4.new_code_cell("assert True")
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "free_points", "points": 100, "solution": False,
                                 "locked": False}
    notebook.cells.append(cell)


def _unknown_graded_cell_named(grade_id):
    def tamper(notebook):
        _unknown_graded_cell(notebook)
        notebook.cells[-1].metadata["nbgrader"]["grade_id"] = grade_id
    tamper.__name__ = f"_unknown_graded_cell_named_{len(grade_id)}_chars"
    return tamper


def _delete_test_cell(notebook):
    notebook.cells.remove(_first(notebook, "test"))


def _raise_points(notebook):
    _first(notebook, "test").metadata["nbgrader"]["points"] = 100


def _unlock(notebook):
    _first(notebook, "locked").metadata["nbgrader"]["locked"] = False


def _to_markdown(cell):
    """What JupyterLab's "m" does to a code cell (a keystroke in command mode)."""
    cell.cell_type = "markdown"
    del cell["outputs"], cell["execution_count"]


def _graded_without_id(notebook):
    cell = nbformat.v4.new_code_cell("1")
    cell.metadata["nbgrader"] = {"grade": True, "points": 5}
    notebook.cells.append(cell)


def _metadata_not_an_object(notebook):
    _first(notebook, "answer").metadata["nbgrader"] = "solution"


def _test_meta(key, value):
    def tamper(notebook):
        _first(notebook, "test").metadata["nbgrader"][key] = value
    tamper.__name__ = f"_test_cell_{key}_{value!r:.12}"
    return tamper


def _no_points(notebook):
    del _first(notebook, "test").metadata["nbgrader"]["points"]


def _answer_id_not_text(notebook):
    _first(notebook, "answer").metadata["nbgrader"]["grade_id"] = {"x": [1]}


@pytest.mark.parametrize("tamper, says", [
    (_copy_test_cell, "appears more than once"),
    # values of a type nbgrader's schema does not allow: each one was a grader error (nbgrader's autograde failed:
    # "Inconsistent checksums", float("abc"), KeyError 'points'; the grader's own check raised TypeError on a
    # grade id it could not look up), graded again by every run and never scored
    (_test_meta("grade", "yes"), 'has grade: "yes" (the lab\'s: true)'),
    (_test_meta("grade_id", [1]), "with a grade id that is not text ([1])"),
    (_answer_id_not_text, 'with a grade id that is not text ({"x": [1]})'),
    (_test_meta("points", "abc"), 'its points are "abc", not a number'),
    (_test_meta("points", "x" * 500), '"' + "x" * (bounds.METADATA_SHOWN_CHARS - 1) + '...'),
    (_no_points, "it has no points"),
    # what nbgrader's own check refuses, named before the run instead of "nbgrader rejected the metadata" after it
    (_test_meta("schema_version", 99), "nbgrader refuses its metadata (Schema version is too new: 99"),
    (_test_meta("schema_version", "3"), "nbgrader refuses its metadata ("),
    (_test_meta("mine", 1), "nbgrader refuses its metadata (Additional properties are not allowed"),
    # jsonschema's own words name the value, not the key ("[[[[...": which one?): the key and what the schema wants
    (_test_meta("cell_type", [[["x" * 100]]]),
     'nbgrader refuses its metadata (its cell_type is [[["' + "x" * (bounds.METADATA_SHOWN_CHARS - 4) + '...; '
     'nbgrader\'s schema wants type "string")'),
    (_unknown_graded_cell, "the grade id 'free_points', which the lab does not have"),
    (_unknown_graded_cell_named("y" * 10_000), "the grade id '" + "y" * (bounds.METADATA_SHOWN_CHARS - 1) + "...,"),
    (_delete_test_cell, "is missing"),
    (_unlock, "has locked: false (the lab's: true)"),
    (_graded_without_id, "is marked grade with no grade id"),
    (_metadata_not_an_object, "nbgrader metadata is not an object"),
])
def test_tampered_grade_cells_are_refused_with_the_reason(tmp_path, tamper, says):
    notebook = released_notebook(LAB)
    tamper(notebook)
    problem = check_notebook(_write(notebook, tmp_path / "ana.ipynb"), lab=LAB)
    assert problem and "its nbgrader cells differ from the lab's" in problem and says in problem, problem


def test_what_nbgrader_itself_tolerates_is_not_refused(tmp_path):
    """A copied answer cell (the grader keeps the last copy's metadata, as nbgrader means to), a new cell of the
    student's own, an answer cell deleted (its tests fail), a cell claiming no flag whatever its metadata (the
    grader takes it off), a test cell's points (a number, or text nbgrader reads as one), checksum or source
    changed, a cell's type changed (nbgrader grades with the lab's): all still notebooks of the lab, graded by the
    lab's tests. The hostile-data run grades one such notebook (``worker1``)."""
    notebook = released_notebook(LAB)
    _raise_points(notebook)
    _first(notebook, "test").source = "print('all tests pass')"
    answer = _first(notebook, "answer")
    notebook.cells.append(_copy(answer))
    notebook.cells.append(nbformat.v4.new_code_cell("print('my own cell')"))
    stray = nbformat.v4.new_markdown_cell("notes")
    stray.metadata["nbgrader"] = {"grade_id": "cell-1234", "grade": False, "solution": False, "locked": False}
    notebook.cells.append(stray)
    assert check_notebook(_write(notebook, tmp_path / "ana.ipynb"), lab=LAB) is None
    notebook = released_notebook(LAB)
    notebook.cells.remove(_first(notebook, "answer"))
    assert check_notebook(_write(notebook, tmp_path / "bob.ipynb"), lab=LAB) is None
    notebook = released_notebook(LAB)   # values nbgrader puts right, or takes off (DropUngradedMetadata)
    test = _first(notebook, "test").metadata["nbgrader"]
    test.update(points="100" if float(test["points"]) != 100 else "99", checksum="x")
    for meta in ({"grade_id": [1]}, {}, {"grade": 0, "grade_id": "cell-9"}):
        notebook.cells.append(nbformat.v4.new_code_cell("1", metadata={"nbgrader": meta}))
    assert check_notebook(_write(notebook, tmp_path / "cy.ipynb"), lab=LAB) is None
    notebook = released_notebook(LAB)   # a test and an answer cell made markdown: nbgrader makes them code again
    _to_markdown(_first(notebook, "test"))
    _to_markdown(_first(notebook, "answer"))
    assert check_notebook(_write(notebook, tmp_path / "di.ipynb"), lab=LAB) is None
