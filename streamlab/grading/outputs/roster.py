"""The class roster: who the submissions belong to, for grades.csv and the learning platform's import.

A CSV file with the columns ``file,id,name,email,section`` (others are ignored; UTF-8, also as Excel
saves it): ``file`` is the submission's exact name (``ana.ipynb`` or ``ana`` for ``ana.ipynb`` in a flat
folder; ``ana`` for nbgrader's ``ana/<lab>/`` folder), ``id`` the student's id at your institution (Canvas's
SIS User ID, Moodle's ID number), then their name, e-mail and section. A row matches the submission of
exactly that name, never one whose name merely resembles it (``Ana.ipynb``, ``ana lopez.ipynb``,
``subs/ana.ipynb`` are other names). Matching the roster to the results never drops anyone silently:
students of the roster without a submission are *missing*, submissions without a roster row are *unknown*,
and both are listed.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from ..labs import GradingError

COLUMNS = ["file", "id", "name", "email", "section"]
SUFFIX = ".ipynb"


@dataclass(frozen=True)
class Student:
    file: str
    id: str
    name: str
    email: str
    section: str
    line: int = field(default=0, compare=False)   # its line in the roster file, to name it in messages

    def describe(self) -> str:
        """The row as messages name it: ``line 4 (ana.ipynb, Ana Alves)``."""
        return f"line {self.line} ({', '.join(v for v in (self.file, self.name) if v)})"


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
    for row in reader:
        line = reader.line_num  # the file's line (a blank line before it is skipped, yet counted here)
        values = {c: (row.get(c) or "").strip() for c in COLUMNS}
        if not any(values.values()):
            continue  # a blank line
        if not values["file"]:
            raise GradingError(f"{source}, line {line}: no file name ({values['name'] or values['id']})")
        if "/" in values["file"] or "\\" in values["file"]:
            raise GradingError(f"{source}, line {line}: the file {values['file']!r} names a folder; give the "
                               f"submission's exact name only (ana.ipynb, or ana for nbgrader's ana/<lab>/)")
        key = _base(values["file"])
        if key in files:
            raise GradingError(f"{source}, lines {files[key]} and {line}: the same submission {values['file']!r}")
        files[key] = line
        if values["id"]:
            if values["id"] in ids:
                raise GradingError(f"{source}, lines {ids[values['id']]} and {line}: the same id {values['id']!r}")
            ids[values["id"]] = line
        students.append(Student(**values, line=line))
    return students


def read_roster(path) -> list[Student]:
    from pathlib import Path

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise GradingError(f"cannot read the roster {path}: {err}") from err
    return parse_roster(text, str(path))


def _base(name: str) -> str:
    """A roster's ``file`` without an exact ``.ipynb``: ``ana.ipynb`` and ``ana`` name the same submission."""
    return name[:-len(SUFFIX)] if name.endswith(SUFFIX) and name != SUFFIX else name


def submission_names(file: str) -> list[str]:
    """The exact names a roster's ``file`` may give the submission whose origin (as grades.csv has it) is
    ``file``: ``ana.ipynb`` or ``ana`` for the flat layout's ``.../ana.ipynb``, ``ana`` for nbgrader's
    ``.../ana/<lab>`` folder. Nothing else: no case folding, no other folder, no cleaning up."""
    if not file:
        return []
    path = PurePosixPath(file)
    if path.name.endswith(SUFFIX) and path.name != SUFFIX:
        return [path.name, path.name[:-len(SUFFIX)]]
    return [path.parent.name] if path.parent.name else []


def match(students: list[Student], submissions: list[tuple[str, str]]) -> Matched:
    """Match the roster to ``submissions``, given as (student id, file) pairs as grades.csv has them: a row
    matches the submission its ``file`` names exactly (``submission_names``), never one whose name only
    resembles it. A name two submissions answer to matches neither (it cannot happen in one folder)."""
    matched = Matched()
    by_name: dict[str, str | None] = {}
    for student, file in submissions:
        for name in set(submission_names(file)):
            by_name[name] = student if by_name.get(name, student) == student else None
    taken: set[str] = set()
    for row in students:
        student = by_name.get(row.file)
        if student is None or student in taken:
            matched.missing.append(row)
        else:
            matched.found[student] = row
            taken.add(student)
    matched.unknown = sorted(s for s, _ in submissions if s not in taken)
    return matched
