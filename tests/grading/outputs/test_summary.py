"""The class summary (OUT/summary.html) from results built in memory (no kernel, no Spark)."""
from __future__ import annotations

import json
import re

from streamlab.grading.outputs.results import CellGrade, Result, Status, WorkerReport
from streamlab.grading.outputs.summary import cell_passed, load_results, points_withdrawn, summarise, write_summary

CELLS = [("test_a", 1.0), ("test_b", 2.0), ("test_c", 2.0)]


def _result(student: str, scores: dict | None, status: Status = Status.GRADED, checks=(), tests=None) -> Result:
    """tests: what the cells' own tests gave, where it differs from the final score (points withdrawn)."""
    tests = {**(scores or {}), **(tests or {})}
    cells = [CellGrade("lab", gid, scores.get(gid, 0.0), points, auto_score=tests.get(gid, 0.0))
             for gid, points in CELLS] if scores is not None else []
    total = sum(c.score for c in cells) if cells else 0.0
    report = WorkerReport(status, total, 5.0, cells=cells, checks=list(checks))
    return Result(student=student, status=status, score=total, max_score=5.0, report=report)


def class_results() -> list[Result]:
    withdrawn = {"name": "check_b", "cells": ["test_b"], "passed": False, "detail": "no commits"}
    return [
        _result("ana", {"test_a": 1, "test_b": 2, "test_c": 2}),
        _result("ben", {"test_a": 1, "test_b": 2}),
        # nbgrader gave test_b its points, the hidden check withdrew them (score 0 in the gradebook)
        _result("cem", {"test_a": 1, "test_b": 0}, checks=[withdrawn], tests={"test_b": 2}),
        _result("dan", {"test_a": 1, "test_b": 1}),  # partial credit is not a pass
        _result("eve", {"test_a": 1, "test_c": 2}, status=Status.TIMED_OUT),  # a cell interrupted, others count
        _result("fay", None, status=Status.CRASHED),
        _result("gus", None, status=Status.INVALID),
        # blank: the tests gave test_b nothing and its check failed too; no points were withdrawn
        _result("hal", {}, checks=[withdrawn]),
    ]


def test_numbers():
    summary = summarise("lab01_x", class_results())
    assert summary.students == 8
    assert summary.scores == [5, 3, 1, 2, 3, 0, 0, 0]
    assert summary.mean == 1.75 and summary.median == 1.5
    assert summary.max_score == 5
    assert summary.statuses == {"graded": 5, "timed out": 1, "crashed": 1, "invalid notebook": 1, "limit exceeded": 0,
                                 "grader error": 0}
    by_id = {c.grade_id: c for c in summary.cells}
    assert [c.grade_id for c in summary.cells] == ["test_a", "test_b", "test_c"]
    assert (by_id["test_a"].passed, by_id["test_b"].passed, by_id["test_c"].passed) == (5, 2, 2)
    assert by_id["test_b"].withdrawn == 1 and by_id["test_a"].withdrawn == 0  # cem's, not blank hal's
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
    assert '<span id="students">8</span>' in text
    assert '<span id="mean">1.75</span>' in text and '<span id="median">1.50</span>' in text
    assert "<svg" in text and "</svg>" in text, "the score distribution is drawn inline"
    assert "<?xml" not in text and "<!DOCTYPE svg" not in text
    links = re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)""", text)
    assert not [link for link in links if re.match(r"(https?:)?//", link)], links
    assert not re.search(r"<(script|link)\b", text), "no external scripts or style sheets"
    assert "broken.json" in text, "a results file it could not read is named"
    for status in ("graded", "timed out", "crashed", "invalid notebook", "grader error"):
        assert f"<td>{status}</td>" in text
    assert "test_b" in text and "2 / 8" in text
    assert "points withdrawn by the grader's checks" in text


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


def test_points_withdrawn_needs_passing_tests_and_a_failed_check():
    failed = [{"name": "c", "cells": ["test_b"], "passed": False, "detail": ""}]
    faked = _result("x", {"test_b": 0}, checks=failed, tests={"test_b": 2})
    blank = _result("y", {}, checks=failed)
    confirmed = _result("z", {"test_b": 2}, checks=[{**failed[0], "passed": True}])
    assert points_withdrawn(faked, "test_b") and not points_withdrawn(faked, "test_a")
    assert not points_withdrawn(blank, "test_b") and not points_withdrawn(confirmed, "test_b")
    stored = json.loads(faked.to_json())
    for cell in stored["report"]["cells"]:
        del cell["auto_score"]  # a result written before nbgrader's own score was kept
    older = Result.from_json(json.dumps(stored))
    assert older.cells[1].auto_score is None and points_withdrawn(older, "test_b"), "no auto_score: as before"
