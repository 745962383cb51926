"""The curriculum table (the instructor's guide, "What each lab grades"): each of the articles' 18 ideas is
taught in a lesson and graded by test cells that exist, carry points, and are confirmed by a hidden check outside
the student's kernel (a lab has no hidden tests: the grade's facts are all in its hidden_checks.py)."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

from streamlab import grading
from streamlab.grading.hidden_checks import checks_of, load_checks

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| (\d+) \| ([^|]+) \| ([\w, ]+) \| ([^|]+) \|$")


def _rows() -> dict[int, tuple[str, list[str], dict[str, list[str]]]]:
    rows = {}
    for line in (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if not match:
            continue
        number, idea, lessons, graded = match.groups()
        cells: dict[str, list[str]] = {}
        for part in graded.split(";"):
            lab, _, names = part.strip().partition(" ")
            cells.setdefault(lab, []).extend(re.findall(r"`(\w+)`", names))
        rows[int(number)] = (idea.strip(), [n.strip() for n in lessons.split(",")], cells)
    return rows


def _graded_cells(lab: str) -> dict[str, float]:
    (name,) = grading.lab_notebooks(lab)
    nb = nbformat.read(ROOT / "solutions" / lab / f"{name}.ipynb", as_version=4)
    graded = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    hidden = [c.metadata.nbgrader.grade_id for c in graded if "HIDDEN TESTS" in c.source]
    assert not hidden, (f"{lab}: {hidden} hold hidden tests, which would run in the student's kernel: "
                        f"check those facts in hidden_checks.py")
    return {c.metadata.nbgrader.grade_id: c.metadata.nbgrader.get("points", 0) for c in graded}


def test_every_idea_of_the_articles_is_in_the_table():
    assert sorted(_rows()) == list(range(1, 19))


def test_every_idea_is_taught_in_a_lesson_that_exists():
    lessons = {p.stem.split("_")[0] for p in (ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb")}
    for number, (idea, taught_in, _) in _rows().items():
        assert set(taught_in) <= lessons, f"idea {number} ({idea}) names a lesson that does not exist: {taught_in}"


def test_every_idea_is_graded_by_test_cells_a_hidden_check_confirms():
    labs = {lab[:5]: lab for lab in grading.find_labs()}
    for number, (idea, _, cells) in _rows().items():
        assert cells, f"idea {number} ({idea}) is graded nowhere"
        for short, names in cells.items():
            assert short in labs, f"idea {number}: no lab {short}"
            lab = labs[short]
            graded = _graded_cells(lab)
            confirmed = {cell for check in checks_of(load_checks(ROOT / "solutions" / lab / "hidden_checks.py"))
                         for cell in check.cells}
            for name in names:
                assert graded.get(name, 0) > 0, f"idea {number} ({idea}): {lab} has no graded cell {name} with points"
                assert name in confirmed, f"idea {number} ({idea}): no hidden check of {lab} confirms {name}"
