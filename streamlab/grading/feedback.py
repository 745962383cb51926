"""What students get back: nbgrader's feedback without hidden tests, or a page saying why not.

``HideHiddenTests`` is an nbconvert preprocessor that ``nbgrader_config.py`` puts in
``GenerateFeedback.preprocessors`` (as ``streamlab.grading.HideHiddenTests``). It is built on first
use, so that importing the grader (every ``streamlab`` command does) does not import nbconvert.
When nbgrader wrote no feedback (the notebook timed out, crashed or could not be read), the grader
writes ``status_page`` instead.
"""
from __future__ import annotations

import html
from functools import cache

from .results import Result, Status, format_points


@cache
def hide_hidden_tests():
    """The ``HideHiddenTests`` preprocessor class (imports nbconvert)."""
    from nbconvert.preprocessors import Preprocessor
    from traitlets import Unicode

    class HideHiddenTests(Preprocessor):
        """For feedback: in test cells, replace hidden test regions by a note and reduce error
        tracebacks (which quote the failing line) to the error's type and message."""

        begin = Unicode("BEGIN HIDDEN TESTS").tag(config=True)
        end = Unicode("END HIDDEN TESTS").tag(config=True)
        note = Unicode("# (hidden tests: run only by the grader)").tag(config=True)
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
            lines, hidden, removed = [], False, False
            for line in cell.source.split("\n"):
                if self.begin in line:
                    hidden = removed = True
                    lines.append(line[: len(line) - len(line.lstrip())] + self.note)
                elif self.end in line:
                    hidden = False
                elif not hidden:
                    lines.append(line)
            if removed:
                cell.source = "\n".join(lines)
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    message = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}".rstrip(": ")
                    output["traceback"] = [message]
            return cell, resources

    return HideHiddenTests


MIN_QUOTED = 16  # shorter lines ("assert ok", "print(x)") could be the student's own


def hidden_lines(nb, begin: str = "BEGIN HIDDEN TESTS", end: str = "END HIDDEN TESTS") -> set[str]:
    """The lines of every hidden test region in ``nb`` (stripped; at least ``MIN_QUOTED`` characters)."""
    found, hidden = set(), False
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for line in cell.source.split("\n"):
            if begin in line:
                hidden = True
            elif end in line:
                hidden = False
            elif hidden and len(line.strip()) >= MIN_QUOTED:
                found.add(line.strip())
        hidden = False
    return found


def output_text(output) -> str:
    """All the text an output shows: stream text, every text-like representation, an error's message."""
    parts = [output.get("text", ""), output.get("ename", ""), output.get("evalue", "")]
    parts += output.get("traceback", []) or []
    for value in (output.get("data") or {}).values():
        parts.append(value if isinstance(value, str) else "\n".join(value) if isinstance(value, list) else "")
    return "\n".join(p if isinstance(p, str) else "".join(p) for p in parts)


def quotes_any(text: str, lines: set[str]) -> bool:
    return any(line in text for line in lines) if text and lines else False


def __getattr__(name: str):
    if name == "HideHiddenTests":
        return hide_hidden_tests()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


STATUS_EXPLANATIONS = {
    Status.TIMED_OUT: "Your notebook did not finish within the time allowed for the whole submission, so "
                      "it could not be graded. Look for a cell that never returns: a streaming query "
                      "waited on without a time limit (awaitTermination() with no timeout), a query that "
                      "never ends, or an endless loop.",
    Status.CRASHED: "Your notebook stopped the Python kernel that ran it (for example os._exit(), "
                    "sys.exit() in a forked process, a killed process, or running out of memory), so it "
                    "could not be graded.",
    Status.INVALID: "The file you submitted could not be read as this lab's Jupyter notebook.",
    Status.LIMIT: "Your notebook ran into one of the limits every submission runs under (the detail above "
                  "names it: memory, processes, CPU time or disk), so it was stopped and could not be graded. "
                  "A lab's reference solution uses a small part of each.",
    Status.ERROR: "The grader failed on your submission for a reason that is not your doing. Your "
                  "instructor has been told and will grade it again.",
}


def status_page(result: Result, lab: str) -> str:
    """The feedback page for a submission nbgrader could not give feedback on."""
    explanation = STATUS_EXPLANATIONS.get(result.status, "")
    detail = f"<p><b>Details:</b> {html.escape(result.detail)}</p>" if result.detail else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(lab)}: {html.escape(result.student)}</title>
<style>body {{ font-family: sans-serif; max-width: 46em; margin: 2em auto; line-height: 1.5 }}</style></head>
<body>
<h1>{html.escape(lab)}</h1>
<p><b>Student:</b> {html.escape(result.student)}<br>
<b>Status:</b> {html.escape(result.status)}<br>
<b>Score:</b> {format_points(result.score)} / {format_points(result.max_score)}</p>
<p>{html.escape(explanation)}</p>
{detail}
<p>Before submitting again: restart the kernel and run all cells (Kernel &rarr; Restart Kernel and
Run All Cells), and check that every cell finishes.</p>
</body></html>
"""
