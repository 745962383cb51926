"""`streamlab check LAB_NOTEBOOK`: a learner's self-check, run as the grader runs a lab.

Unmarked tests read executed notebooks built in memory (no kernel, no Spark). The tests marked
``labs`` run through the grader's own worker for real, one at a time: lab 01's reference (every visible
part passes, a test cell it edited is put back), the blank lab as released (each part fails with its
message) and a lab that hangs (reported as timed out at a small whole-notebook limit, with nothing left
running); and small notebooks without Spark: one with partial credit and a cell past the per-cell
limit, scored by nbgrader's gradebook, and one whose kernel kills itself.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import threading
import time
import unicodedata
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
import yaml

from streamlab import grading
from streamlab.grading import bounds
from streamlab.grading.outputs.languages import language_of_bytes
from streamlab.grading.outputs.results import Outcome, Status
from streamlab.grading.selfcheck import (
    SelfCheck,
    changed_locked_cells,
    error_line,
    format_report,
    parts_of,
    run_selfcheck,
)
from streamlab.lessons import mistakes

PASSED, FAILED, TIMED_OUT, NOT_RUN = Outcome.PASSED, Outcome.FAILED, Outcome.TIMED_OUT, Outcome.NOT_RUN
ROOT = Path(__file__).resolve().parents[2]
LAB = "lab01_stateless_vs_stateful"
new_code, new_output = nbformat.v4.new_code_cell, nbformat.v4.new_output


# ----------------------------------------------------------------------------- in memory

def _cell(source: str, grade_id: str | None = None, *, test: bool = False, answer: bool = False,
          points: float = 1, outputs=(), ran: bool = True):
    cell = new_code(source)
    if grade_id:
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "grade": test, "solution": answer,
                                     "locked": not answer, "points": points if test else 0, "schema_version": 3}
    cell.outputs = list(outputs)
    cell.execution_count = 1 if ran else None
    return cell


def _error(ename: str, evalue: str = ""):
    return new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def _executed():
    """A lab as nbgrader leaves it: part A not answered, part B answered but wrong, part C right."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell("spark = sl.spark()", "setup"),
        _cell("def lag_query(r):\n    raise NotImplementedError()", "lag_query", answer=True),
        _cell("lag_rows = run(lag_query(stream))", "part_a_run", outputs=[_error("NotImplementedError")]),
        _cell("assert 'lag' in lag_rows.columns", "test_a1", test=True,
              outputs=[_error("NameError", "name 'lag_rows' is not defined")]),
        _cell("assert len(twice_rows) == 80", "test_a2", test=True, points=2,
              outputs=[_error("NameError", "name 'twice_rows' is not defined")]),
        _cell("counts = run(count(stream))", "part_b_run"),
        _cell("assert counts == {'/a': 2}", "test_b", test=True, points=2,
              outputs=[_error("AssertionError", "expected {'/a': 2}, got {'/a': 1}\nmore detail")]),
        _cell("print('fine')", "test_b2", test=True,
              outputs=[new_output("stream", name="stderr", text="Traceback...\nUserWarning: careful\n")]),
        _cell("restart = run(again())", "part_c_run"),
        _cell("print('Part C ok')", "test_c", test=True, outputs=[new_output("stream", name="stdout", text="ok\n")]),
        _cell("q.awaitTermination()", "test_d", test=True, outputs=[_error("CellTimeoutError")]),
    ]
    return nb


# the points nbgrader's gradebook gives _executed()'s test cells
SCORES = {"test_a1": 0, "test_a2": 0, "test_b": 0, "test_b2": 0, "test_c": 1, "test_d": 0}


def test_each_part_with_its_outcome_message_and_cell():
    parts = {p.grade_id: p for p in parts_of(_executed(), scores=SCORES, cell_timeout_s=300)}
    assert list(parts) == ["test_a1", "test_a2", "test_b", "test_b2", "test_c", "test_d"]
    assert [p.points for p in parts.values()] == [1, 2, 2, 1, 1, 1]
    # a NameError in a test comes from an earlier cell that raised: that cell is named, with its error
    for gid in ("test_a1", "test_a2"):
        assert (parts[gid].outcome, parts[gid].cell) == (FAILED, "part_a_run")
        assert parts[gid].message == "NotImplementedError: lag_query is not answered yet"
    # an assertion is the test's own verdict: its message (first line), in the test cell
    assert (parts["test_b"].outcome, parts["test_b"].cell) == (FAILED, "test_b")
    assert parts["test_b"].message == "expected {'/a': 2}, got {'/a': 1}"
    assert parts["test_b2"].outcome == FAILED and "stderr" in parts["test_b2"].message
    assert "UserWarning: careful" in parts["test_b2"].message
    assert (parts["test_c"].outcome, parts["test_c"].message, parts["test_c"].cell) == (PASSED, "", "")
    assert (parts["test_d"].outcome, parts["test_d"].cell) == (TIMED_OUT, "test_d")
    assert "300" in parts["test_d"].message


def test_a_run_stopped_at_the_whole_notebook_limit():
    nb = _executed()
    nb.cells.insert(1, _cell("while True: pass", ran=False))   # a learner's cell, no grade id
    for cell in nb.cells[2:]:
        cell.outputs, cell.execution_count = [], None
    parts = parts_of(nb, stopped=(TIMED_OUT, "still running when the time for the whole notebook (60 s) ran out"))
    assert (parts[0].outcome, parts[0].cell) == (TIMED_OUT, "cell 2")
    assert "60 s" in parts[0].message
    assert all(p.outcome == NOT_RUN and "not reached" in p.message for p in parts[1:])


def test_a_test_cell_gets_the_points_nbgrader_gave_it():
    """The gradebook's points decide: a test cell that ran without an error but got fewer (nbgrader reads a number
    it ends with as partial credit) fails, saying so. (Through nbgrader for real: the small notebooks below.)"""
    def value(text):
        return new_output("execute_result", data={"text/plain": text}, execution_count=1)
    nb = nbformat.v4.new_notebook()
    nb.cells = [_cell("score_part()", "test_partial", test=True, points=2, outputs=[value("0.5")]),
                _cell("score_part()", "test_too_much", test=True, points=1, outputs=[value("3")]),
                _cell("'fine'", "test_text", test=True, points=1, outputs=[value("'fine'")])]
    parts = {p.grade_id: p for p in parts_of(nb, scores={"test_partial": 0.5, "test_too_much": 0, "test_text": 1})}
    assert (parts["test_partial"].outcome, parts["test_partial"].earned) == (FAILED, 0.5)
    assert "0.5 of 2 points" in parts["test_partial"].message and parts["test_partial"].cell == "test_partial"
    assert (parts["test_too_much"].outcome, parts["test_too_much"].earned) == (FAILED, 0.0)
    assert (parts["test_text"].outcome, parts["test_text"].earned) == (PASSED, 1.0)
    report = format_report(SelfCheck("lab.ipynb", Status.GRADED, list(parts.values())))
    assert "Visible tests: 1.50 of 4 points pass; 2 part(s) to fix." in report
    withdrawn = parts_of(nb, scores={"test_text": 0}, withdrawn={"test_text": "not confirmed by the hidden check x: y"})
    assert (withdrawn[2].outcome, withdrawn[2].message) == (FAILED, "not confirmed by the hidden check x: y")
    unscored = parts_of(nb, scores=None)  # a run the grader could not score (crashed): each part as it ran, no points
    assert [p.outcome for p in unscored] == [PASSED] * 3 and sum(p.earned for p in unscored) == 0


def test_a_catalogued_mistake_is_told_in_the_courses_words():
    """The kernel put the course's paragraph first (streamlab.lessons.mistakes.show_first, tested in a kernel by
    tests/lessons/test_mistakes.py): the self-check names the run cell with that paragraph, not Spark's words."""
    said = "`Alarm.handleExpiredTimer` (cell In[9], line 12) returned nothing (None). (More: docs/mistakes.md#x.)"
    spark = "StreamingQueryException: [STREAM_FAILED] ... [FOREACH_BATCH_USER_FUNCTION_ERROR] ..."
    failed = new_output("error", ename="StreamingQueryException", evalue=spark.split(": ", 1)[1],
                        traceback=[*mistakes.framed(said), "---", spark])
    nb = nbformat.v4.new_notebook()
    nb.cells = [_cell("alarms = run(silence_alarms(readings))", "part_c_run", outputs=[failed]),
                _cell("assert len(alarms) == 4", "test_c", test=True,
                      outputs=[_error("NameError", "name 'alarms' is not defined")])]
    [part] = parts_of(nb, scores={"test_c": 0})
    assert (part.outcome, part.cell, part.message) == (FAILED, "part_c_run", said)
    assert error_line(failed) == said
    assert error_line({"ename": "StreamingQueryException", "evalue": "x", "traceback": [spark]}) == \
        "StreamingQueryException: x"


def test_error_lines():
    assert error_line({"ename": "ValueError", "evalue": "bad\nsecond line"}) == "ValueError: bad"
    assert error_line({"ename": "AssertionError", "evalue": ""}) == "AssertionError (an assert without a message)"
    assert error_line({"ename": "KeyError", "evalue": ""}) == "KeyError"


def test_edited_and_missing_tests_are_named():
    released = _executed()
    mine = _executed()
    mine.cells[6].source = "pass  # my test now passes"
    mine.cells[6].metadata.nbgrader["points"] = 100
    del mine.cells[9]   # test_c deleted
    notes = changed_locked_cells(mine, released)
    assert any(n.startswith("test_b:") and "original" in n for n in notes), notes
    assert any(n.startswith("test_c:") and "missing" in n for n in notes), notes
    assert len(notes) == 2, notes  # answers are the learner's own: no note on them


def test_the_table():
    result = SelfCheck("lab.ipynb", Status.GRADED, parts_of(_executed(), scores=SCORES, cell_timeout_s=300), seconds=61,
                       notes=["test_b: you changed this locked cell; the original is used"])
    text = format_report(result, message_width=40)
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("part"))
    assert header.split() == ["part", "points", "result", "failed", "in"]
    row = next(line for line in lines if line.startswith("test_a2"))
    assert row.split()[1] == "2" and "failed: NotImplementedError" in row and row.endswith("part_a_run")
    assert "..." in row  # long messages are cut to the width
    assert next(line for line in lines if line.startswith("test_c")).split()[1:] == ["1", "passed"]
    assert "Visible tests: 1 of 8 points pass; 5 part(s) to fix." in text
    assert "Note: test_b: you changed" in text and "checks what each part left behind" in text
    assert "hidden tests" not in text, "no lab has hidden tests"
    assert result.exit_code == 1 and not result.passed
    all_pass = SelfCheck("lab.ipynb", Status.GRADED, [p for p in result.parts if p.outcome == PASSED])
    assert all_pass.passed and all_pass.exit_code == 0


def test_the_table_in_the_notebooks_language():
    """A lab of the course in Chinese gets its report in Chinese: the grader's words, not the learner's or Python's."""
    assert language_of_bytes((ROOT / "zh" / "labs" / LAB / f"{LAB}.ipynb").read_bytes()) == "zh"
    assert language_of_bytes((ROOT / "labs" / LAB / f"{LAB}.ipynb").read_bytes()) == "en"
    result = SelfCheck("lab.ipynb", Status.TIMED_OUT, parts_of(_executed(), scores=SCORES, cell_timeout_s=300),
                       seconds=61, notes=["test_b: you changed this locked cell; the original is used"], language="zh",
                       limits="时间限制：总共 900 秒，每个单元格 300 秒")
    text = format_report(result, message_width=40)
    lines = text.splitlines()
    assert lines[0] == "自检 lab.ipynb（61 秒；时间限制：总共 900 秒，每个单元格 300 秒；只有可见的测试）"
    header = next(line for line in lines if line.startswith("部分"))
    assert header.split() == ["部分", "分数", "结果", "出错的单元格"]
    row = next(line for line in lines if line.startswith("test_a2"))
    assert "未通过: NotImplementedError" in row and row.endswith("part_a_run")   # Python's words stay
    def column(line: str, word: str) -> int:  # where ``word`` starts on screen: a Chinese character is two wide
        return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line[:line.index(word)])
    assert column(header, "结果") == column(row, "未通过")
    assert column(header, "出错的单元格") == column(row, "part_a_run")
    assert next(line for line in lines if line.startswith("test_c")).split()[1:] == ["1", "通过"]
    assert "可见的测试：共 8 分，通过 1 分；还有 5 个部分要修改。" in text
    assert "运行没有正常结束（超时）" in text and "注意：test_b: you changed" in text
    assert not re.search(r"\b(part|points|passed|Visible|Note)\b", text.replace("test_b: you changed", ""))


def test_a_file_that_is_no_notebook_is_said_plainly(tmp_path):
    path = tmp_path / "lab.ipynb"
    path.write_text("{ a broken download")
    result = run_selfcheck(path)
    assert (result.status, result.exit_code) == ("invalid notebook", 2)
    assert "not JSON" in format_report(result)
    assert path.read_text() == "{ a broken download"


def _a_test_cell_made_an_answer(lab: Path, tmp_path: Path):
    """A copy of ``lab`` in ``tmp_path`` whose first test cell a learner made an answer cell and emptied (nbgrader puts
    a locked cell's source back, not its flags); and that cell."""
    nb = nbformat.read(lab, as_version=4)
    test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code")
    test.metadata.nbgrader["solution"] = True
    test.source = "pass  # my own test, always passing"
    path = tmp_path / f"{LAB}.ipynb"
    nbformat.write(nb, path)
    return path, test


def test_a_notebook_the_grader_refuses_is_refused_here_too(tmp_path):
    """The self-check is the grader built for one submission, so it refuses what `streamlab grade` refuses, before
    a cell runs: here a test cell made an answer cell and emptied (nbgrader puts a locked cell's source back, not
    its flags). The self-check that redid the grader's steps its own way never read the cells' flags: nbgrader's
    autograde failed on this notebook, and the learner read "grader error" and "this test cell is missing from your
    notebook" for a cell that is there, never what they changed."""
    path, test = _a_test_cell_made_an_answer(ROOT / "labs" / LAB / f"{LAB}.ipynb", tmp_path)
    result = run_selfcheck(path, bootstrap="127.0.0.1:1")  # nothing answers there: nothing may run
    assert (result.status, result.exit_code, result.parts) == ("invalid notebook", 2, []), result
    grade_id = test.metadata.nbgrader["grade_id"]
    assert f"the lab's test cell {grade_id!r} has solution: true (the lab's: false)" in format_report(result)


def test_a_refusal_names_the_learners_file_not_the_checks_copy(tmp_path):
    """The check runs a copy named after the lab; a refusal that named the copy told a learner who saved the lab as
    mine.ipynb about a file they never had."""
    path, test = _a_test_cell_made_an_answer(ROOT / "labs" / LAB / f"{LAB}.ipynb", tmp_path)
    mine = path.rename(tmp_path / "mine.ipynb")
    result = run_selfcheck(mine, bootstrap="127.0.0.1:1")
    assert result.status == "invalid notebook", result
    assert result.detail.startswith("mine.ipynb: its nbgrader cells differ from the lab's"), result.detail
    assert f"{LAB}.ipynb" not in format_report(result)



@pytest.mark.parametrize("given, says, names", [
    ("lab01", "lab01 is not a file: check your lab notebook by its path,", [f"labs/{LAB}/{LAB}.ipynb"]),
    (f"labs/{LAB}", f"labs/{LAB} is a folder: check the notebook in it,", [f"labs/{LAB}/{LAB}.ipynb"]),
    ("lab0", "lab0 is not a file", [f"labs/{lab}/{lab}.ipynb" for lab in grading.find_labs()]),
    ("nope.ipynb", "nope.ipynb: no such file. `streamlab check` takes the path of your lab notebook", []),
])
def test_a_lab_typed_by_name_or_folder_is_told_the_notebook_to_check(given, says, names, monkeypatch, capsys):
    """`streamlab grade` takes a lab's name ("lab01"), so a learner types it to `streamlab check` too, or the lab's
    folder: they were told "Running a copy of lab01 ..." then "Could not check it: lab01 is missing" (or a folder
    "is not a submission"). Now the slip comes first, with the command that checks their notebook, and nothing runs."""
    from streamlab.grading.cli import cmd_check

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")  # the learner's locale decides the words: English here
    args = SimpleNamespace(notebook=given, timeout=60.0, cell_timeout=None, hidden_checks=False)
    assert cmd_check(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"streamlab check: {says}"), (out, err)
    assert [line.strip() for line in err.splitlines()[1:]] == [f"streamlab check {name}" for name in names]



def test_a_lab_typed_by_name_names_the_learners_copy_not_the_courses(tmp_path, monkeypatch):
    """On a hub the lab is handed out into the student's labs/<lab>/; the course's own copy is blank."""
    from streamlab.grading.selfcheck import not_a_notebook

    lab = "lab02_keyed_state"
    (tmp_path / "labs" / lab).mkdir(parents=True)
    (tmp_path / "labs" / lab / f"{lab}.ipynb").write_bytes((ROOT / "labs" / lab / f"{lab}.ipynb").read_bytes())
    monkeypatch.chdir(tmp_path)
    assert not_a_notebook("lab02").splitlines()[1:] == [f"  streamlab check labs/{lab}/{lab}.ipynb"]
    other = "lab03_state_backends"  # none of the learner's here: the course's
    assert not_a_notebook("lab03").splitlines()[1:] == [f"  streamlab check {ROOT}/labs/{other}/{other}.ipynb"]
    assert not_a_notebook(f"labs/{lab}/{lab}.ipynb") is None

def test_a_lab_typed_by_name_in_a_chinese_locale_is_told_in_chinese_with_the_chinese_lab_first(monkeypatch, capsys):
    from streamlab.grading.cli import cmd_check

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("LC_ALL", "zh_CN.UTF-8")
    lab = "lab05_offset_replay"
    assert cmd_check(SimpleNamespace(notebook="lab05", timeout=60.0, cell_timeout=None, hidden_checks=False)) == 2
    first, *commands = capsys.readouterr().err.splitlines()
    assert first == "streamlab check: lab05 不是一个文件：请用实验 notebook 的路径来检查，"
    assert [c.strip() for c in commands] == [f"streamlab check zh/labs/{lab}/{lab}.ipynb",
                                             f"streamlab check labs/{lab}/{lab}.ipynb"]

def test_a_chinese_notebook_is_told_in_chinese_from_the_first_line(tmp_path, monkeypatch, capsys):
    """`streamlab check` on a lab of the course in Chinese: the line before the run and the report are in Chinese,
    the grader's reason (a flag the learner changed) as the grader says it."""
    from streamlab.grading.cli import cmd_check

    path, _ = _a_test_cell_made_an_answer(ROOT / "zh" / "labs" / LAB / f"{LAB}.ipynb", tmp_path)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")  # nothing answers there: nothing may run
    args = SimpleNamespace(notebook=str(path), timeout=60.0, cell_timeout=None, hidden_checks=False)
    assert cmd_check(args) == 2
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("正在一个全新的内核中从头运行") and lines[1].startswith("自检 ")
    assert any(line.startswith("无法检查：") and "has solution: true" in line for line in lines), lines


def test_the_command_uses_the_graders_limits():
    from streamlab.cli import build_parser

    args = build_parser().parse_args(["check", "x.ipynb"])
    assert (args.timeout, args.cell_timeout) == (bounds.SUBMISSION_TIMEOUT_S, None)  # None: nbgrader_config's
    proc = subprocess.run([sys.executable, "-m", "streamlab", "check", str(ROOT / "no-such.ipynb")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "no-such.ipynb: no such file" in proc.stderr, proc.stdout + proc.stderr


def test_the_docker_stack_gives_the_check_what_it_needs():
    """In the jupyter service, `streamlab check` finds Kafka the way the notebooks do
    (KAFKA_BOOTSTRAP_SERVERS) and the released labs under its working folder (the repository)."""
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    jupyter = compose["services"]["jupyter"]
    assert jupyter["environment"]["KAFKA_BOOTSTRAP_SERVERS"], "the notebooks' Kafka"
    assert f"..:{jupyter['working_dir']}" in jupyter["volumes"], "the repository (labs/ included) is the working folder"
    check, grader = ((ROOT / "streamlab" / "grading" / path).read_text() for path in ("selfcheck.py", "run/grader.py"))
    assert "bootstrap=bootstrap" in check and "bootstrap or bootstrap_servers()" in grader, "the grader's own Kafka"
    assert not any(host in text for host in ("127.0.0.1", "localhost") for text in (check, grader))


@pytest.mark.labs
@pytest.mark.timeout(300)
def test_partial_credit_a_slow_cell_and_a_crash_in_small_notebooks(tmp_path, kafka_bootstrap):
    """No Spark, but a real kernel and nbgrader's autograde in the grader's worker (so in the full tier). The
    gradebook scores: a test cell ending with 0.5 earns half a point of 2; a cell past the per-cell limit is
    interrupted and reported as timed out, the cells after it still count. Then a kernel that kills itself:
    crashed, the cell that did it named, and no points (as the grader gives)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [_cell("x = 1", "t_setup", ran=False), _cell("assert x == 1", "t_ok", test=True, ran=False),
                _cell("0.25 * 2", "t_partial", test=True, points=2, ran=False),
                _cell("import time\ntime.sleep(60)", "t_slow", test=True, ran=False),
                _cell("assert True", "t_after", test=True, ran=False)]
    path = tmp_path / "small.ipynb"
    nbformat.write(nb, path)
    result = run_selfcheck(path, cell_timeout_s=3, timeout_s=120)
    print(format_report(result))
    parts = {p.grade_id: p for p in result.parts}
    assert (result.status, result.exit_code) == ("timed out", 1), result
    assert [(parts[g].outcome, parts[g].earned) for g in ("t_ok", "t_partial", "t_slow", "t_after")] == \
        [(PASSED, 1), (FAILED, 0.5), (TIMED_OUT, 0), (PASSED, 1)]
    assert parts["t_partial"].message.startswith("nbgrader gives this cell 0.5 of 2 points")
    assert parts["t_slow"].cell == "t_slow"
    assert any("no released lab" in note for note in result.notes)

    nb.cells.insert(4, _cell("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", ran=False))
    nbformat.write(nb, path)
    result = run_selfcheck(path, cell_timeout_s=3, timeout_s=120)
    print(format_report(result))
    parts = {p.grade_id: p for p in result.parts}
    assert (result.status, result.exit_code) == ("crashed", 1), result
    assert parts["t_ok"].outcome == PASSED and sum(p.earned for p in result.parts) == 0
    assert (parts["t_after"].outcome, parts["t_after"].cell) == (FAILED, "cell 5")
    assert "DeadKernelError" in parts["t_after"].message
    assert "The grader scores such a run 0" in format_report(result)


# ----------------------------------------------------------------------------- running lab 01

def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def run_tag(monkeypatch, kafka_bootstrap):
    """The tag the check's processes carry; afterwards: they carried it (a JVM among them), and none is left."""
    from streamlab.grading.sandbox.isolation import tagged_processes

    tag = f"sc{os.getpid()}-{time.monotonic_ns() % 10**6}"
    monkeypatch.setenv("STREAMLAB_GRADE_RUN_TAG", tag)
    seen, stop = set(), threading.Event()

    def watch():
        while not stop.wait(2):
            for proc in tagged_processes(tag, prefix=True):
                try:
                    seen.add(proc.name())
                except Exception:  # gone meanwhile
                    pass

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    yield tag
    stop.set()
    watcher.join()
    assert "java" in seen, f"no Spark JVM carried the check's tag: {seen}"
    assert grading.leftover_processes(tag) == [], "the check left processes running"
    import streamlab as sl

    assert [t for t in sl.list_topics() if t.startswith(tag)] == [], "the check left topics behind"


@pytest.mark.labs
@pytest.mark.timeout(900)
def test_reference_passes_every_part_and_every_hidden_check(tmp_path, run_tag):
    """A lab author's run (--hidden-checks: the course from solutions/, the lab's hidden checks after the notebook,
    as the grader runs them): the reference passes every part and every check. A test cell it made fail is put
    back by nbgrader's autograde (as the grader does), and the table says so."""
    path = tmp_path / "my_lab01.ipynb"
    nb = grading.reference_notebook(LAB)
    edited = next(c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade"))
    edited.source = "raise AssertionError('my edit makes this test fail')"
    nbformat.write(nb, path)
    before = _snapshot(tmp_path)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "streamlab", "check", str(path), "--hidden-checks"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=bounds.SUBMISSION_TIMEOUT_S + 60)
    print(proc.stdout, f"({time.monotonic() - started:.0f} s)")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    tests = [c.metadata.nbgrader.grade_id for c in grading.released_notebook(LAB).cells if
             c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    for gid in tests:
        row = next((line for line in proc.stdout.splitlines() if line.startswith(gid + " ")), None)
        assert row is not None and row.split()[2] == "passed", proc.stdout
    assert "Tests and hidden checks: 10 of 10 points pass." in proc.stdout
    checks = [line for line in proc.stdout.splitlines() if line.startswith("  ") and "(cells " in line]
    assert len(checks) == 5 and all(": passed (cells" in line for line in checks), proc.stdout
    assert f"Note: {edited.metadata.nbgrader.grade_id}: you changed this locked cell" in proc.stdout
    assert _snapshot(tmp_path) == before, "the learner's file is untouched and nothing is written next to it"


@pytest.mark.labs
@pytest.mark.timeout(900)
def test_blank_lab_fails_each_part_with_its_message(run_tag):
    """The blank lab in Chinese (zh/labs/): the same parts fail with the same messages as the English would, no
    translated instruction is taken for a locked cell the learner changed, and the report is in Chinese."""
    path = ROOT / "zh" / "labs" / LAB / f"{LAB}.ipynb"
    before = _snapshot(path.parent)
    result = run_selfcheck(path)
    print(format_report(result))
    assert result.language == "zh" and "可见的测试：共 " in format_report(result)
    assert result.status is Status.GRADED and result.exit_code == 1
    assert result.parts and all(p.outcome == FAILED and p.message and p.cell for p in result.parts), result.parts
    first = result.parts[0]
    assert (first.cell, first.message) == ("part_a_run", "NotImplementedError: lag_alerts is not answered yet"), first
    assert {p.cell for p in result.parts} >= {"part_a_run", "part_b_run", "part_c_run"}
    assert result.notes == []
    assert _snapshot(path.parent) == before


HANG = """
endless = spark.readStream.format("rate").load().writeStream.format("noop").trigger(processingTime="5 seconds").start()
endless.awaitTermination()  # never returns
"""


@pytest.mark.labs
@pytest.mark.timeout(600)
def test_a_hanging_lab_is_reported_as_timed_out(tmp_path, run_tag):
    nb = grading.reference_notebook(LAB)
    setup = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells.insert(setup + 1, new_code(HANG.strip()))
    path = tmp_path / "hanging.ipynb"
    nbformat.write(nb, path)
    limit = 100  # a Spark start (10-60 s on a busy 2-core machine), then the hang
    started = time.monotonic()
    result = run_selfcheck(path, timeout_s=limit)
    seconds = time.monotonic() - started
    print(format_report(result), f"({seconds:.0f} s)")
    assert result.status == "timed out" and result.exit_code == 1   # stopped by the limit, reported as such
    first, *rest = result.parts
    assert (first.outcome, first.cell) == (TIMED_OUT, f"cell {setup + 2}"), first
    assert all(p.outcome == NOT_RUN for p in rest)
    assert "timed out" in format_report(result)
