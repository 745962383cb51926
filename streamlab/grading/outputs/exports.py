"""Grades in the files learning platforms import: ``streamlab grade export``.

    canvas   Canvas's gradebook CSV (Gradebook > Import): ``Student, ID, SIS User ID, SIS Login ID,
             Section`` and one column for the lab, as Canvas's own gradebook export lays them out, with its
             ``Points Possible`` row. The roster's id goes to ``SIS User ID``, its e-mail to ``SIS Login ID``,
             ``ID`` (Canvas's internal number) stays empty: Canvas finds the student by the other two. A column
             Canvas does not know becomes a new assignment, so there is no comment column (Canvas's CSV import
             takes no comments): the statuses are printed instead.
    moodle   Moodle's grade import from CSV (Grades > Import > CSV file): ``ID number, Email address, Full name,
             Section``, the lab's points, and a feedback column with the status. In the import's preview,
             map ``ID number`` to ``useridnumber``, the lab's column to the grade item and the feedback column
             to its feedback (mapping ``Email address`` to ``useremail`` works only when every row has one).
    csv      every student, roster or not: ``file, id, name, email, section, student, score, max_score,
             status, detail``.

Scores are the lab's points, as in grades.csv. The status (``timed out``, ``limit exceeded``, ...) goes
where the format has room for it.

What goes into Canvas's and Moodle's files is exactly the roster's students with a final result (graded,
timed out, crashed, invalid notebook, limit exceeded): a student without a submission, or whose grading
failed (grader error), is left out and listed instead, because both importers take a blank score cell as
"remove this student's grade". The export refuses, naming the roster's lines, what would put a grade on
the wrong student: a row without an id or with an id another row has (Moodle files a row whose id is empty
on the previous row's student), an id a spreadsheet would take for a formula, and a graded submission the
roster does not list (``allow_unlisted`` leaves those out instead). Every cell written is
``results.spreadsheet_safe``.
"""
from __future__ import annotations

import csv
import io

from .. import bounds
from ..labs import GradingError
from .results import Result, Status, format_points, safe_row, spreadsheet_safe
from .roster import Matched, Student

FORMATS = ("canvas", "moodle", "csv")
NO_SUBMISSION = "no submission"
EMPTY_IN_PHP = ("", "0")   # ids Moodle's importer takes for "no id" (PHP's empty())


def comment(result: Result | None) -> str:
    """The status as a short comment: ``graded``, ``timed out: <detail>``, ``no submission``."""
    if result is None:
        return NO_SUBMISSION
    text = result.status_text
    if result.detail:
        text += f": {result.detail}"
    return text if len(text) <= bounds.EXPORT_COMMENT_CHARS else text[:bounds.EXPORT_COMMENT_CHARS - 3] + "..."


def score(result: Result | None) -> str:
    return "" if result is None else format_points(result.score)


def left_out(results: list[Result], matched: Matched) -> list[str]:
    """The roster's students a Canvas or Moodle file leaves out, one line each, saying why."""
    by_student = {r.student: r for r in results}
    lines = []
    for student, row in matched.found.items():
        result = by_student.get(student)
        if result is None:
            lines.append(f"{row.describe()}: no result for {student}")
        elif not result.status.is_final:
            lines.append(f"{row.describe()}: {result.status_text} (grade it again, then export again)")
    lines += [f"{row.describe()}: {NO_SUBMISSION}" for row in matched.missing]
    return lines


def lms_rows(fmt: str, results: list[Result], matched: Matched, *,
             allow_unlisted: bool = False) -> list[tuple[Student, Result]]:
    """The rows a Canvas or Moodle file holds: each roster student with a final result, sorted by section and
    name. A GradingError names every row that could put a grade on the wrong student (see the module's doc);
    graded submissions missing from the roster are refused too, unless ``allow_unlisted``."""
    by_student = {r.student: r for r in results}
    rows = [(row, by_student[student]) for student, row in matched.found.items()
            if student in by_student and by_student[student].status.is_final]
    problems = _id_problems(fmt, [row for row, _ in rows])
    unlisted = [s for s in matched.unknown if s in by_student]
    if unlisted and not allow_unlisted:
        problems.append(f"{len(unlisted)} graded submission(s) are not in the roster: {', '.join(unlisted)}. Add "
                        f"them to the roster, or export without them with --allow-unlisted")
    if problems:
        raise GradingError(f"the {fmt} file would put grades on the wrong students:\n"
                           + "\n".join(f"  - {p}" for p in problems))
    return sorted(rows, key=lambda pair: (pair[0].section, pair[0].name, pair[0].file))


def _id_problems(fmt: str, rows: list[Student]) -> list[str]:
    """Why the ids of ``rows`` cannot key an import: empty, repeated (also in another letter case, for an
    importer that ignores case), or changed by ``spreadsheet_safe``. Also repeated e-mail addresses, which
    Canvas's SIS Login ID and Moodle's useremail mapping would file on one student."""
    problems = []
    empty = EMPTY_IN_PHP if fmt == "moodle" else ("",)
    for row in rows:
        if row.id in empty:
            problems.append(f"{row.describe()} has " + ("no id" if not row.id else f"the id {row.id!r}, which "
                            f"Moodle's import takes for no id") + ": its grade would be filed on another student")
        elif spreadsheet_safe(row.id) != row.id:
            problems.append(f"{row.describe()} has the id {row.id!r}, which a spreadsheet would run as a formula; "
                            f"written safely it would match no one")
    for what, column in (("id", "id"), ("e-mail address", "email")):
        first: dict[str, Student] = {}
        for row in rows:
            value = getattr(row, column)
            if not value:
                continue
            other = first.setdefault(value.casefold(), row)
            if other is not row:
                before = getattr(other, column)
                same = repr(value) if value == before else f"{before!r} and {value!r}, one when case is ignored"
                problems.append(f"{other.describe()} and {row.describe()} have the same {what} ({same})")
    return problems


def canvas(results: list[Result], matched: Matched, assignment: str, max_score: float, *,
           allow_unlisted: bool = False) -> list[list[str]]:
    table = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", assignment],
             ["Points Possible", "", "", "", "", format_points(max_score)]]
    for row, result in lms_rows("canvas", results, matched, allow_unlisted=allow_unlisted):
        table.append([row.name, "", row.id, row.email, row.section, score(result)])
    return table


def moodle(results: list[Result], matched: Matched, assignment: str, max_score: float, *,
           allow_unlisted: bool = False) -> list[list[str]]:
    table = [["ID number", "Email address", "Full name", "Section", assignment, f"{assignment} (feedback)"]]
    for row, result in lms_rows("moodle", results, matched, allow_unlisted=allow_unlisted):
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
                 max_score: float, *, allow_unlisted: bool = False) -> list[list[str]]:
    if fmt == "csv":
        return plain(results, matched, assignment, max_score)
    if matched is None:
        raise ValueError(f"the {fmt} format needs a roster (--roster FILE): it is keyed by the students' ids")
    build = {"canvas": canvas, "moodle": moodle}[fmt]
    return build(results, matched, assignment, max_score, allow_unlisted=allow_unlisted)


def to_csv(table: list[list[str]]) -> str:
    """The table as CSV text, every cell ``spreadsheet_safe``."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(safe_row(row) for row in table)
    return buffer.getvalue()


def not_graded(results: list[Result]) -> list[Result]:
    """Results whose status says more than their score (timed out, crashed, ...): printed for Canvas."""
    return [r for r in results if r.status != Status.GRADED or not r.sandboxed]
