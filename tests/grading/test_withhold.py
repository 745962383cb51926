"""Hidden tests never reach the student's kernel: the grader takes them out right after nbgrader puts the
test cells back (``withhold``), before anything runs."""
from __future__ import annotations

import nbformat

from streamlab.grading.outputs.withhold import NOTE, withhold_hidden_tests, without_hidden_tests

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
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL), nbformat.v4.new_markdown_cell(
        "### BEGIN HIDDEN TESTS (a markdown cell is text, left alone)")])
    out, _ = withhold_hidden_tests()().preprocess(nb, {})
    assert "secret_answer" not in out.cells[0].source and NOTE in out.cells[0].source
    assert out.cells[1].source.startswith("### BEGIN HIDDEN TESTS")
