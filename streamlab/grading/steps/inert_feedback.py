"""``InertFeedback``: for feedback, after ``HideHiddenTests``, every part a student made made inert and bounded."""
from __future__ import annotations

import html

import nbformat
from nbconvert.preprocessors import Preprocessor
from traitlets import Integer

from .. import bounds
from ..outputs.feedback import (
    as_markdown_source,
    inert_output,
    left_out_note,
    markdown_html,
    sanitize_html,
    size_in_bytes,
)


class InertFeedback(Preprocessor):
    """For feedback, after ``HideHiddenTests``: makes every part a student made inert. Markdown (cells,
    outputs, comments) is rendered here and sanitised (``sanitize_html``); outputs keep one safe
    representation (``inert_output``), their metadata only an image's size and alt text.

    Sizes: a cell's outputs are kept up to ``cell_bytes``, the notebook's up to ``notebook_bytes``; past
    either, an output is replaced by a note saying how big it was (past the notebook's, one note per
    cell). Text (code, rendered markdown) has the same two limits, counted apart, so that a flood of
    outputs never hides the lab's own text or a test's code."""

    cell_bytes = Integer(bounds.CELL_OUTPUT_BYTES).tag(config=True)
    notebook_bytes = Integer(bounds.NOTEBOOK_OUTPUT_BYTES).tag(config=True)
    enabled = True

    def preprocess(self, nb, resources):
        self._left = {"output": self.notebook_bytes, "text": self.notebook_bytes}
        nb.metadata.pop("widgets", None)    # widget state: only nbconvert's widget scripts read it
        return super().preprocess(nb, resources)

    def _within(self, kind: str, size: int, cell_left: int) -> str | None:
        """None if ``size`` more bytes of ``kind`` fit in the cell and the notebook (they are counted);
        otherwise the note that replaces them."""
        if size > cell_left:
            return left_out_note(size, self.cell_bytes, "one cell", kind)
        if size > self._left[kind]:
            return left_out_note(size, self.notebook_bytes, "the whole notebook", kind)
        self._left[kind] -= size
        return None

    def preprocess_cell(self, cell, resources, index):
        meta = cell.get("metadata", {}).get("nbgrader")
        if isinstance(meta, dict):
            if "grade_id" in meta:
                meta["grade_id"] = html.escape(str(meta["grade_id"]))   # the template writes it raw
            if isinstance(meta.get("comment"), str):                     # rendered as markdown, raw
                meta["comment"] = as_markdown_source(markdown_html(meta["comment"][:self.cell_bytes]))
        if cell.cell_type == "markdown":
            attachments = cell.pop("attachments", None)
            size = size_in_bytes(cell.source) + size_in_bytes(attachments)
            note = left_out_note(size, self.cell_bytes, "one cell", "text") if size > self.cell_bytes else None
            fragment = "" if note else markdown_html(cell.source, attachments)
            note = note or self._within("text", size_in_bytes(fragment), self.cell_bytes)
            cell.source = as_markdown_source(f"<p><em>{html.escape(note)}</em></p>" if note else fragment)
        elif cell.cell_type == "raw":   # shown only if its format is HTML's
            cell.source = sanitize_html(cell.source[:self.cell_bytes])
            if self._within("text", size_in_bytes(cell.source), self.cell_bytes):
                cell.source = ""
        elif cell.cell_type == "code":
            note = self._within("text", size_in_bytes(cell.source), self.cell_bytes)
            if note:
                cell.source = cell.source[:bounds.FEEDBACK_SOURCE_CHARS] + "\n# " + note
            count = cell.get("execution_count")
            cell.execution_count = count if isinstance(count, int) and not isinstance(count, bool) else None
            cell.outputs = self._outputs(cell.get("outputs", []))
        return cell, resources

    def _outputs(self, outputs: list) -> list:
        """``outputs`` made inert, within the cell's and the notebook's limits."""
        kept, cell_left, past_notebook = [], self.cell_bytes, False
        for output in outputs:
            size, shown = size_in_bytes(output), None
            if size <= min(cell_left, self._left["output"]):
                shown = inert_output(output)
                if shown is None:
                    continue
                size = size_in_bytes(shown)
            note = self._within("output", size, cell_left)
            if note is None:
                kept.append(shown)
                cell_left -= size
            elif size > cell_left or not past_notebook:
                past_notebook = past_notebook or size <= cell_left
                kept.append({"output_type": "stream", "name": "stdout", "text": note + "\n"})
        return [nbformat.from_dict(output) for output in kept]
