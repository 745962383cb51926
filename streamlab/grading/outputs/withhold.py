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

from functools import cache

BEGIN, END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
NOTE = "# (hidden tests: checked by the grader outside your notebook)"


def without_hidden_tests(source: str, begin: str = BEGIN, end: str = END) -> tuple[str, bool]:
    """``source`` with each hidden region replaced by ``NOTE`` (indented like its BEGIN line); and whether any was."""
    lines, hidden, removed = [], False, False
    for line in source.split("\n"):
        if begin in line:
            hidden = removed = True
            lines.append(line[: len(line) - len(line.lstrip())] + NOTE)
        elif end in line:
            hidden = False
        elif not hidden:
            lines.append(line)
    return "\n".join(lines), removed


@cache
def withhold_hidden_tests():
    """The ``WithholdHiddenTests`` preprocessor class (imports nbconvert)."""
    from nbconvert.preprocessors import Preprocessor

    class WithholdHiddenTests(Preprocessor):
        """Replace every hidden test region of every code cell by a one-line note."""

        def preprocess_cell(self, cell, resources, index):
            if cell.cell_type == "code":
                cell.source, _ = without_hidden_tests(cell.source)
            return cell, resources

    return WithholdHiddenTests
