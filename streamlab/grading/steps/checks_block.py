"""``ChecksBlock``: in nbgrader's feedback, the block "Checked by the grader" (``verdicts.summary_html``) first in each
notebook, so the page shows it under nbgrader's score; ``with_checks_block`` puts it in the feedback's steps."""
from __future__ import annotations

import nbformat
from nbconvert.preprocessors import Preprocessor
from traitlets import Unicode

from ..outputs.feedback import as_markdown_source
from ..outputs.results import CheckResult
from ..outputs.verdicts import summary_html


class ChecksBlock(Preprocessor):
    """Puts ``block`` (markdown source: the grader's own HTML, every value in it escaped) first in each notebook. A
    markdown cell, which the template passes through as it is (``feedback.as_markdown_source``): nbconvert cleans a
    raw cell's HTML, which would take the figure and the table apart."""

    block = Unicode("", help="the block's markdown source ('': none)").tag(config=True)
    enabled = True

    def preprocess(self, nb, resources):
        if self.block:
            nb.cells.insert(0, nbformat.v4.new_markdown_cell(self.block))
        return nb, resources


def with_checks_block(config, verdicts: list[CheckResult], language: str = "en") -> None:
    """In ``config`` (nbgrader's, for generate_feedback): ``ChecksBlock`` with the block for ``verdicts``, right after
    ``InertFeedback`` in ``GenerateFeedback.preprocessors`` (or last). After InertFeedback, because that one makes
    what the student wrote inert, and this block is the grader's own. ``language``: the notebook's (its words)."""
    steps = [step for step in config.GenerateFeedback.preprocessors if step is not ChecksBlock]
    names = [getattr(step, "__name__", "") for step in steps]
    at = names.index("InertFeedback") + 1 if "InertFeedback" in names else len(steps)
    config.GenerateFeedback.preprocessors = [*steps[:at], ChecksBlock, *steps[at:]]
    config.ChecksBlock.block = as_markdown_source(summary_html(verdicts, language))
