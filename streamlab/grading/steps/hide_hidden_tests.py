"""``HideHiddenTests``: for feedback (nbgrader_config.py's ``GenerateFeedback.preprocessors``), hidden test regions
out of the test cells and any output quoting them withheld, and tracebacks reduced to their message."""
from __future__ import annotations

from nbconvert.preprocessors import Preprocessor
from traitlets import Unicode

from ...lessons.mistakes import framed, learner_message
from ..outputs.feedback import hidden_lines, output_text, quotes_any
from ..outputs.withhold import BEGIN, END, NOTE, read_hidden_tests


class HideHiddenTests(Preprocessor):
    """For feedback: in test cells, replace hidden test regions by a note and reduce error
    tracebacks (which quote the failing line) to the error's type and message (after the course's
    paragraph about a catalogued mistake, when the kernel put one first)."""

    begin = Unicode(BEGIN).tag(config=True)
    end = Unicode(END).tag(config=True)
    note = Unicode(NOTE).tag(config=True)
    withheld = Unicode("[output withheld: it quoted the grader's hidden tests]").tag(config=True)
    enabled = True

    def preprocess(self, nb, resources):
        # A submission's code sees the hidden tests run in its kernel (an IPython hook can print
        # each cell's source): any output quoting a line of them is withheld, in every cell.
        self._hidden_lines = hidden_lines(nb, self.begin, self.end)
        return super().preprocess(nb, resources)

    def _withhold_quotes(self, cell) -> None:
        for number, output in enumerate(cell.get("outputs", [])):
            if quotes_any(output_text(output), self._hidden_lines):
                cell.outputs[number] = {"output_type": "stream", "name": "stdout", "text": self.withheld + "\n"}

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            self._withhold_quotes(cell)
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade"):
            return cell, resources
        read = read_hidden_tests(cell.source, self.begin, self.end, self.note)
        if read.found:
            cell.source = read.shown
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                message = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}".rstrip(": ")
                said = learner_message(output.get("traceback") if isinstance(output.get("traceback"), list)
                                       else None)  # a catalogued mistake's paragraph stays first
                output["traceback"] = (framed(said) if said else []) + [message]
        return cell, resources
