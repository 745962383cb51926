"""Statuses, the worker's report, a student's result and grades.csv (no kernel, no Spark)."""
from __future__ import annotations

import csv
import json

import pytest

from streamlab.grading.outputs.results import (
    CellGrade,
    CheckResult,
    Result,
    Status,
    WorkerReport,
    format_points,
    spreadsheet_safe,
    write_csv,
)
from streamlab.grading.outputs.roster import match, parse_roster

CSV_STRINGS = {"graded", "timed out", "crashed", "invalid notebook", "limit exceeded", "grader error"}


def test_statuses_are_the_strings_grades_csv_shows():
    assert {s.value for s in Status} == CSV_STRINGS
    for status in Status:
        assert Status(status.value) is status
        assert str(status) == f"{status}" == status.value == status
        assert json.loads(json.dumps(status)) == status.value
    assert [s for s in Status if not s.is_final] == [Status.ERROR]
    with pytest.raises(ValueError):
        Status("passed")


def test_no_result_report_has_no_score():
    report = WorkerReport.no_result(Status.CRASHED, "the notebook's kernel died while it ran",
                                    autograde_seconds=12.5)
    assert (report.status, report.score, report.max_score, report.cells) == (Status.CRASHED, None, None, [])
    assert report.autograde_seconds == 12.5 and not report.scored
    assert WorkerReport.no_result("timed out", "x").status is Status.TIMED_OUT


def test_report_round_trips_through_json():
    report = WorkerReport(status=Status.TIMED_OUT, score=2.5, max_score=6.0, detail="stopped in: q3",
                          autograde_seconds=80.0, startup_seconds=20.1, work_seconds=55.0,
                          cells=[CellGrade("lab", "q1", 1.0, 1.0), CellGrade("lab", "q3", 0.0, 2.0)])
    again = WorkerReport.from_json(report.to_json())
    assert again == report and again.scored
    assert isinstance(again.status, Status) and isinstance(again.cells[0], CellGrade)
    assert json.loads(report.to_json())["status"] == "timed out"
    for status in Status:
        assert WorkerReport.from_json(WorkerReport.no_result(status, "why").to_json()).status is status


def test_a_check_result_is_one_type_from_the_checks_process_to_the_result_file():
    """The checks' process sends CheckResults as JSON; the worker's report and the student's result file carry
    the same type back, kept to its shape: a hostile trace loses what is not its own."""
    sent = {"name": "counts", "cells": ["q1", 2], "passed": 0, "detail": "x" * 1000,
            "traces": [{"title": "t", "rows": [{"batch": "0", "yours": 3, "example": "<b>"}], "diverged_at": 1},
                       "not a trace"]}
    check = CheckResult.from_dict(sent)
    assert (check.cells, check.passed, len(check.detail)) == (["q1", "2"], False, 300)
    assert check.traces == [{"title": "t", "rows": [{"batch": None, "yours": 3, "reference": None, "differ": None,
                                                     "example": "<b>"}], "diverged_at": 1}]
    report = WorkerReport(status=Status.GRADED, score=1.0, max_score=2.0, checks=[check])
    again = WorkerReport.from_json(report.to_json())
    assert again.checks == [check] and isinstance(again.checks[0], CheckResult)
    result = _result()
    result.take(again)
    assert Result.from_json(result.to_json()).checks == [check]
    with pytest.raises((KeyError, TypeError)):
        WorkerReport.from_json(json.dumps({"status": "graded", "checks": [{"passed": True}]}))


def test_only_graded_or_timed_out_reports_with_a_score_count():
    assert not WorkerReport(status=Status.ERROR, score=3.0, max_score=6.0).scored
    assert not WorkerReport(status=Status.GRADED).scored
    assert WorkerReport(status=Status.GRADED, score=0.0, max_score=6.0).scored


def _result(**changes) -> Result:
    return Result(**{"student": "ana", "status": Status.ERROR, "max_score": 6.0, **changes})


def test_result_holds_a_scored_report_as_it_came():
    result = _result()
    report = WorkerReport(status=Status.GRADED, score=4.0, max_score=6.0, startup_seconds=10.0, work_seconds=30.0,
                          cells=[CellGrade("lab", "q1", 1.0, 1.0)], usage={"peak_memory_mb": 900})
    result.take(report)
    assert (result.status, result.score, result.max_score, result.detail) == (Status.GRADED, 4.0, 6.0, "")
    assert result.report is report and (result.cells, result.usage) == (report.cells, {"peak_memory_mb": 900})
    again = Result.from_json(result.to_json())
    assert again == result and again.report == report and isinstance(again.report, WorkerReport)
    assert json.loads(result.to_json())["report"]["startup_seconds"] == 10.0


def test_result_records_no_result_as_zero_points():
    result = _result(score=3.0)
    result.take(WorkerReport.no_result(Status.TIMED_OUT, "did not finish within 140 s"))
    assert (result.status, result.score, result.max_score) == (Status.TIMED_OUT, 0.0, 6.0)
    assert result.detail == "did not finish within 140 s"


def test_result_round_trips_and_refuses_what_it_did_not_write():
    result = _result(status=Status.GRADED, score=4.0,
                     report=WorkerReport(Status.GRADED, 4.0, 6.0, cells=[CellGrade("lab", "q1", 1.0, 1.0)]))
    assert Result.from_json(result.to_json()) == result
    stored = json.loads(result.to_json())
    assert stored["status"] == "graded" and stored["report"]["cells"] == [
        {"notebook": "lab", "grade_id": "q1", "score": 1.0, "max_score": 1.0, "auto_score": None}]
    assert Result.from_json(json.dumps({**stored, "report": None})).cells == []  # never reached a worker
    with pytest.raises((ValueError, TypeError)):
        Result.from_json(json.dumps({**stored, "report": "graded"}))
    with pytest.raises((ValueError, TypeError)):
        Result.from_json(json.dumps({**stored, "status": "passed"}))
    with pytest.raises((ValueError, TypeError)):
        Result.from_json(json.dumps({**stored, "unknown_field": 1}))


def test_points_are_formatted_like_grades_csv():
    assert [format_points(v) for v in (None, 0.0, 6.0, 2.5, 1 / 3)] == ["", "0", "6", "2.50", "0.33"]


def test_grades_csv_format(tmp_path):
    results = [
        _result(student="zoe", status=Status.TIMED_OUT, score=2.5, seconds=141.04,
                detail="stopped after 45 s in: q3, q4 (other cells graded)", file="/subs/zoe.ipynb"),
        _result(student="ana", status=Status.GRADED, score=6.0, seconds=61.26, file="/subs/ana.ipynb"),
        _result(student="bob", status=Status.INVALID, detail='bob.ipynb is not JSON ("x")', file="/subs/bob.ipynb"),
    ]
    path = tmp_path / "grades.csv"
    write_csv(path, results)
    assert path.read_bytes() == (
        b"student,score,max_score,status,seconds,detail,file\r\n"
        b"ana,6,6,graded,61.3,,/subs/ana.ipynb\r\n"
        b'bob,0,6,invalid notebook,0.0,"bob.ipynb is not JSON (""x"")",/subs/bob.ipynb\r\n'
        b'zoe,2.50,6,timed out,141.0,"stopped after 45 s in: q3, q4 (other cells graded)",/subs/zoe.ipynb\r\n')
    assert not list(tmp_path.glob("*.tmp"))
    with path.open(newline="") as handle:
        assert [row["status"] for row in csv.DictReader(handle)] == ["graded", "invalid notebook", "timed out"]


@pytest.mark.parametrize("cell, written", [
    ("=HYPERLINK(\"http://evil.example\",\"x\")", "'=HYPERLINK(\"http://evil.example\",\"x\")"),
    ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"),
    ("\t=1", "'\t=1"), ("\r=1", "'\r=1"),
    ("ana", "ana"), ("", ""), ("'=1", "'=1"), ("a=1", "a=1"),
    ("-2.50", "-2.50"), ("10", "10"),   # plain numbers are no formulas: scores stay numbers
])
def test_cells_a_spreadsheet_would_run_get_a_quote(cell, written):
    """OWASP's CSV injection rule: a cell starting with = + - @, a tab or a carriage return is made text."""
    assert spreadsheet_safe(cell) == written
    assert spreadsheet_safe(written) == written   # once is enough


def test_grades_csv_neutralises_ids_details_files_and_roster_fields(tmp_path):
    results = [Result(student="+ana", status=Status.INVALID, max_score=5, detail="=HYPERLINK(\"http://x\")",
                      file="@/subs/+ana.ipynb"),
               Result(student="bob", status=Status.GRADED, score=2.5, max_score=5, file="/subs/bob.ipynb")]
    roster = match(parse_roster('file,id,name,email,section\n+ana.ipynb,-7x,"=1+1",@a@x,+B\n'
                                'zoe.ipynb,S9,-Zoe,z@x,A\n'), [(r.student, r.file) for r in results])
    write_csv(tmp_path / "grades.csv", results, roster=roster)
    with (tmp_path / "grades.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["student"], r["detail"], r["file"], r["id"], r["name"], r["email"], r["section"]) for r in rows[:1]] == [
        ("'+ana", "'=HYPERLINK(\"http://x\")", "'@/subs/+ana.ipynb", "'-7x", "'=1+1", "'@a@x", "'+B")]
    assert (rows[1]["student"], rows[1]["score"], rows[1]["max_score"]) == ("bob", "2.50", "5")
    assert (rows[2]["file"], rows[2]["name"], rows[2]["status"]) == ("zoe.ipynb", "'-Zoe", "no submission")
    for row in rows:
        assert not [v for v in row.values() if v[:1] in ("=", "+", "-", "@", "\t", "\r")], row
