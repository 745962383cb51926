"""The grader's words a learner reads, in the learner's language: English, or Simplified Chinese for a notebook of the
course in Chinese (``zh/labs/``: its metadata says ``"streamlab": {"language": "zh"}``). A student's own words, a
check's detail and Python's errors stay as they were written; the grader's fixed words (a status, how a part went,
the self-check's report) are said in the notebook's language."""
from __future__ import annotations

from .results import Outcome, Status

LANGUAGES = ("en", "zh")

STATUS_IN_CHINESE = {Status.GRADED: "已评分", Status.TIMED_OUT: "超时", Status.CRASHED: "崩溃",
                     Status.INVALID: "无效的 notebook", Status.LIMIT: "超出限制", Status.ERROR: "评分器出错"}
OUTCOME_IN_CHINESE = {Outcome.PASSED: "通过", Outcome.FAILED: "未通过", Outcome.TIMED_OUT: "超时",
                      Outcome.NOT_RUN: "未运行"}

# ``streamlab check``'s report (``selfcheck.format_report``)
SELF_CHECK = {
    "en": {
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
    },
    "zh": {
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
    },
}


def language_of(nb) -> str:
    """The language a notebook of the course is in: "zh" for the course in Chinese, else "en"."""
    metadata = nb.get("metadata", {}) if isinstance(nb, dict) else {}
    course = metadata.get("streamlab") if isinstance(metadata, dict) else None
    return "zh" if isinstance(course, dict) and course.get("language") == "zh" else "en"


def said(word: Status | Outcome | str, language: str) -> str:
    """A status or an outcome as the grader says it in ``language`` (anything else as it is)."""
    if language == "zh":
        return STATUS_IN_CHINESE.get(word) or OUTCOME_IN_CHINESE.get(word) or str(word)
    return str(word)
