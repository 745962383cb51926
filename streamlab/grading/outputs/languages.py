"""The grader's words a learner reads, in the learner's language: English, or Simplified Chinese for a notebook of the
course in Chinese (``zh/labs/``: its metadata says ``"streamlab": {"language": "zh"}``). A student's own words, a
check's detail and Python's errors stay as they were written; the grader's fixed words (a status, how a part went,
the self-check's report) are said in the notebook's language."""
from __future__ import annotations

import json
import re
from pathlib import Path

from .results import Outcome, Status

LANGUAGES = ("en", "zh")

STATUS_IN_CHINESE = {Status.GRADED: "已评分", Status.TIMED_OUT: "超时", Status.CRASHED: "崩溃",
                     Status.INVALID: "无效的 notebook", Status.LIMIT: "超出限制", Status.ERROR: "评分器出错"}
OUTCOME_IN_CHINESE = {Outcome.PASSED: "通过", Outcome.FAILED: "未通过", Outcome.TIMED_OUT: "超时",
                      Outcome.NOT_RUN: "未运行"}

# ``streamlab check``'s report (``selfcheck.format_report``)
SELF_CHECK = {
    "en": {
        "running": "Running a copy of {notebook} from the top in a fresh kernel, as the grader will (your file is not "
                   "changed) ...",
        "title": "Self-check of {notebook} ({seconds:.0f} s{limits}; {scope})",
        "limits": "limits: {whole:g} s in all, {cell:g} s per cell", "then": "; ",
        "scope_checks": "tests and hidden checks, from solutions/", "scope_visible": "visible tests only",
        "cannot": "Could not check it: {detail}",
        "header": ["part", "points", "result", "failed in"],
        "checks": "Hidden checks (the grader's, run on what the notebook left):",
        "check_cells": "cells {cells}",
        "what_checks": "Tests and hidden checks", "what_visible": "Visible tests",
        "total": "{what}: {earned} of {total} points pass", "todo": "; {todo} part(s) to fix.", "done": ".",
        "abnormal": "The run did not end normally ({status}): {detail}",
        "scored_zero": "The grader scores such a run 0: the parts said passed above ran, but earn nothing.",
        "note": "Note: {note}",
        "more": "The grader also checks what each part left behind (its checkpoints, state and topics) against "
                "results it computes itself, so passing here is needed for full marks but does not promise them.",
        "not_a_file": "{given} is not a file: check your lab notebook by its path,",
        "folder": "{given} is a folder: check the notebook in it,",
        "empty_folder": "{given} is a folder with no notebook in it: give the path of your lab notebook",
        "no_such_file": "{given}: no such file. `streamlab check` takes the path of your lab notebook (the labs are in "
                        "{labs}/<lab>/)",
        "and_more": "(and {count} more)",
    },
    "zh": {
        "running": "正在一个全新的内核中从头运行 {notebook} 的一份副本，和评分器的做法一样（你的文件不会被修改）……",
        "title": "自检 {notebook}（{seconds:.0f} 秒{limits}；{scope}）",
        "limits": "时间限制：总共 {whole:g} 秒，每个单元格 {cell:g} 秒", "then": "；",
        "scope_checks": "测试和隐藏检查，来自 solutions/", "scope_visible": "只有可见的测试",
        "cannot": "无法检查：{detail}",
        "header": ["部分", "分数", "结果", "出错的单元格"],
        "checks": "隐藏检查（评分器的检查，针对 notebook 运行后留下的结果）：",
        "check_cells": "单元格 {cells}",
        "what_checks": "测试和隐藏检查", "what_visible": "可见的测试",
        "total": "{what}：共 {total} 分，通过 {earned} 分", "todo": "；还有 {todo} 个部分要修改。", "done": "。",
        "abnormal": "运行没有正常结束（{status}）：{detail}",
        "scored_zero": "评分器给这样的运行 0 分：上面标为通过的部分虽然运行了，但不得分。",
        "note": "注意：{note}",
        "more": "评分器还会把每个部分留下的东西（检查点、状态和 Kafka 主题）与它自己算出的结果对照，"
                "所以在这里通过是拿满分的前提，但并不保证满分。",
        "not_a_file": "{given} 不是一个文件：请用实验 notebook 的路径来检查，",
        "folder": "{given} 是一个文件夹：请检查其中的 notebook，",
        "empty_folder": "{given} 是一个文件夹，里面没有 notebook：请给出你的实验 notebook 的路径",
        "no_such_file": "{given}：没有这个文件。`streamlab check` 需要你的实验 notebook 的路径"
                        "（实验在 {labs}/<实验>/ 中）",
        "and_more": "（还有 {count} 个）",
    },
}


# The feedback pages' own words (``feedback.status_page``, ``verdicts.summary_html``): what nbgrader's template says
# (its score lines) stays nbgrader's.
FEEDBACK = {
    "en": {
        "lang": "en", "colon": ":", "student": "Student", "status": "Status", "score": "Score", "details": "Details",
        "again": "Before submitting again: restart the kernel and run all cells (Kernel &rarr; Restart Kernel and Run "
                 "All Cells), and check that every cell finishes.",
        "checked": "Checked by the grader",
        "checked_why": "After your notebook ran, the grader checked what each part left behind (its checkpoints and "
                       "Kafka topics). A test cell earns its points only if these checks confirm it.",
        "columns": ["check", "test cells", "result"],
        "trace_title": "{title}: your state, batch by batch",
        "matched": "Your state matched the reference's after every batch.",
        "diverged": "Your state diverged from the reference's at batch {batch}",
        "trace_why": "Read by the grader from your checkpoint as of each batch; the reference is the right state for "
                     "the records each of your batches read.",
        "trace_columns": ["batch", "your rows", "reference rows", "keys that differ", "first difference"],
    },
    "zh": {
        "lang": "zh-Hans", "colon": "：", "student": "学生", "status": "状态", "score": "分数", "details": "详情",
        "again": "再次提交之前：重启内核并运行全部单元格（Kernel &rarr; Restart Kernel and Run All Cells），"
                 "确认每个单元格都能运行完。",
        "checked": "评分器的检查",
        "checked_why": "你的 notebook 运行之后，评分器检查了每个部分留下的东西（它的检查点和 Kafka 主题）。"
                       "只有这些检查确认了，一个测试单元格才得分。",
        "columns": ["检查", "测试单元格", "结果"],
        "trace_title": "{title}：你的状态，逐批次",
        "matched": "每个批次之后，你的状态都与参考答案一致。",
        "diverged": "你的状态在第 {batch} 批与参考答案出现了分歧",
        "trace_why": "评分器从你的检查点读出每个批次时的状态；参考答案是你的每个批次所读到的记录应得的正确状态。",
        "trace_columns": ["批次", "你的行数", "参考答案的行数", "不同的键数", "第一处不同"],
    },
}

STATUS_EXPLANATIONS_IN_CHINESE = {
    Status.TIMED_OUT: "你的 notebook 没有在整份提交允许的时间内运行完，所以无法评分。请找一个永远不返回的单元格："
                      "一个没有设超时而一直等待的流式查询（不带超时的 awaitTermination()）、一个永不结束的查询，"
                      "或一个死循环。",
    Status.CRASHED: "你的 notebook 让运行它的 Python 内核停止了（例如 os._exit()、在派生进程里调用 sys.exit()、"
                    "进程被杀掉，或内存耗尽），所以无法评分。",
    Status.INVALID: "你提交的文件无法作为这个实验的 Jupyter notebook 读取。",
    Status.LIMIT: "你的 notebook 碰到了每份提交都要遵守的某项限制（上面的详情说明了是哪一项：内存、进程数、CPU 时间或"
                  "磁盘），所以被停止，无法评分。实验的参考答案只用了每一项的一小部分。",
    Status.ERROR: "评分器在处理你的提交时出错了，原因不在你。你的老师已经得到通知，会重新评分。",
}

# nbgrader's feedback template's own words (its score lines, its labels), as a Chinese page says them: the template is
# made from the installed nbgrader's own (``chinese_feedback_template``), so it follows nbgrader's version
FEEDBACK_TEMPLATE_IN_CHINESE = [
    ("<html>", '<html lang="zh-Hans">'), ("Score: ", "得分："), (">Test cell<", ">测试单元格<"),
    (">Coding free-response<", ">编程作答<"), (">Written response<", ">书面作答<"), (">Task<", ">任务<"),
    (">Comment<", ">评语<"), ("Late submission penalty", "迟交扣分"), ("(Top)", "（回到顶部）"),
    ("Student's answer", "你的答案"), ("Student's task", "你的任务"), ("Grade cell: ", "评分单元格："),
    ("Task: <code>", "任务：<code>"), ("<b>Comments:</b>", "<b>评语：</b>"),
]
FEEDBACK_TEMPLATE = "feedback_zh"


def nbgrader_feedback_template() -> Path:
    """nbgrader's own feedback template (the page generate_feedback writes)."""
    import nbgrader

    return Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates" / "feedback"


def chinese_feedback_template(folder: Path) -> bool:
    """nbgrader's feedback template with its words in Chinese, written as ``folder``/feedback_zh/ (a template folder
    for nbconvert's ``extra_template_basedirs``); False, and nothing written, when the installed nbgrader's template
    does not hold every word (a new nbgrader: its pages stay English until the table follows)."""
    english = nbgrader_feedback_template()
    text = (english / "index.html.j2").read_text(encoding="utf-8")
    if not all(word in text for word, _ in FEEDBACK_TEMPLATE_IN_CHINESE):
        return False
    for word, chinese in FEEDBACK_TEMPLATE_IN_CHINESE:
        text = text.replace(word, chinese)
    target = Path(folder) / FEEDBACK_TEMPLATE
    target.mkdir(parents=True, exist_ok=True)
    (target / "index.html.j2").write_text(text, encoding="utf-8")
    (target / "conf.json").write_text(json.dumps(json.loads((english / "conf.json").read_text())), encoding="utf-8")
    return True


# A notebook of the course in Chinese says so in its metadata, as ``translations.in_chinese`` writes it
_CHINESE = re.compile(rb'"streamlab"\s*:\s*\{\s*"language"\s*:\s*"zh"\s*\}')


def language_of_bytes(data: bytes) -> str:
    """The language of a submitted notebook's bytes, read without parsing them (the grader reads a refused file's
    words too, and never parses what it refused): "zh" when its metadata is the course in Chinese's, else "en". A
    notebook can claim either; the language only chooses the grader's words, never a score."""
    return "zh" if _CHINESE.search(data) else "en"


def said(word: Status | Outcome | str, language: str) -> str:
    """A status or an outcome as the grader says it in ``language`` (anything else as it is)."""
    if language == "zh":
        return STATUS_IN_CHINESE.get(word) or OUTCOME_IN_CHINESE.get(word) or str(word)
    return str(word)
