"""The roster, and the files learning platforms import (``streamlab grade export``): no kernel."""
from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest
from shard_outputs import make_output, shards

from streamlab.grading.exports import canvas, comment, export_table, moodle, plain, to_csv
from streamlab.grading.labs import GradingError
from streamlab.grading.results import Result, Status
from streamlab.grading.roster import match, parse_roster

ROOT = Path(__file__).resolve().parents[2]
ROSTER = """\ufefffile,id,name,email,section,notes
ana.ipynb,S1,"Alves, Ana",ana@uni.edu,A,
ben,S2,Ben Berg,ben@uni.edu,B,late
cem.ipynb,S3,Cem Can,cem@uni.edu,A,

zoe.ipynb,S9,Zoe Zed,zoe@uni.edu,B,
"""


def _results() -> list[Result]:
    return [Result(student="ana", status=Status.GRADED, score=10, max_score=10, file="/subs/ana.ipynb"),
            Result(student="ben", status=Status.TIMED_OUT, score=6.5, max_score=10, file="/subs/ben.ipynb",
                   detail="stopped in: part_c"),
            Result(student="cem", status=Status.LIMIT, score=0, max_score=10, file="/subs/cem.ipynb",
                   detail="memory: more than 4096 MB", sandboxed=False),
            Result(student="dan", status=Status.GRADED, score=3, max_score=10, file="/subs/dan.ipynb")]


def _matched():
    return match(parse_roster(ROSTER), [(r.student, r.file) for r in _results()])


def test_roster_matches_by_file_name_and_lists_who_is_missing_or_unknown():
    students = parse_roster(ROSTER)
    assert [s.id for s in students] == ["S1", "S2", "S3", "S9"]  # blank line skipped, extra column ignored
    assert students[0].name == "Alves, Ana"
    matched = _matched()
    assert sorted(matched.found) == ["ana", "ben", "cem"]
    assert [s.file for s in matched.missing] == ["zoe.ipynb"]
    assert matched.unknown == ["dan"]
    text = matched.describe(4)
    assert "3 of 4" in text and "Zoe Zed (zoe.ipynb)" in text and "not in the roster (1): dan" in text


def test_nbgrader_folders_and_student_ids_match_too():
    students = parse_roster("file,id,name,email,section\nana,S1,Ana,a@x,A\nben_2,S2,Ben,b@x,A\n")
    matched = match(students, [("ana", "/course/submitted/ana/lab01"), ("ben_2", "/subs/ben 2.ipynb")])
    assert sorted(matched.found) == ["ana", "ben_2"] and not matched.missing and not matched.unknown


@pytest.mark.parametrize("text, message", [
    ("file,id,name\nana,1,Ana\n", "no email, section"),
    ("file,id,name,email,section\n,S1,Ana,a@x,A\n", "line 2: no file name"),
    ("file,id,name,email,section\nana.ipynb,S1,A,a@x,A\nana,S2,B,b@x,A\n", "lines 2 and 3: the same submission"),
    ("file,id,name,email,section\nana,S1,A,a@x,A\nben,S1,B,b@x,A\n", "the same id 'S1'"),
])
def test_a_broken_roster_is_refused_with_the_line(text, message):
    with pytest.raises(GradingError, match=message):
        parse_roster(text)


def _table(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_canvas_layout():
    """Canvas's gradebook CSV: Student, ID, SIS User ID, SIS Login ID, Section, then the assignment; the
    Points Possible row; the lab's points; no comment column (Canvas would make it an assignment)."""
    table = _table(to_csv(canvas(_results(), _matched(), "Lab 1", 10.0)))
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lab 1"]
    assert table[1] == ["Points Possible", "", "", "", "", "10"]
    assert table[2:] == [["Alves, Ana", "", "S1", "ana@uni.edu", "A", "10"],
                         ["Cem Can", "", "S3", "cem@uni.edu", "A", "0"],
                         ["Ben Berg", "", "S2", "ben@uni.edu", "B", "6.50"],
                         ["Zoe Zed", "", "S9", "zoe@uni.edu", "B", ""]]   # no submission: left as it is


def test_moodle_layout():
    table = moodle(_results(), _matched(), "Lab 1", 10.0)
    assert table[0] == ["ID number", "Email address", "Full name", "Section", "Lab 1", "Lab 1 (feedback)"]
    rows = {row[0]: row for row in table[1:]}
    assert rows["S1"][4:] == ["10", "graded"]
    assert rows["S2"][4:] == ["6.50", "timed out: stopped in: part_c"]
    assert rows["S3"][4:] == ["0", "limit exceeded (no sandbox): memory: more than 4096 MB"]
    assert rows["S9"][4:] == ["", "no submission"]
    assert "dan" not in str(table)


def test_plain_csv_keeps_everyone():
    table = plain(_results(), _matched(), "Lab 1", 10.0)
    assert table[0] == ["file", "id", "name", "email", "section", "student", "score", "max_score", "status", "detail"]
    by_student = {row[5]: row for row in table[1:]}
    assert by_student["dan"][:2] == ["/subs/dan.ipynb", ""] and by_student["dan"][6] == "3"   # unknown: kept
    assert by_student[""][0] == "zoe.ipynb" and by_student[""][8] == "no submission"        # missing: kept
    assert len(plain(_results(), None, "Lab 1", 10.0)) == 5


def test_lms_formats_need_a_roster_and_comments_are_short():
    with pytest.raises(ValueError, match="needs a roster"):
        export_table("canvas", _results(), None, "Lab 1", 10.0)
    long = Result(student="x", status=Status.CRASHED, detail="y" * 1000)
    assert len(comment(long)) == 300 and comment(long).endswith("...")
    assert comment(None) == "no submission"


def _streamlab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamlab", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def test_export_command(tmp_path):
    first = shards(1)[0]
    out = make_output(tmp_path / "out", "1/1", first)
    roster = tmp_path / "roster.csv"
    roster.write_text("file,id,name,email,section\nana.ipynb,S1,Ana,ana@x.edu,A\nzoe.ipynb,S9,Zoe,zoe@x.edu,B\n")
    target = tmp_path / "canvas.csv"
    proc = _streamlab("grade", "export", str(out), "--format", "canvas", "--roster", str(roster),
                      "--out", str(target), "--assignment", "Lab 1 (1234)")
    assert proc.returncode == 1, proc.stderr   # graded students without a roster row: said, and not 0
    assert "not in the roster and are NOT in" in proc.stderr and "ben" in proc.stderr
    table = _table(target.read_text())
    assert table[0][-1] == "Lab 1 (1234)" and table[2] == ["Ana", "", "S1", "ana@x.edu", "A", "5"]
    assert table[3] == ["Zoe", "", "S9", "zoe@x.edu", "B", ""]
    plain_csv = tmp_path / "all.csv"
    proc = _streamlab("grade", "export", str(out), "--format", "csv", "--out", str(plain_csv))
    assert proc.returncode == 0, proc.stderr
    assert len(_table(plain_csv.read_text())) == 1 + len(first)
    proc = _streamlab("grade", "export", str(out), "--format", "moodle", "--out", str(tmp_path / "m.csv"))
    assert proc.returncode == 2 and "needs a roster" in proc.stderr
