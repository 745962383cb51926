"""A red run explains itself (a plugin: conftest.py loads it with ``pytest_plugins``).

When tests fail, the last screen of the run names every failing test with its first error line, the
grader's rows for each failed lab grading (every student: status, score, seconds and the grader's
``detail``) and where the run's logs are kept; the same text is written to ``failures.txt`` in the kept
run folder. Under pytest-xdist this runs in the controller, from the reports the workers send.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

GRADING_FIXTURES = ("graded", "robust")  # tests/grading/test_grade_labs.py: one grader run per lab
DETAIL_CHARS = 240


EXCEPTION_LINE = re.compile(r"^\s*[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Timeout)\b.*")


def first_error_line(report) -> str:
    """The first line of what went wrong: the exception's message, else the last line of the report. A message
    that is a traceback (say, a child process's stderr) is named by its last exception line."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "(no message)"
    if crash is None:
        return lines[-1]
    head, traceback, _ = lines[0].partition("Traceback (most recent call last):")
    if traceback:
        raised = [line.strip() for line in text.splitlines()[1:] if EXCEPTION_LINE.match(line)]
        if raised:
            return f"{head}{raised[-1]}"
    return lines[0]


def grading_lines(run: dict) -> list[str]:
    """One line per student of a lab's grader run (grades.csv), with the grader's detail."""
    lines = [f"grading {run['lab']}: exit status {run['proc'].returncode}, {run['seconds']:.0f} s, "
             f"output in {run['out']}"]
    for row in run["rows"].values():
        detail = " ".join((row.get("detail") or "").split())[:DETAIL_CHARS]
        lines.append(f"  {row['student']}: {row['status']}, {row['score']}/{row['max_score']}, "
                     f"{row['seconds']} s{' - ' + detail if detail else ''}")
    if not run["rows"]:
        stderr = (run["proc"].stderr or "").strip().splitlines()
        lines.append(f"  no grades.csv rows; the grader's last words: {stderr[-1] if stderr else '(none)'}")
    return lines


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test of a lab grading carries that grading's rows in its report (sent by xdist)."""
    report = yield
    if report.failed:
        for name in GRADING_FIXTURES:
            run = getattr(item, "funcargs", {}).get(name)
            if isinstance(run, dict) and "rows" in run:
                report.user_properties.append(("grading", "\n".join(grading_lines(run))))
    return report


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # under xdist: the controller, which gets every report
        config.pluginmanager.register(Failures(), "red-run-failures")


def summary_lines(failures: list, kept: str | None) -> list[str]:
    lines, gradings = [], []
    for nodeid, message, grading in failures:
        lines += [nodeid, f"    {message}"]
        if grading and grading not in gradings:
            gradings.append(grading)
    for grading in gradings:
        lines += ["", *grading.splitlines()]
    if kept:
        lines += ["", f"kept for diagnosis: {kept} (broker log, checkpoints, Spark logs, grader output)"]
    return lines


class Failures:
    """Collects the failed reports of one run and prints them last."""

    def __init__(self):
        self.failures: list[tuple[str, str, str | None]] = []  # (test id, first error line, grading rows)

    def pytest_runtest_logreport(self, report):
        if report.failed:
            grading = next((value for key, value in report.user_properties if key == "grading"), None)
            phase = "" if report.when == "call" else f" (in {report.when})"
            self.failures.append((report.nodeid + phase, first_error_line(report), grading))

    @pytest.hookimpl(trylast=True)  # after the slowest durations: right above pytest's short summary
    def pytest_terminal_summary(self, terminalreporter):
        if not self.failures:
            return
        kept = os.environ.get("STREAMLAB_DATA_DIR")
        kept = kept if kept and os.path.isdir(kept) else None
        lines = summary_lines(self.failures, kept)
        terminalreporter.section(f"what failed ({len(self.failures)})", sep="=", red=True, bold=True)
        for line in lines:
            terminalreporter.write_line(line)
        if kept:
            Path(kept, "failures.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
