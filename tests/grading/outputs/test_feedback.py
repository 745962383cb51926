"""Feedback: hidden tests stay hidden, and a page explains a missing grade (no kernel, no Spark)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat

from streamlab.grading import Result, Status, nbgrader_config
from streamlab.grading.outputs.feedback import STATUS_EXPLANATIONS, status_page
from streamlab.grading.outputs.languages import STATUS_EXPLANATIONS_IN_CHINESE, language_of_bytes
from streamlab.grading.outputs.results import CheckResult
from streamlab.grading.outputs.verdicts import summary_html
from streamlab.grading.outputs.withhold import NOTE

ROOT = Path(__file__).resolve().parents[3]
LAB = "lab01_stateless_vs_stateful"

TEST_CELL = """\
assert answer == 42
print("visible test passed")
    ### BEGIN HIDDEN TESTS
    assert secret_check(answer), "the hidden expectation"
    ### END HIDDEN TESTS
print("done")"""


def _cell(source: str, **nbgrader):
    cell = nbformat.v4.new_code_cell(source, metadata={"nbgrader": nbgrader} if nbgrader else {})
    cell.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="the hidden expectation",
                                           traceback=["Traceback ...", 'assert secret_check(answer), "..."'])]
    return cell


def _preprocess(*cells):
    from streamlab.grading.steps.hide_hidden_tests import HideHiddenTests

    nb = nbformat.v4.new_notebook(cells=list(cells))
    nb, _ = HideHiddenTests().preprocess(nb, {})
    return nb


def test_hidden_tests_are_replaced_by_a_note():
    nb = _preprocess(_cell(TEST_CELL, grade=True, grade_id="q1", points=1))
    cell = nb.cells[0]
    assert cell.source == ('assert answer == 42\nprint("visible test passed")\n'
                           f"    {NOTE}\nprint(\"done\")")
    assert cell.outputs[0].traceback == ["AssertionError: the hidden expectation"]


def test_other_cells_are_left_alone():
    answer = _cell("### BEGIN HIDDEN TESTS\nanswer = 42\n### END HIDDEN TESTS", solution=True, grade_id="a1")
    plain = _cell("x = 1")
    markdown = nbformat.v4.new_markdown_cell("BEGIN HIDDEN TESTS", metadata={"nbgrader": {"grade": True}})
    nb = _preprocess(answer, plain, markdown)
    assert "answer = 42" in nb.cells[0].source and len(nb.cells[0].outputs[0].traceback) == 2
    assert nb.cells[1].source == "x = 1" and len(nb.cells[1].outputs[0].traceback) == 2
    assert nb.cells[2].source == "BEGIN HIDDEN TESTS"


def test_error_without_a_message_keeps_its_type():
    cell = _cell("assert False", grade=True, grade_id="q2", points=1)
    cell.outputs[0].evalue = ""
    assert _preprocess(cell).cells[0].outputs[0].traceback == ["AssertionError"]


def test_importing_the_grader_does_not_import_nbconvert():
    code = ("import sys, streamlab.grading, streamlab.cli; "
            "print(sorted(m for m in ('nbconvert', 'nbgrader', 'nbformat') if m in sys.modules)); "
            "from streamlab.grading.steps.hide_hidden_tests import HideHiddenTests; "
            "print(HideHiddenTests.__name__, 'nbconvert' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split("\n")[:2] == ["[]", "HideHiddenTests True"], proc.stderr


def test_nbgrader_config_uses_it_for_feedback(tmp_path):
    from streamlab.grading.steps.hide_hidden_tests import HideHiddenTests

    config = nbgrader_config(tmp_path)
    assert HideHiddenTests in config.GenerateFeedback.preprocessors


def test_status_page_explains_and_escapes():
    result = Result(student="o'neil <b>", status=Status.CRASHED, max_score=6.0, detail="kernel died <here>")
    page = status_page(result, "lab01")
    assert "<b>Status:</b> crashed<br>" in page and "<b>Score:</b> 0 / 6</p>" in page
    assert "o&#x27;neil &lt;b&gt;" in page and "kernel died &lt;here&gt;" in page
    assert "stopped the Python kernel" in page
    assert set(STATUS_EXPLANATIONS) == set(Status) - {Status.GRADED}
    assert "Details" not in status_page(Result(student="a", status=Status.INVALID), "lab01")


def test_the_status_page_in_the_notebooks_language():
    result = Result(student="o'neil <b>", status=Status.CRASHED, max_score=6.0, detail="kernel died <here>")
    page = status_page(result, "lab01", "zh")
    assert '<html lang="zh-Hans">' in page and "<b>状态：</b> 崩溃<br>" in page and "<b>分数：</b> 0 / 6</p>" in page
    assert "o&#x27;neil &lt;b&gt;" in page and "kernel died &lt;here&gt;" in page and "内核停止了" in page
    assert set(STATUS_EXPLANATIONS_IN_CHINESE) == set(STATUS_EXPLANATIONS)


def test_a_notebooks_language_is_read_from_its_bytes_and_only_chooses_words():
    """The grader reads the language without parsing (a refused file gets its words too); a notebook claims what it
    likes, and gets the grader's words in that language or in English, nothing else."""
    chinese = (ROOT / "zh" / "labs" / LAB / f"{LAB}.ipynb").read_bytes()
    assert language_of_bytes(chinese) == "zh" and language_of_bytes((ROOT / "labs" / LAB / f"{LAB}.ipynb")
                                                                     .read_bytes()) == "en"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('meta = {"streamlab": {"language": "zh"}}')])
    assert language_of_bytes(nbformat.writes(nb).encode()) == "en", "a cell's text is no notebook's metadata"
    nb.metadata["streamlab"] = {"language": 'zh"><script>alert(1)</script>'}
    assert language_of_bytes(nbformat.writes(nb).encode()) == "en"


def test_the_checks_block_in_chinese_escapes_as_the_english_does():
    attack = "<script>alert(1)</script>"
    verdict = CheckResult("counts", ["test_b"], False, f"wrong {attack}", [])
    block = summary_html([verdict], "zh")
    assert "评分器的检查" in block and "<th>检查</th><th>测试单元格</th><th>结果</th>" in block
    assert "未通过: wrong &lt;script&gt;" in block and attack not in block


def test_a_catalogued_mistakes_paragraph_stays_first_in_a_test_cell():
    """A test cell's traceback is reduced to its last line, after the course's paragraph about a catalogued mistake
    (streamlab.lessons.mistakes): the feedback page still says it first."""
    from streamlab.lessons import mistakes

    said = "At cell In[4], line 1, you call a batch action on a streaming DataFrame. (More: docs/mistakes.md#x.)"
    cell = _cell("events.show()", grade=True, grade_id="q2", points=1)
    cell.outputs[0].traceback = [*mistakes.framed(said), "Traceback ...", "AnalysisException: Queries with ..."]
    out = _preprocess(cell).cells[0].outputs[0].traceback
    assert mistakes.learner_message(out) == said
    assert out[-1] == "AssertionError: the hidden expectation" and len(out) == 2
