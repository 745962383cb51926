"""A learner's self-check: ``streamlab check LAB_NOTEBOOK`` runs a lab the way the grader will.

    streamlab check labs/lab01_stateless_vs_stateful/lab01_stateless_vs_stateful.ipynb

What it shares with ``streamlab grade``: a copy of the notebook (your file is only read, and nothing
is written next to it) runs top to bottom in a fresh kernel, in a child process with the grader's
isolation (its own Kafka topic prefix, checkpoint folder and process tag: whatever it leaves running,
kernel and Spark JVM included, is stopped at the end), with the grader's limits (nbgrader_config.py's
per-cell limit, ``DEFAULT_TIMEOUT_S`` for the whole notebook) and ``NBGRADER_EXECUTION=autograde``.
Test cells you edited are put back from the released lab, and each test cell is scored as nbgrader
scores it: an error, or any output on stderr, is 0 points.

What it cannot do: your notebook holds only the visible tests. The grader also runs hidden tests and
checks what each part left behind, so passing here is necessary, not sufficient.
"""
from __future__ import annotations

import os
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..stack.kafka import bootstrap_servers
from .labs import labs_dir, nbgrader_config
from .outputs.results import Outcome, Status
from .run.grader import DEFAULT_TIMEOUT_S
from .run.submissions import check_notebook
from .sandbox.isolation import delete_prefixed_topics, run_isolated, submission_environment

PASSED, FAILED, TIMED_OUT, NOT_RUN = Outcome.PASSED, Outcome.FAILED, Outcome.TIMED_OUT, Outcome.NOT_RUN


@dataclass
class Part:
    """One graded test cell of the lab, and how it went."""
    grade_id: str
    points: float
    outcome: Outcome = NOT_RUN
    message: str = ""      # why it did not pass
    earned: float = 0.0    # the points nbgrader would give the cell's run
    cell: str = ""         # the cell that failed: a grade_id, or "cell N"


@dataclass
class SelfCheck:
    notebook: str
    status: Status         # the grader's words: graded (ran to the end), timed out, crashed, invalid, error
    parts: list[Part] = field(default_factory=list)
    detail: str = ""
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    tag: str = ""          # the process tag the run's processes carried
    limits: str = ""       # the time limits it ran with, as the report says them

    def __post_init__(self):
        self.status = Status(self.status)

    @property
    def passed(self) -> bool:
        return self.status is Status.GRADED and bool(self.parts) and all(p.outcome == PASSED for p in self.parts)

    @property
    def exit_code(self) -> int:
        if self.passed:
            return 0
        return 2 if self.status in (Status.INVALID, Status.ERROR) else 1


# ----------------------------------------------------------------------------- reading cells

def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _name(cell, index: int) -> str:
    return _meta(cell).get("grade_id") or f"cell {index + 1}"


def is_test_cell(cell) -> bool:
    """An autograded test cell (graded, code, not an answer cell), as nbgrader tells them."""
    from nbgrader.utils import is_grade, is_solution

    return cell.get("cell_type") == "code" and bool(is_grade(cell)) and not is_solution(cell)


def _nbgrader_score(cell, points: float) -> tuple[float, str]:
    """(points, why not all) nbgrader's own scoring gives a test cell that ran without an error: all of them, or the
    partial credit a number the cell ends with asks for (``nbgrader.utils.determine_grade``)."""
    from nbgrader.utils import determine_grade

    try:
        earned, _ = determine_grade(cell)
    except ValueError as err:  # a value above the cell's points: nbgrader refuses the cell
        return 0.0, f"nbgrader cannot score this cell: {err}"
    earned = points if earned is None else float(earned)
    return earned, "" if earned >= points else \
        f"the cell's value gives {earned:g} of {points:g} points (nbgrader reads it as partial credit)"


def error_line(output: dict) -> str:
    """An error output as the last line of its traceback: ``Type: message`` (an AssertionError's
    message alone)."""
    ename, evalue = output.get("ename", "Error"), (output.get("evalue") or "").strip()
    evalue = evalue.splitlines()[0] if evalue else ""
    if ename == "AssertionError":
        return evalue or "AssertionError (an assert without a message)"
    if ename == "NotImplementedError" and not evalue:
        return "NotImplementedError: an answer is still missing (raise NotImplementedError())"
    return f"{ename}: {evalue}" if evalue else ename


def _failure(cell) -> tuple[str, str] | None:
    """(kind, message) if nbgrader would give this cell's points nothing: an error, or stderr."""
    enames = [o.get("ename") for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if "CellTimeoutError" in enames or enames[:1] == ["KeyboardInterrupt"]:  # interrupted at the per-cell limit
        return "timeout", "CellTimeoutError"
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return output.get("ename", ""), error_line(output)
        if output.get("output_type") == "stream" and output.get("name") == "stderr":
            last = [line for line in output.get("text", "").splitlines() if line.strip()][-1:] or [""]
            return "stderr", f"wrote to stderr (the grader gives such a test 0 points): {last[0]}"
    return None


def _ran(cell) -> bool:
    return cell.get("execution_count") is not None or bool(cell.get("outputs"))


def parts_of(nb, *, cell_timeout_s: float | None = None, stopped: tuple[str, str] | None = None) -> list[Part]:
    """The graded test cells of an executed (maybe partly executed) notebook, each with its outcome.

    A test that failed because an earlier cell raised (a NameError for a result never made) is
    blamed on the latest such cell since the last test that passed. ``stopped``: (outcome, why) when
    the run was cut short: the first code cell that did not run was the one running then.
    """
    cells = nb.cells
    code = [i for i, c in enumerate(cells) if c.get("cell_type") == "code" and c.get("source", "").strip()]
    running = next((i for i in code if not _ran(cells[i])), None) if stopped else None
    parts, upstream, reached_stop, unanswered = [], None, False, None
    for index, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        reached_stop = reached_stop or index == running
        if not is_test_cell(cell):
            if _meta(cell).get("solution") and "raise NotImplementedError" in cell.source:
                unanswered = _name(cell, index)
            failure = _failure(cell)
            if failure and failure[0] == "NotImplementedError" and unanswered and "still missing" in failure[1]:
                failure = (failure[0], f"NotImplementedError: {unanswered} is not answered yet")
            if failure and failure[0] != "stderr":
                upstream = (_name(cell, index), failure[1])
            continue
        part = Part(_meta(cell)["grade_id"], float(_meta(cell).get("points") or 0))
        parts.append(part)
        failure = _failure(cell)
        if not _ran(cell):
            if reached_stop and running is not None:
                part.outcome, part.message = stopped
                part.cell, running = _name(cells[running], running), None  # later parts: not reached
            else:
                part.message = "not reached: the notebook stopped before this cell" if reached_stop else "did not run"
        elif failure is None:
            part.earned, why = _nbgrader_score(cell, part.points)
            part.outcome, upstream = (FAILED, upstream) if why else (PASSED, None)
            part.message, part.cell = why, part.grade_id if why else ""
        elif failure[0] == "timeout":
            part.outcome, part.cell = TIMED_OUT, part.grade_id
            part.message = f"still running after {cell_timeout_s or 'the per-cell limit'} s, then interrupted"
        else:
            part.outcome = FAILED
            if failure[0] not in ("AssertionError", "stderr") and upstream is not None:
                part.cell, part.message = upstream
            else:
                part.cell, part.message = part.grade_id, failure[1]
    return parts


# ----------------------------------------------------------------------------- preparing the copy

def find_released(path: Path, nb) -> Path | None:
    """The released lab notebook ``nb`` is a copy of (most grade ids in common), if it is found."""
    ids = {_meta(c).get("grade_id") for c in nb.cells} - {None}
    best, shared = None, 0
    import nbformat

    for candidate in sorted(labs_dir().glob("*/*.ipynb")):
        try:
            common = len(ids & {_meta(c).get("grade_id") for c in nbformat.read(candidate, as_version=4).cells})
        except Exception:  # an unreadable file in labs/ is not this notebook
            continue
        if common > shared or (common == shared and common and candidate.name == path.name):
            best, shared = candidate, common
    return best


def restore_tests(nb, released) -> list[str]:
    """Put back the released version of every locked cell (tests included) the learner changed,
    as nbgrader does before grading; returns notes on what was put back or is missing."""
    from nbgrader.utils import compute_checksum, is_locked

    notes = []
    originals = {_meta(c).get("grade_id"): c for c in (released.cells if released is not None else [])}
    present = set()
    for index, cell in enumerate(nb.cells):
        gid = _meta(cell).get("grade_id")
        present.add(gid)
        if not (is_locked(cell) or is_test_cell(cell)) or _meta(cell).get("solution"):
            continue
        original = originals.get(gid)
        if original is not None and (cell.source != original.source or _meta(cell) != _meta(original)):
            cell.source, cell.cell_type = original.source, original.cell_type
            cell.metadata["nbgrader"] = dict(_meta(original))
            notes.append(f"{gid}: you changed this locked cell; the original is used, as the grader does")
        elif original is None and "checksum" in _meta(cell) and _meta(cell)["checksum"] != compute_checksum(cell):
            notes.append(f"{_name(cell, index)}: you changed this locked cell; the grader runs the original")
    for gid, original in originals.items():
        if gid not in present and is_test_cell(original):
            notes.append(f"{gid}: this test cell is missing from your notebook (the grader scores it 0)")
    return notes


# ----------------------------------------------------------------------------- running it

def run_selfcheck(notebook: Path, *, timeout_s: float = DEFAULT_TIMEOUT_S, cell_timeout_s: float | None = None,
                  bootstrap: str | None = None) -> SelfCheck:
    """Run a copy of ``notebook`` like the grader (see the module doc) and say how each part went."""
    import nbformat

    notebook, started = Path(notebook), time.monotonic()
    problem = check_notebook(notebook)
    if problem:
        return SelfCheck(str(notebook), Status.INVALID, detail=problem)
    nb = nbformat.read(notebook, as_version=4)
    path = find_released(notebook, nb)
    released = nbformat.read(path, as_version=4) if path and path.resolve() != notebook.resolve() else None
    notes = restore_tests(nb, released)  # without a released copy: edited locked cells are only named
    if path is None:
        notes.append(f"no released lab in {labs_dir()} shares this notebook's cells: its test cells run as they are")
    from nbgrader.preprocessors import IgnorePattern

    config = nbgrader_config(Path(tempfile.gettempdir()))
    cell_timeout_s = cell_timeout_s or config.Execute.timeout
    for cell in nb.cells:  # run from a clean slate, as nbgrader's autograde does
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    # Every process of the run carries this tag (the tests choose its start: STREAMLAB_GRADE_RUN_TAG)
    tag = f"{os.environ.get('STREAMLAB_GRADE_RUN_TAG') or 'check'}-{secrets.token_hex(4)}"
    workdir = Path(tempfile.mkdtemp(prefix="streamlab-check-"))
    env = submission_environment(tag, bootstrap=bootstrap or bootstrap_servers(), workdir=workdir)
    source, executed, log = workdir / "notebook.ipynb", workdir / "executed.ipynb", workdir / "run.log"
    nbformat.write(nb, source)
    try:
        child = run_isolated([sys.executable, "-m", "streamlab.grading.workers.checkrun", str(source), "--out",
                              str(executed), "--cell-timeout", str(cell_timeout_s)],
                             env=env, cwd=workdir, log_path=log, timeout_s=timeout_s, tag=tag)
        ran = nbformat.read(executed if executed.exists() else source, as_version=4)
        end = ran.metadata.get("streamlab_selfcheck", {})
        result, stopped = SelfCheck(str(notebook), Status.GRADED, notes=notes, tag=tag), None
        result.limits = f"limits: {timeout_s:g} s in all, {cell_timeout_s:g} s per cell"
        if child.hit_limit:
            result.status = Status.TIMED_OUT
            result.detail = f"the notebook did not finish within {timeout_s:g} s; it was stopped (kernel and Spark)"
            stopped = (TIMED_OUT, f"still running when the time for the whole notebook ({timeout_s:g} s) ran out")
        elif end.get("error"):
            crashed = "DeadKernel" in end["error"] or "died" in end["error"]
            stuck = "Timeout" in end["error"] or "Unresponsive" in end["error"]
            result.status = Status.CRASHED if crashed else Status.TIMED_OUT if stuck else Status.ERROR
            result.detail = end["error"]
            stopped = (TIMED_OUT if result.status is Status.TIMED_OUT else FAILED,
                       f"the run stopped here: {end['error']}")
        elif not end.get("complete"):
            tail = log.read_text(errors="replace").strip().splitlines()[-5:] if log.exists() else []
            result.status = Status.ERROR
            result.detail = f"the check stopped (exit status {child.returncode}): " + " | ".join(tail)
            stopped = (FAILED, "the run stopped here (see above)")
        ran, _ = IgnorePattern(config=config).preprocess(ran, {})  # Spark's log lines are no failure
        result.parts = parts_of(ran, cell_timeout_s=cell_timeout_s, stopped=stopped)
        have = {p.grade_id for p in result.parts}
        result.parts += [Part(_meta(c)["grade_id"], float(_meta(c).get("points") or 0), FAILED,
                              "this test cell is missing from your notebook: the grader scores it 0")
                         for c in (released.cells if released else [])
                         if is_test_cell(c) and _meta(c)["grade_id"] not in have]
    finally:
        delete_prefixed_topics(env["STREAMLAB_TOPIC_PREFIX"])
        shutil.rmtree(workdir, ignore_errors=True)
    result.seconds = round(time.monotonic() - started, 1)
    return result


def _points(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def format_report(result: SelfCheck, message_width: int = 90) -> str:
    """The table ``streamlab check`` prints: part, points, passed or why not, the cell that failed."""
    limits = f"; {result.limits}" if result.limits else ""
    lines = [f"Self-check of {result.notebook} ({result.seconds:.0f} s{limits}; visible tests only)", ""]
    if result.status is Status.INVALID or (not result.parts and result.detail):
        return "\n".join(lines + [f"Could not check it: {result.detail}"])
    rows = [["part", "points", "result", "failed in"]]
    for part in result.parts:
        text = part.outcome if part.outcome == PASSED else f"{part.outcome}: {part.message}" if part.message \
            else part.outcome
        if len(text) > message_width:
            text = text[: message_width - 3] + "..."
        rows.append([part.grade_id, _points(part.points), text, part.cell])
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    earned = sum(p.earned for p in result.parts)
    total = sum(p.points for p in result.parts)
    todo = sum(p.outcome != PASSED for p in result.parts)
    lines += ["", f"Visible tests: {_points(earned)} of {_points(total)} points pass"
                  + (f"; {todo} part(s) to fix." if todo else ".")]
    if result.status is not Status.GRADED:
        lines.append(f"The run did not end normally ({result.status}): {result.detail}")
    lines += [f"Note: {note}" for note in result.notes]
    lines.append("The grader also runs hidden tests and checks what each part left behind (its checkpoints "
                 "and topics), so passing here is needed for full marks but does not promise them.")
    return "\n".join(lines)
