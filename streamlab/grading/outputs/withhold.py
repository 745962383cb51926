"""Nothing of the answer key enters the student's kernel: hidden tests are taken out before the notebook runs.

nbgrader's autograde puts each test cell back as the instructor wrote it (``OverwriteCells``), hidden
tests included, and runs it in the student's kernel, after the student's code: code that can read every
cell it runs (an IPython hook sees each cell's source) and print it in any encoding. So the grader runs
``WithholdHiddenTests`` right after ``OverwriteCells``: each ``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN
TESTS`` region becomes one comment line. What those lines checked is checked by the lab's hidden checks
(``solutions/<lab>/hidden_checks.py``), outside the kernel, on what the run left behind; a value that only
the kernel holds reaches them through a locked cell that writes it to a topic (see docs/contributors.md,
"Writing a lab").
"""
from __future__ import annotations

from dataclasses import dataclass

BEGIN, END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
NOTE = "# (hidden tests: checked by the grader outside your notebook)"


@dataclass(frozen=True)
class HiddenTests:
    """A cell's source read for hidden test regions: what is shown (each region one ``NOTE`` line, indented like its
    BEGIN line), the regions' own lines, and whether there was any region."""
    shown: str
    lines: list[str]
    found: bool


def read_hidden_tests(source: str, begin: str = BEGIN, end: str = END, note: str = NOTE) -> HiddenTests:
    """The grader's one reader of hidden-test markers (the worker's ``WithholdHiddenTests``, the feedback's
    ``HideHiddenTests`` and its ``hidden_lines`` all read through it). A region runs from a line holding ``begin``
    to one holding ``end``, as nbgrader's ``ClearHiddenTests`` reads it; unlike that one, which raises on a region
    left open or nested, a region left open runs to the cell's end and a BEGIN inside one starts it again: the
    student's own cells can hold the markers, and they must not stop the grader."""
    shown, hidden, inside, found = [], [], False, False
    for line in source.split("\n"):
        if begin in line:
            shown.append(line[: len(line) - len(line.lstrip())] + note)
            inside = found = True
        elif end in line:
            inside = False
        elif inside:
            hidden.append(line)
        else:
            shown.append(line)
    return HiddenTests("\n".join(shown), hidden, found)


def without_hidden_tests(source: str, begin: str = BEGIN, end: str = END) -> tuple[str, bool]:
    """``source`` with each hidden region replaced by ``NOTE``; and whether any was."""
    read = read_hidden_tests(source, begin, end)
    return read.shown, read.found
