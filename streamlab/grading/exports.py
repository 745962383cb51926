"""Grades in the files learning platforms import: ``streamlab grade export``.

    canvas   Canvas's gradebook CSV (Gradebook > Import): ``Student, ID, SIS User ID, SIS Login ID,
             Section`` and one column for the lab, as Canvas's own gradebook export lays them out, with its
             ``Points Possible`` row. The roster's id goes to ``SIS User ID``, its e-mail to ``SIS Login ID``,
             ``ID`` (Canvas's internal number) stays empty: Canvas finds the student by the other two. A column
             Canvas does not know becomes a new assignment, so there is no comment column (Canvas's CSV import
             takes no comments): the statuses are printed instead. A student without a submission gets an
             empty cell, which Canvas leaves as it is.
    moodle   Moodle's grade import from CSV (Grades > Import > CSV file): ``ID number, Email address, Full name,
             Section``, the lab's points, and a feedback column with the status. In the import's preview,
             map ``ID number`` to ``useridnumber`` (or ``Email address`` to ``useremail``), the lab's column
             to the grade item and the feedback column to its feedback.
    csv      every student, roster or not: ``file, id, name, email, section, student, score, max_score,
             status, detail``.

Scores are the lab's points, as in grades.csv. The status (``timed out``, ``limit exceeded``, ...) goes
where the format has room for it.
"""
from __future__ import annotations

import csv
import io

from .results import Result, Status, format_points
from .roster import Matched, Student

FORMATS = ("canvas", "moodle", "csv")
NO_SUBMISSION = "no submission"
COMMENT_CHARS = 300   # a status's detail is cut here in comment columns


def comment(result: Result | None) -> str:
    """The status as a short comment: ``graded``, ``timed out: <detail>``, ``no submission``."""
    if result is None:
        return NO_SUBMISSION
    text = result.status_text
    if result.detail:
        text += f": {result.detail}"
    return text if len(text) <= COMMENT_CHARS else text[:COMMENT_CHARS - 3] + "..."


def score(result: Result | None) -> str:
    return "" if result is None else format_points(result.score)


def _rows(results: list[Result], matched: Matched) -> list[tuple[Student, Result | None]]:
    by_student = {r.student: r for r in results}
    rows = [(row, by_student.get(student)) for student, row in matched.found.items()]
    rows += [(row, None) for row in matched.missing]
    return sorted(rows, key=lambda pair: (pair[0].section, pair[0].name, pair[0].file))


def canvas(results: list[Result], matched: Matched, assignment: str, max_score: float) -> list[list[str]]:
    table = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", assignment],
             ["Points Possible", "", "", "", "", format_points(max_score)]]
    for row, result in _rows(results, matched):
        table.append([row.name, "", row.id, row.email, row.section, score(result)])
    return table


def moodle(results: list[Result], matched: Matched, assignment: str, max_score: float) -> list[list[str]]:
    table = [["ID number", "Email address", "Full name", "Section", assignment, f"{assignment} (feedback)"]]
    for row, result in _rows(results, matched):
        table.append([row.id, row.email, row.name, row.section, score(result), comment(result)])
    return table


def plain(results: list[Result], matched: Matched | None, assignment: str, max_score: float) -> list[list[str]]:
    table = [["file", "id", "name", "email", "section", "student", "score", "max_score", "status", "detail"]]
    found = matched.found if matched else {}
    for result in sorted(results, key=lambda r: r.student):
        row = found.get(result.student)
        who = [row.file, row.id, row.name, row.email, row.section] if row else [result.file, "", "", "", ""]
        table.append(who + [result.student, score(result), format_points(result.max_score), result.status_text,
                            result.detail])
    for row in matched.missing if matched else []:
        table.append([row.file, row.id, row.name, row.email, row.section, "", "", format_points(max_score),
                      NO_SUBMISSION, "in the roster; no submission was graded"])
    return table


def export_table(fmt: str, results: list[Result], matched: Matched | None, assignment: str,
                 max_score: float) -> list[list[str]]:
    if fmt == "csv":
        return plain(results, matched, assignment, max_score)
    if matched is None:
        raise ValueError(f"the {fmt} format needs a roster (--roster FILE): it is keyed by the students' ids")
    return {"canvas": canvas, "moodle": moodle}[fmt](results, matched, assignment, max_score)


def to_csv(table: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(table)
    return buffer.getvalue()


def not_graded(results: list[Result]) -> list[Result]:
    """Results whose status says more than their score (timed out, crashed, ...): printed for Canvas."""
    return [r for r in results if r.status != Status.GRADED or not r.sandboxed]
