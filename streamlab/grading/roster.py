"""The class roster: who the submissions belong to, for grades.csv and the learning platform's import.

A CSV file with the columns ``file,id,name,email,section`` (others are ignored; UTF-8, also as Excel
saves it): ``file`` is the submission's name as the grader knows it (``ana.ipynb`` or ``ana``, the
``student`` or the file name of ``grades.csv``; for nbgrader's layout, the student's folder), ``id`` the
student's id at your institution (Canvas's SIS User ID, Moodle's ID number), then their name, e-mail and
section. Matching the roster to the results never drops anyone silently: students of the roster without a
submission are *missing*, submissions without a roster row are *unknown*, and both are listed.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import PurePath

from .labs import GradingError

COLUMNS = ["file", "id", "name", "email", "section"]


@dataclass(frozen=True)
class Student:
    file: str
    id: str
    name: str
    email: str
    section: str


@dataclass
class Matched:
    """The roster against the submissions: each roster student with their submission's student id."""
    found: dict[str, Student] = field(default_factory=dict)   # student id (as in grades.csv) -> roster row
    missing: list[Student] = field(default_factory=list)      # in the roster, no submission
    unknown: list[str] = field(default_factory=list)          # submissions (student ids) not in the roster

    def describe(self, students: int) -> str:
        """What the match found, for the console."""
        lines = [f"Roster: {len(self.found)} of {students} submission(s) matched"]
        if self.missing:
            lines.append(f"  in the roster, no submission ({len(self.missing)}): "
                         + ", ".join(f"{s.name or s.file} ({s.file})" for s in self.missing))
        if self.unknown:
            lines.append(f"  submitted, not in the roster ({len(self.unknown)}): " + ", ".join(self.unknown))
        return "\n".join(lines)


def parse_roster(text: str, source: str = "the roster") -> list[Student]:
    """The roster's students; a GradingError names what is wrong (a missing column, an empty or repeated
    file name, a repeated id)."""
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    header = [(name or "").strip().lower() for name in (reader.fieldnames or [])]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise GradingError(f"{source} needs the columns {','.join(COLUMNS)}; it has no "
                           f"{', '.join(missing)} (its header: {','.join(header) or 'none'})")
    reader.fieldnames = header
    students, files, ids = [], {}, {}
    for line, row in enumerate(reader, start=2):
        values = {c: (row.get(c) or "").strip() for c in COLUMNS}
        if not any(values.values()):
            continue  # a blank line
        if not values["file"]:
            raise GradingError(f"{source}, line {line}: no file name ({values['name'] or values['id']})")
        key = _base(values["file"])
        if key in files:
            raise GradingError(f"{source}, lines {files[key]} and {line}: the same submission {values['file']!r}")
        files[key] = line
        if values["id"]:
            if values["id"] in ids:
                raise GradingError(f"{source}, lines {ids[values['id']]} and {line}: the same id {values['id']!r}")
            ids[values["id"]] = line
        students.append(Student(**values))
    return students


def read_roster(path) -> list[Student]:
    from pathlib import Path

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise GradingError(f"cannot read the roster {path}: {err}") from err
    return parse_roster(text, str(path))


def _base(name: str) -> str:
    """A name without folders and without ``.ipynb``: ``subs/ana.ipynb`` -> ``ana``."""
    name = PurePath(name.replace("\\", "/")).name
    return name[:-len(".ipynb")] if name.lower().endswith(".ipynb") else name


def submission_names(student: str, file: str) -> list[str]:
    """The names a roster's ``file`` may give a submission: its student id, and its file's or folder's name."""
    names = [student]
    if file:
        path = PurePath(file.replace("\\", "/"))
        names.append(_base(path.name))
        if path.suffix != ".ipynb":  # nbgrader's <student>/<lab>/: the student's folder
            names.append(path.parent.name)
    return [n for n in names if n]


def match(students: list[Student], submissions: list[tuple[str, str]]) -> Matched:
    """Match the roster to ``submissions``, given as (student id, file) pairs as grades.csv has them.
    The student id wins over a file name when both could match."""
    matched = Matched()
    by_name: dict[str, str] = {}
    for rank in (0, 1, 2):  # student ids first, then the files' names, then nbgrader's folders
        for student, file in submissions:
            names = submission_names(student, file)
            if rank < len(names):
                by_name.setdefault(names[rank], student)
    taken: set[str] = set()
    for row in students:
        student = by_name.get(_base(row.file))
        if student is None or student in taken:
            matched.missing.append(row)
        else:
            matched.found[student] = row
            taken.add(student)
    matched.unknown = sorted(s for s, _ in submissions if s not in taken)
    return matched
