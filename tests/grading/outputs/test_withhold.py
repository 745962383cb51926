"""Hidden tests never reach the student's kernel: the grader takes them out right after nbgrader puts the
test cells back (``withhold``), before anything runs."""
from __future__ import annotations

import nbformat
import pytest

from streamlab.grading.outputs.withhold import NOTE, without_hidden_tests
from streamlab.grading.steps.withhold_hidden_tests import WithholdHiddenTests

CELL = """assert ok(), "visible"
    ### BEGIN HIDDEN TESTS
    assert secret_answer() == 42, "the hidden line"
    ### END HIDDEN TESTS
print("after")"""


def test_a_hidden_region_becomes_one_note():
    source, removed = without_hidden_tests(CELL)
    assert removed
    assert source.splitlines() == ['assert ok(), "visible"', f"    {NOTE}", 'print("after")']
    assert without_hidden_tests("print(1)") == ("print(1)", False)


def test_the_grader_runs_it_right_after_overwrite_cells(tmp_path):
    from streamlab.grading.workers.worker import grading_config

    config = grading_config(tmp_path, 60)
    steps = [step.__name__ for step in config.Autograde.sanitize_preprocessors]
    assert steps[steps.index("OverwriteCells") + 1] == "WithholdHiddenTests"
    assert [step.__name__ for step in config.Autograde.autograde_preprocessors][0] == "BoundedExecute"
    test = {"grade": True, "grade_id": "t", "locked": True, "points": 1, "solution": False, "schema_version": 3}
    answer = dict(test, grade=False, locked=False, solution=True, grade_id="a")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(CELL, metadata={"nbgrader": test}),
        nbformat.v4.new_markdown_cell("### BEGIN HIDDEN TESTS (a markdown cell is text, left alone)"),
        nbformat.v4.new_code_cell(CELL, metadata={"nbgrader": answer}),   # the student's: runs as written
        nbformat.v4.new_code_cell(CELL)])
    out, _ = WithholdHiddenTests().preprocess(nb, {})
    assert "secret_answer" not in out.cells[0].source and NOTE in out.cells[0].source
    assert out.cells[1].source.startswith("### BEGIN HIDDEN TESTS")
    assert out.cells[2].source == out.cells[3].source == CELL


def test_one_reader_of_the_markers_for_the_kernel_and_the_feedback():
    """What the kernel is spared (``WithholdHiddenTests``), what the feedback hides (``HideHiddenTests``) and the lines
    whose quotes the feedback withholds (``hidden_lines``) are one reading of the markers, so they cannot disagree.
    A region left open, or an END without its BEGIN, in a student's cell stops no one (nbgrader's own reader
    raises on both)."""
    from nbgrader.preprocessors import ClearHiddenTests

    from streamlab.grading.outputs.feedback import hidden_lines
    from streamlab.grading.outputs.withhold import HiddenTests, read_hidden_tests
    from streamlab.grading.steps.hide_hidden_tests import HideHiddenTests

    read = read_hidden_tests(CELL)
    assert read.found and read.lines == ['    assert secret_answer() == 42, "the hidden line"']
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL, metadata={"nbgrader": {"grade": True}})])
    assert hidden_lines(nb) == {line.strip() for line in read.lines}
    hidden, _ = HideHiddenTests().preprocess(nbformat.from_dict(nb), {})
    withheld, _ = WithholdHiddenTests().preprocess(nbformat.from_dict(nb), {})
    assert hidden.cells[0].source == withheld.cells[0].source == read.shown
    open_region = "x = 1\n### BEGIN HIDDEN TESTS\nsecret = 2"
    assert read_hidden_tests(open_region).shown == f"x = 1\n{NOTE}" and read_hidden_tests(open_region).lines == [
        "secret = 2"]
    assert read_hidden_tests("### END HIDDEN TESTS\ny = 3") == HiddenTests("y = 3", [], False)
    cell = nbformat.v4.new_code_cell(open_region, metadata={"nbgrader": {"grade": True, "grade_id": "t"}})
    with pytest.raises(RuntimeError, match="No end hidden tests"):  # the reason the grader reads them itself
        ClearHiddenTests().preprocess_cell(cell, {}, 0)
