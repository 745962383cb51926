"""``WithholdHiddenTests``: in autograde's sanitize steps, right after nbgrader's ``OverwriteCells`` puts the test
cells back as the instructor wrote them and before the student's kernel runs them, every hidden test region of every
code cell becomes one comment line (``outputs/withhold.py`` says why)."""
from __future__ import annotations

from nbconvert.preprocessors import Preprocessor

from ..outputs.withhold import without_hidden_tests


class WithholdHiddenTests(Preprocessor):
    """Replace every hidden test region of every code cell by a one-line note."""

    enabled = True  # nbconvert registers a step disabled unless it says so (this one was: hidden regions ran)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            cell.source, _ = without_hidden_tests(cell.source)
        return cell, resources
