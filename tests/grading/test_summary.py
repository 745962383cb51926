"""The class summary (OUT/summary.html) from results built in memory (no kernel, no Spark)."""
from __future__ import annotations

import re

from streamlab.grading.results import CellGrade, Result, Status
from streamlab.grading.summary import cell_passed, load_results, summarise, write_summary

CELLS = [("test_a", 1.0), ("test_b", 2.0), ("test_c", 2.0)]


def _result(student: str, scores: dict | None, status: Status = Status.GRADED, checks=()) -> Result:
    cells = [CellGrade("lab", gid, scores.get(gid, 0.0), points) for gid, points in CELLS] if scores is not None else []
    total = sum(c.score for c in cells) if cells else 0.0
    return Result(student=student, status=status, score=total, max_score=5.0, cells=cells, checks=list(checks))


def class_results() -> list[Result]:
    withdrawn = {"name": "check_b", "cells": ["test_b"], "passed": False, "detail": "no commits"}
    return [
        _result("ana", {"test_a": 1, "test_b": 2, "test_c": 2}),
        _result("ben", {"test_a": 1, "test_b": 2}),
        # nbgrader gave test_b its points, the hidden check withdrew them (score 0 in the gradebook)
        _result("cem", {"test_a": 1, "test_b": 0}, checks=[withdrawn]),
        _result("dan", {"test_a": 1, "test_b": 1}),  # partial credit is not a pass
        _result("eve", {"test_a": 1, "test_c": 2}, status=Status.TIMED_OUT),  # a cell interrupted, others count
        _result("fay", None, status=Status.CRASHED),
        _result("gus", None, status=Status.INVALID),
    ]


def test_numbers():
    summary = summarise("lab01_x", class_results())
    assert summary.students == 7
    assert summary.scores == [5, 3, 1, 2, 3, 0, 0]
    assert summary.mean == 2.0 and summary.median == 2
    assert summary.max_score == 5
    assert summary.statuses == {"graded": 4, "timed out": 1, "crashed": 1, "invalid notebook": 1, "grader error": 0}
    by_id = {c.grade_id: c for c in summary.cells}
    assert [c.grade_id for c in summary.cells] == ["test_a", "test_b", "test_c"]
    assert (by_id["test_a"].passed, by_id["test_b"].passed, by_id["test_c"].passed) == (5, 2, 2)
    assert by_id["test_b"].unconfirmed == 1 and by_id["test_a"].unconfirmed == 0
    # every point in the scores is a passed cell's (no partial credit left here but dan's)
    earned = sum(c.points * c.passed for c in summary.cells)
    assert earned == sum(summary.scores) - 1  # dan's 1 of test_b's 2 points


def test_a_withdrawn_cell_does_not_pass_even_if_its_score_says_so():
    result = _result("x", {"test_a": 1, "test_b": 2, "test_c": 2},
                     checks=[{"name": "c", "cells": ["test_c"], "passed": False, "detail": ""}])
    assert cell_passed(result, "test_a") and cell_passed(result, "test_b")
    assert not cell_passed(result, "test_c")
    assert not cell_passed(result, "test_missing")


def test_page_is_standalone_and_has_the_plot(tmp_path):
    (tmp_path / "results").mkdir()
    for result in class_results():
        (tmp_path / "results" / f"{result.student}.json").write_text(result.to_json())
    (tmp_path / "results" / "broken.json").write_text("{ not json")
    page = write_summary(tmp_path, "lab01_x")
    assert page == tmp_path / "summary.html"
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert '<span id="students">7</span>' in text
    assert '<span id="mean">2.00</span>' in text and '<span id="median">2</span>' in text
    assert "<svg" in text and "</svg>" in text, "the score distribution is drawn inline"
    assert "<?xml" not in text and "<!DOCTYPE svg" not in text
    links = re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)""", text)
    assert not [link for link in links if re.match(r"(https?:)?//", link)], links
    assert not re.search(r"<(script|link)\b", text), "no external scripts or style sheets"
    assert "broken.json" in text, "a results file it could not read is named"
    for status in ("graded", "timed out", "crashed", "invalid notebook", "grader error"):
        assert f"<td>{status}</td>" in text
    assert "test_b" in text and "2 / 7" in text


def test_only_the_students_asked_for(tmp_path):
    (tmp_path / "results").mkdir()
    for result in class_results():
        (tmp_path / "results" / f"{result.student}.json").write_text(result.to_json())
    results, unreadable = load_results(tmp_path / "results", ["ana", "fay"])
    assert sorted(r.student for r in results) == ["ana", "fay"] and unreadable == []
    text = write_summary(tmp_path, "lab01_x", ["ana", "fay"]).read_text()
    assert '<span id="students">2</span>' in text


def test_an_empty_class(tmp_path):
    text = write_summary(tmp_path, "lab01_x", []).read_text()
    assert '<span id="students">0</span>' in text and "No students yet" in text
