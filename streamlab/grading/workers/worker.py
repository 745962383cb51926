"""The worker: what runs in the child process that grades submissions.

    python -m streamlab.grading.workers.worker --serve FD [--checks hidden_checks.py --checks-sha256 H]

A warm worker (see ``warm``): it grades the submissions the grader sends it over the channel FD, one
after another, with nbgrader already imported; each request is a ``SubmissionContext`` (``context``),
passed from here on as an argument. Every student still gets a fresh kernel, started with the
submission's environment, and fresh hidden checks in a process of their own (``hidden.ChecksProcess``),
started while the notebook runs.

It runs nbgrader's own ``autograde`` (which puts the original test cells back, then, with the grader's
own steps, takes any hidden test region out (``withhold``) and executes the notebook in a fresh kernel
with a time limit per cell, its outputs bounded) and ``generate_feedback`` in the student's private
course folder, and answers with a ``WorkerReport``. The grader stops it, with everything it started, at
the whole-submission limit. The worker's own environment is never changed: what a submission's processes
need is given to each of them when it starts.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path

from .. import bounds
from ..labs import nbgrader_config, run_converter
from ..outputs.feedback import inert_feedback_pages
from ..outputs.languages import FEEDBACK_TEMPLATE, chinese_feedback_template
from ..outputs.results import CellGrade, CheckResult, Status, WorkerReport
from ..outputs.verdicts import summary_detail
from ..sandbox.box import Sandbox, kernel_output, output_tail, untrusted_folder
from ..sandbox.limits import Limits
from ..sandbox.tenancy import Principal
from ..steps.bounded_execute import BoundedExecute
from ..steps.bounded_kernel_manager import BoundedKernelManager
from ..steps.checks_block import with_checks_block
from ..steps.drop_ungraded_metadata import DropUngradedMetadata
from ..steps.withhold_hidden_tests import WithholdHiddenTests
from .context import SubmissionContext
from .hidden import (
    CHECKS_LIMITS,
    ChecksBroken,
    ChecksProcess,
    checks_work,
    no_extra_credit,
    unconfirmed_cells,
    withdraw_points,
)


def _parse_time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _cell_seconds(cell) -> float | None:
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not start or not end:
        return None
    return (_parse_time(end) - _parse_time(start)).total_seconds()


def _why_autograde_failed(failure: BaseException | None, text: str, cell_timeout: float) -> tuple[Status, str]:
    """The status and detail for an autograde that failed: by the type of the exception that stopped the
    notebook's run (``failure``, as ``BoundedExecute`` caught it), never by words in a log a notebook
    can print into. Only when nothing stopped a run (nbgrader failed before running it), nbgrader's own
    ``text`` tells a notebook it refused (invalid) from its own failure (a grader error, graded again)."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from nbgrader.preprocessors.execute import UnresponsiveKernelError

    if isinstance(failure, DeadKernelError):
        return Status.CRASHED, "the notebook's kernel died while it ran"
    if isinstance(failure, (CellTimeoutError, UnresponsiveKernelError)):
        return Status.TIMED_OUT, (f"a cell was still running after {cell_timeout} s and did not "
                                  f"stop when interrupted")
    if failure is None and any(name in text for name in ("ValidationError", "SchemaTooNew", "SchemaTooOld")):
        return Status.INVALID, "nbgrader rejected the notebook's cell metadata"
    return Status.ERROR, "nbgrader autograde failed; see the log"


def _read_autograded(notebooks: list[Path], started_at: datetime) -> tuple[list[str], dict]:
    """The test cells interrupted at the per-cell limit, and the start-up and work timings."""
    import nbformat

    timeouts, code_cells = [], []
    for path in notebooks:
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            code_cells.append(cell)
            if any(o.get("ename") == "CellTimeoutError" for o in cell.get("outputs", [])):
                timeouts.append(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                                or f"cell {len(code_cells)}")
    timings = {}
    durations = [_cell_seconds(c) for c in code_cells]
    if durations and durations[0] is not None:
        # start-up = kernel start + the first code cell (it starts Spark); work = every other cell
        kernel_ready = _parse_time(code_cells[0]["metadata"]["execution"]["iopub.execute_input"])
        timings["startup_seconds"] = round((kernel_ready - started_at).total_seconds() + durations[0], 1)
        timings["work_seconds"] = round(sum(d for d in durations[1:] if d), 1)
    return timeouts, timings


def run_worker(context: SubmissionContext, checks: Path | None = None, checks_sha256: str | None = None, *,
               principal: Principal | None = None) -> WorkerReport:
    """nbgrader autograde, the lab's hidden checks (``checks``: its hidden_checks.py), then
    generate_feedback, for the submission ``context`` describes.

    With ``context.limits`` (its limits), the student's kernel runs in a ``Sandbox`` made from
    ``context.env`` and gone afterwards; the hidden checks run in a sandbox of their own
    (``hidden.ChecksProcess``), with the student's data folder read-only. ``principal`` and
    ``context.sandbox_listener`` (the broker's SANDBOX listener): their Kafka connections are the
    principal's, allowed the submission's topics only (see ``tenancy``); without them, the topic prefix."""
    box = None
    try:
        if context.limits is not None:
            if principal is not None:
                principal.allow_only(context.topic_prefix)
            box = Sandbox(context.env, Limits(**context.limits), principal=principal,
                          sandbox_servers=context.sandbox_listener)
        checks_process = None
        if checks is not None:
            checks_process = _start_checks(context, checks, checks_sha256, principal=principal)
        try:
            return _grade(context, checks_process, box)
        finally:
            if checks_process is not None:
                checks_process.close()
    finally:
        if box is not None:
            box.close()


def _start_checks(context: SubmissionContext, checks: Path, checks_sha256: str | None, *,
                  principal: Principal | None) -> ChecksProcess:
    """Start the submission's hidden checks (their Spark starts while the notebook runs)."""
    student_data = context.data_dir
    env = dict(context.env, STREAMLAB_DATA_DIR=str(checks_work(student_data) / "data"))
    env.pop("JUPYTER_PATH", None)
    make_box = None
    if context.limits is not None:
        def make_box():
            return Sandbox(env, CHECKS_LIMITS, principal=principal, sandbox_servers=context.sandbox_listener,
                           read_only=(str(checks), str(student_data)))
    return ChecksProcess(checks, checks_sha256 or "", student_data=student_data,
                         topic_prefix=context.topic_prefix, env=env, make_box=make_box,
                         log=checks_work(student_data) / "checks-output.log")


def grading_config(course: Path, cell_timeout: float | None, kernel_env: dict[str, str] | None = None,
                   progress: str | None = None):
    """The course's nbgrader config for autograding in ``course``, with the grader's own steps: outputs kept
    within bounds as they arrive (``bounds``), a copied cell's nbgrader metadata taken off, not emptied
    (``DropUngradedMetadata``, for nbgrader's ``DeduplicateIds``), hidden tests taken out right after nbgrader
    puts the test cells back (``withhold``), kernel clients whose messages are bounded, and kernels started with
    ``kernel_env`` (the submission's environment; None: this process's). ``progress``: a file the running
    notebook is saved to after every cell (``steps/bounded_execute.py``)."""
    from nbgrader.converters import Autograde

    config = nbgrader_config(course, cell_timeout=cell_timeout)
    steps = Autograde.class_traits()["autograde_preprocessors"].default()
    config.Autograde.autograde_preprocessors = [BoundedExecute if step.__name__ == "Execute" else step
                                                for step in steps]
    steps = [DropUngradedMetadata if step.__name__ == "DeduplicateIds" else step
             for step in Autograde.class_traits()["sanitize_preprocessors"].default()]
    at = [step.__name__ for step in steps].index("OverwriteCells") + 1
    config.Autograde.sanitize_preprocessors = [*steps[:at], WithholdHiddenTests, *steps[at:]]
    output = kernel_output(kernel_env) if kernel_env and kernel_env.get("STREAMLAB_DATA_DIR") else None
    config.Execute.kernel_manager_class = BoundedKernelManager
    if kernel_env is not None:
        config.BoundedKernelManager.env = dict(kernel_env)
    if output is not None:
        config.BoundedKernelManager.output = str(output)
    if progress:
        config.BoundedExecute.progress = progress
    return config


def _grade(context: SubmissionContext, checks: ChecksProcess | None, box: Sandbox | None) -> WorkerReport:
    from nbgrader.converters import Autograde

    course, lab, student = Path(context.course), context.lab, context.student
    config = grading_config(course, context.cell_timeout, context.env, context.progress)
    if box is not None:
        box.configure(config)  # its kernelspec and kernel manager, with the same environment
    started, started_at = time.monotonic(), datetime.now(UTC)
    BoundedExecute.last_failure = None
    with (box.stopped_at_a_limit() if box is not None else nullcontext()):
        autograded = run_converter(Autograde, config, assignment=lab, student=student,
                                   force=True, create_student=True)
    timings = {"autograde_seconds": round(time.monotonic() - started, 1)}
    usage = {}
    if box is not None:
        box.stop()  # nothing of the submission runs while its results are read
        usage = box.usage()
    if context.env.get("STREAMLAB_DATA_DIR"):  # what the kernel wrote to stdout and stderr: its last part
        tail = output_tail(kernel_output(context.env))
        sys.stderr.write(f"--- the kernel's own output (stdout and stderr), its end ---\n{tail}\n---\n" if tail else "")
    if box is not None:
        hit = box.limits_hit()
        if hit:
            return WorkerReport.no_result(Status.LIMIT, f"limit exceeded: {', '.join(hit)}; the submission "
                                                        f"was stopped and scores 0", usage=usage, **timings)
        untrusted_folder(box.work, readable=True)
    timings["usage"] = usage
    if not autograded["success"]:
        sys.stderr.write(autograded.get("error", ""))
        status, detail = _why_autograde_failed(BoundedExecute.last_failure,
                                               autograded["log"] + autograded.get("error", ""),
                                               config.Execute.timeout)
        return WorkerReport.no_result(status, detail, **timings)

    notebooks = sorted((course / "autograded" / student / lab).glob("*.ipynb"))
    timeouts, more_timings = _read_autograded(notebooks, started_at)
    timings.update(more_timings)
    # After autograde, in this order (each step below is one function):
    try:
        verdicts = _check_what_it_left(checks, timings)        # 1. the hidden checks, the kernel gone
    except ChecksBroken as err:  # the checks could not give a verdict: not the student's doing
        return WorkerReport.no_result(Status.ERROR, f"the grader's hidden checks broke on this submission "
                                                    f"({err}); it is graded again by the next run", **timings)
    _settle_points(config, lab, student, verdicts)             # 2. unconfirmed cells and extra credit to 0
    if not _generate_feedback(config, lab, student, verdicts, context.language):  # 3. the pages, the checks' block
        return WorkerReport.no_result(Status.ERROR, "nbgrader generate_feedback failed; see the log", **timings)
    score, max_score, cells = _scores(config, lab, student)    # 4. the gradebook's score, cell by cell
    inert_feedback_pages(course / "feedback" / student / lab)  # 5. a security policy first in every page
    status, detail = _status(timeouts, config.Execute.timeout, verdicts)  # 6. graded or timed out, and why
    return WorkerReport(status=status, score=score, max_score=max_score, detail=detail, cells=cells,
                        checks=verdicts, **timings)


def _check_what_it_left(checks: ChecksProcess | None, timings: dict) -> list[CheckResult]:
    """The hidden checks' verdicts on what the run left (none without checks); ChecksBroken if they gave none."""
    if checks is None:
        return []
    started = time.monotonic()
    verdicts = checks.run()
    timings["checks_seconds"] = round(time.monotonic() - started, 1)
    return verdicts


def _settle_points(config, lab: str, student: str, verdicts: list[CheckResult]) -> None:
    """In nbgrader's gradebook: the test cells no check confirmed score 0, and so does any extra credit."""
    from nbgrader.api import Gradebook

    with Gradebook(config.CourseDirectory.db_url) as gradebook:
        withdraw_points(gradebook, lab, student, unconfirmed_cells(verdicts))
        no_extra_credit(gradebook, lab, student)


def _generate_feedback(config, lab: str, student: str, verdicts: list[CheckResult], language: str = "en") -> bool:
    """nbgrader's generate_feedback, its preprocessors given one more when there are checks: their block first in
    each page (``steps/checks_block.py``)."""
    from nbgrader.converters import GenerateFeedback

    if verdicts:
        with_checks_block(config, verdicts, language)
    templates = Path(config.CourseDirectory.root) / ".feedback-templates"
    if language == "zh" and chinese_feedback_template(templates):  # nbgrader's page, its words in Chinese
        config.HTMLExporter.template_name = FEEDBACK_TEMPLATE
        config.HTMLExporter.extra_template_basedirs = [str(templates)]
    feedback = run_converter(GenerateFeedback, config, assignment=lab, student=student, force=True)
    if not feedback["success"]:
        sys.stderr.write(feedback.get("error", ""))
    return bool(feedback["success"])


def _scores(config, lab: str, student: str) -> tuple[float, float, list[CellGrade]]:
    """(score, max score, each test cell's grade) as nbgrader's gradebook holds them now."""
    from nbgrader.api import Gradebook

    with Gradebook(config.CourseDirectory.db_url) as gradebook:
        submission = gradebook.find_submission(lab, student)
        cells = [CellGrade(notebook=nb.name, grade_id=grade.name, score=grade.score, max_score=grade.max_score,
                           auto_score=grade.auto_score)
                 for nb in submission.notebooks for grade in nb.grades]
        return float(submission.score), float(submission.max_score), cells


def _status(timeouts: list[str], cell_timeout: float, verdicts: list[CheckResult]) -> tuple[Status, str]:
    """Graded, or timed out in some cells (the others still count); and why points are missing."""
    status, detail = Status.GRADED, ""
    if timeouts:
        status = Status.TIMED_OUT
        detail = f"stopped after {cell_timeout} s in: {', '.join(timeouts)} (other cells graded)"
    return status, "; ".join(d for d in (detail, summary_detail(verdicts)) if d)


class BoundedLog:
    """A text file that takes at most ``max_bytes`` of writes, then one line saying the rest was left out: a
    student's log, written by the worker while grading them, stays within its own bound."""

    def __init__(self, handle, max_bytes: int):
        self.handle, self.left = handle, max_bytes
        self.cut = False

    def write(self, text: str) -> int:
        data = text.encode("utf-8", errors="replace")
        if len(data) <= self.left:
            self.left -= len(data)
            self.handle.write(text)
        elif not self.cut:
            self.cut = True
            self.handle.write(data[:self.left].decode("utf-8", errors="ignore") + "\n[the log is cut here: it is "
                              "limited in size]\n")
            self.left = 0
        return len(text)

    def flush(self) -> None:
        self.handle.flush()

    def fileno(self) -> int:
        return self.handle.fileno()




@contextmanager
def _output_to(log_path: Path):
    """Send this process's Python-level output and logging to ``log_path`` (one student's log), at most
    ``bounds.STUDENT_LOG_BYTES`` of it."""
    saved = sys.stdout, sys.stderr, logging.getLogger().handlers[:]
    with open(log_path, "a", buffering=1, encoding="utf-8") as handle:
        log = BoundedLog(handle, bounds.STUDENT_LOG_BYTES)
        sys.stdout = sys.stderr = log
        handler = logging.StreamHandler(log)
        handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
        logging.getLogger().handlers = [handler]
        try:
            yield
        finally:
            sys.stdout, sys.stderr, logging.getLogger().handlers = saved


def serve(channel_fd: int, checks: Path | None, checks_sha256: str | None) -> None:
    """Grade the submissions the grader sends over ``channel_fd`` until it closes the channel.

    Each request is a ``SubmissionContext`` (plus the channel's nonce): the student, their course
    folder, log file and environment (their tag, topic prefix and data folder), which the student's
    kernel is started with, so the grader's sweep finds everything it starts. The channel is not
    inherited by kernels.
    """
    from multiprocessing.connection import Connection

    os.set_inheritable(channel_fd, False)
    channel = Connection(channel_fd)
    import nbgrader.converters  # noqa: F401 - imported once, for every student
    own_cwd = os.getcwd()
    principal = None  # this slot's Kafka principal, made for the first sandboxed submission
    while True:
        try:
            request = json.loads(channel.recv_bytes())
        except EOFError:
            break
        try:
            context = SubmissionContext.from_dict(request)
            os.chdir(context.course)
            with _output_to(Path(context.log)):
                try:
                    if context.limits is not None and context.sandbox_listener and principal is None:
                        principal = Principal(context.bootstrap)
                    report = run_worker(context, checks, checks_sha256, principal=principal)
                except Exception:
                    logging.exception("grading failed")
                    raise
        except Exception as err:  # the grader's own failure: reported, and the next student goes on
            report = WorkerReport.no_result(Status.ERROR, f"the worker failed: {type(err).__name__}: {str(err)[:300]}")
        finally:
            os.chdir(own_cwd)
        channel.send_bytes(json.dumps({"nonce": request["nonce"], "report": report.to_json()}).encode())
    if principal is not None:
        principal.remove()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamlab.grading.workers.worker",
                                     description="Grade submissions (started by `streamlab grade`).")
    parser.add_argument("--serve", type=int, metavar="FD", required=True, help="serve the grader on channel FD")
    parser.add_argument("--checks", default=None, help="the lab's hidden_checks.py (hidden checks)")
    parser.add_argument("--checks-sha256", default=None, help="refuse to run hidden_checks.py if it changed")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="[%(levelname)s] %(message)s")
    serve(args.serve, Path(args.checks) if args.checks else None, args.checks_sha256)
    return 0


if __name__ == "__main__":
    sys.exit(main())
