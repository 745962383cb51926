"""``WithholdHiddenTests``: in autograde's sanitize steps, right after nbgrader's ``OverwriteCells`` puts the test
cells back as the instructor wrote them and before the student's kernel runs them, every hidden test region of every
test cell becomes one comment line (``outputs/withhold.py`` says why). Only test cells: nbgrader allows hidden tests
nowhere else, and a student's own cell runs as they wrote it, whatever text it holds."""
from __future__ import annotations

from nbconvert.preprocessors import Preprocessor

from ..outputs.withhold import without_hidden_tests


class WithholdHiddenTests(Preprocessor):
    """Replace every hidden test region of every test cell (a code cell nbgrader grades) by a one-line note."""

    enabled = True  # nbconvert registers a step disabled unless it says so (this one was: hidden regions ran)

    def preprocess_cell(self, cell, resources, index):
        meta = cell.get("metadata", {}).get("nbgrader")
        if cell.cell_type == "code" and isinstance(meta, dict) and meta.get("grade") is True:
            cell.source, _ = without_hidden_tests(cell.source)
        return cell, resources
