"""A learner's self-check: ``streamlab check LAB_NOTEBOOK`` runs a lab the way the grader will.

    streamlab check labs/lab01_stateless_vs_stateful/lab01_stateless_vs_stateful.ipynb

It runs one submission the way ``streamlab grade`` does, with the grader's own steps (``run.course``,
``workers``): a private nbgrader course is made in a temporary folder from the released lab
(labs/<lab>/, the visible tests), a copy of your notebook is its one submission (your file is only
read, and nothing is written next to it), and a grading worker runs nbgrader's autograde on it: test
cells you edited are put back, the notebook runs top to bottom in a fresh kernel with the grader's
isolation (its own Kafka topic prefix, checkpoint folder and process tag: whatever it leaves running,
kernel and Spark JVM included, is stopped at the end) and limits (nbgrader_config.py's per-cell limit,
``bounds.SUBMISSION_TIMEOUT_S`` for the whole notebook), and nbgrader's gradebook scores each test cell (an
error, or any output on stderr, is 0 points; a number the cell ends with, partial credit). The worker
answers with the same ``WorkerReport`` the grader reads; this module turns it into a table, naming for
each part the cell that failed (read from the notebook as the worker saved it after every cell).

What it cannot do: the grader also checks what each part left behind (its checkpoints, state and topics)
against results it computes itself, outside the notebook, so passing here is necessary, not sufficient. (The
labs have no hidden tests: every test cell is in the learner's notebook.)

Lab authors, in the course's private repository: ``streamlab check NOTEBOOK --hidden-checks`` makes the
course from solutions/<lab>/ instead, as ``streamlab grade`` does, and the worker runs the lab's
hidden_checks.py on what the notebook left: the table then shows each check, and the points the checks
took back. ``keep=True`` (for benchmarks) keeps the run's data folder and topics (``SelfCheck.kept``).

It is the grader (``run.grader.Grader``) built for one submission: made from the released lab (or solutions/ and
its hidden checks), without the sandbox, each cell's notebook saved for the table; this module reads the parts
from the worker's report the result holds.
"""
from __future__ import annotations

import io
import os
import re
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..lessons.mistakes import learner_message
from ..stack import translations
from . import bounds
from .labs import GradingError, labs_dir, nbgrader_config, solutions_dir
from .outputs.languages import SELF_CHECK, language_of_bytes, said
from .outputs.results import CheckResult, Outcome, Status, WorkerReport
from .run.grader import Grader
from .run.submissions import Submission, SubmissionRefused, check_notebook_bytes, read_submitted_file
from .workers.hidden import checks_file


@dataclass
class Part:
    """One graded test cell of the lab, and how it went."""
    grade_id: str
    points: float
    outcome: Outcome = Outcome.NOT_RUN
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
    checks: list[CheckResult] = field(default_factory=list)  # the lab's hidden checks (--hidden-checks only)
    kept: dict[str, str] = field(default_factory=dict)  # keep=True: {"data_dir", "topic_prefix", "work"} of the run
    language: str = "en"   # the report's words: the notebook's language ("zh": a lab of the course in Chinese)

    def __post_init__(self):
        self.status = Status(self.status)

    @property
    def passed(self) -> bool:
        return (self.status is Status.GRADED and bool(self.parts)
                and all(p.outcome == Outcome.PASSED for p in self.parts) and all(c.passed for c in self.checks))

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


def _partial(earned: float, points: float) -> str:
    return f"nbgrader gives this cell {earned:g} of {points:g} points (a number a test ends with is partial credit)"


def error_line(output: dict) -> str:
    """An error output as the last line of its traceback: ``Type: message`` (an AssertionError's
    message alone); a catalogued mistake's paragraph instead, when the kernel put one first
    (``streamlab.lessons.mistakes``)."""
    said = learner_message(output.get("traceback") if isinstance(output.get("traceback"), list) else None)
    if said:
        return said
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


def parts_of(nb, *, scores: dict[str, float] | None = None, withdrawn: dict[str, str] | None = None,
             cell_timeout_s: float | None = None, stopped: tuple[str, str] | None = None) -> list[Part]:
    """The graded test cells of an executed (maybe partly executed) notebook, each with its outcome.

    ``scores``: the points nbgrader's gradebook gave each test cell (by grade id); a cell that ran without an
    error but got fewer than its points fails with the reason (partial credit). None: the run was not scored
    (the grader gives it 0), and each part is said as it ran. ``withdrawn``: the cells whose points a hidden
    check took back, and why. A test that failed because an earlier cell
    raised (a NameError for a result never made) is blamed on the latest such cell since the last test that
    passed. ``stopped``: (outcome, why) when the run was cut short: the first code cell that did not run was
    the one running then.
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
            given = part.points if scores is None else float(scores.get(part.grade_id) or 0)
            why = (withdrawn or {}).get(part.grade_id) or (_partial(given, part.points) if given < part.points else "")
            part.outcome, upstream = (Outcome.FAILED, upstream) if why else (Outcome.PASSED, None)
            part.message, part.cell = why, part.grade_id if why else ""
            part.earned = 0.0 if scores is None else given  # the grader gives a run it could not score nothing
        elif failure[0] == "timeout":
            part.outcome, part.cell = Outcome.TIMED_OUT, part.grade_id
            part.message = f"still running after {cell_timeout_s or 'the per-cell limit'} s, then interrupted"
        else:
            part.outcome = Outcome.FAILED
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


def in_its_language(released: Path, language: str) -> Path:
    """The released lab in ``language`` (the notebook's), to compare its cells with: zh/labs/<lab>/ for a lab in
    Chinese (its locked markdown is the Chinese text, not a change of the learner's), else ``released``. The course is
    graded from the English lab either way: the cells the grader runs are the same."""
    if language == translations.LANGUAGE:
        chinese = translations.target_of(released)
        if chinese.is_file():
            return chinese
    return released


def changed_locked_cells(nb, released) -> list[str]:
    """Notes on the locked cells (tests included) the learner changed or deleted, against the released lab:
    nbgrader's autograde puts back the original of each (OverwriteCells), and scores a missing test 0."""
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
            notes.append(f"{gid}: you changed this locked cell; the original is used, as the grader does")
        elif original is None and "checksum" in _meta(cell) and _meta(cell)["checksum"] != compute_checksum(cell):
            notes.append(f"{_name(cell, index)}: you changed this locked cell; the grader runs the original")
    for gid, original in originals.items():
        if gid not in present and is_test_cell(original):
            notes.append(f"{gid}: this test cell is missing from your notebook (the grader scores it 0)")
    return notes


def not_a_notebook(given: str, language: str = "en") -> str | None:
    """What to tell a learner whose ``streamlab check`` argument is no file (None when it is one), in ``language``:
    the lab's name typed as ``streamlab grade`` takes it ("lab01"), or the lab's folder. Names the notebooks to give
    instead: the learner's, in the current folder or its ``labs/`` (where a hub hands labs out), else the course's
    (in Chinese, ``zh/labs/`` first)."""
    words = SELF_CHECK[language]
    path, given = Path(given), given or "."
    if path.is_file() or path.is_symlink():
        return None  # a file (a link is refused by the grader's own reading, with its reason)
    if path.is_dir():
        inside = sorted(p for p in path.glob("*.ipynb") if p.is_file())
        if not inside:
            return words["empty_folder"].format(given=given)
        return words["folder"].format(given=given) + "\n" + _commands(inside, words)
    typed, here, course = path.name.removesuffix(".ipynb"), Path.cwd(), labs_dir().parent
    own = [here, here / "zh" / "labs", here / "labs"] if language == "zh" else [here, here / "labs"]
    the_courses = [course / "zh" / "labs", labs_dir()] if language == "zh" else [labs_dir()]

    def labs_in(bases: list[Path]) -> dict[Path, Path]:
        return {notebook.resolve(): notebook for base in bases if base.is_dir() for folder in sorted(base.iterdir())
                if folder.is_dir() and folder.name.startswith(typed) for notebook in sorted(folder.glob("*.ipynb"))}

    found = (labs_in(own) or labs_in(the_courses)) if typed else {}  # the course's copies only if none is here
    if found:
        return words["not_a_file"].format(given=given) + "\n" + _commands(list(found.values()), words)
    return words["no_such_file"].format(given=given, labs=_shown(labs_dir()))


def _shown(path: Path) -> str:
    """``path`` as the learner would type it: from the current folder when it is under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _commands(notebooks: list[Path], words: dict, most: int = 8) -> str:
    lines = [f"  streamlab check {_shown(p)}" for p in notebooks[:most]]
    if len(notebooks) > most:
        lines.append("  " + words["and_more"].format(count=len(notebooks) - most))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- running it

STUDENT = "you"  # the one submission's student id in the self-check's own course


def run_selfcheck(notebook: Path, *, timeout_s: float = bounds.SUBMISSION_TIMEOUT_S,
                  cell_timeout_s: float | None = None, bootstrap: str | None = None, hidden_checks: bool = False,
                  keep: bool = False) -> SelfCheck:
    """Run a copy of ``notebook`` like the grader (see the module doc) and say how each part went.
    ``hidden_checks``: a lab author's run, from solutions/ and with the lab's hidden checks."""
    import nbformat

    notebook, started = Path(notebook), time.monotonic()
    try:
        data = read_submitted_file(notebook)
    except SubmissionRefused as refusal:
        return SelfCheck(str(notebook), Status.INVALID, detail=str(refusal))
    problem = check_notebook_bytes(data, notebook.name)
    if problem:
        return SelfCheck(str(notebook), Status.INVALID, detail=problem)
    nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    language = language_of_bytes(data)  # as the grader reads it
    path = find_released(notebook, nb)
    released = nbformat.read(in_its_language(path, language), as_version=4) if path else None
    notes = changed_locked_cells(nb, released) if path and path.resolve() != notebook.resolve() else []
    if path is None:
        notes.append(f"no released lab in {labs_dir()} shares this notebook's cells: its test cells run as they are")
    config = nbgrader_config(Path(tempfile.gettempdir()))  # the course's settings: limits, IgnorePattern
    cell_timeout_s = cell_timeout_s or config.Execute.timeout
    # Every process of the run carries this tag (the tests choose its start: STREAMLAB_GRADE_RUN_TAG)
    tag = f"{os.environ.get('STREAMLAB_GRADE_RUN_TAG') or 'check'}-{secrets.token_hex(4)}"
    workdir = Path(tempfile.mkdtemp(prefix="streamlab-check-"))
    result = SelfCheck(str(notebook), Status.ERROR, notes=notes, tag=tag, language=language,
                       limits=SELF_CHECK[language]["limits"].format(whole=timeout_s, cell=cell_timeout_s))
    try:
        if hidden_checks:  # a lab author's run: the lab as solutions/ holds it, and its hidden checks
            if path is None:
                raise GradingError(f"no released lab in {labs_dir()} shares this notebook's cells, so its "
                                   f"hidden checks are not known (make labs releases it)")
            lab, name, source = path.parent.name, path.stem, solutions_dir() / path.parent.name
            if checks_file(solutions_dir(), lab) is None:
                raise GradingError(f"{solutions_dir() / lab} has no hidden_checks.py")
        elif path is None:  # the lab is the notebook itself: its own test cells are the ones put back
            lab = name = re.sub(r"[^A-Za-z0-9_-]", "_", notebook.stem) or "notebook"
            source = workdir / "own"
            source.mkdir()
            (source / f"{name}.ipynb").write_bytes(data)
        else:
            lab, name, source = path.parent.name, path.stem, path.parent
        copy = workdir / "submitted" / f"{name}.ipynb"  # the bytes checked above: your file is only read
        copy.parent.mkdir()
        copy.write_bytes(data)
        # The grader itself, without the sandbox (your own code, on your own machine), quiet, one submission
        grader = Grader(lab, workdir / "out", source=source, hidden_checks=hidden_checks, timeout_s=timeout_s,
                        cell_timeout_s=cell_timeout_s, limits=None, run_tag=tag, bootstrap=bootstrap,
                        stream=io.StringIO(), progress=True, keep=keep)
        try:
            graded = grader.grade(Submission(STUDENT, {name: copy}, notebook))
        finally:
            grader.close()
        if graded.report is None:  # refused before it ran, or the grader failed
            result.status, result.detail = graded.status, _in_your_words(_first_error(graded.detail), copy, notebook)
        else:
            _read_report(result, graded.report, grader.progress_notebook(STUDENT), nb, released, config,
                         cell_timeout_s, timeout_s)
        result.kept = {**grader.kept.get(STUDENT, {}), "work": str(workdir)} if keep else {}
    except GradingError as err:  # the course could not be made
        result.status, result.detail = Status.ERROR, _first_error(str(err))
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    result.seconds = round(time.monotonic() - started, 1)
    return result


def _in_your_words(detail: str, copy: Path, notebook: Path) -> str:
    """The grader names the file it refused, and here that is the check's copy, called after the lab: say the
    learner's file instead (they may have saved the lab as ``mine.ipynb``)."""
    said = f"{copy.name}: "
    return f"{notebook.name}: {detail[len(said):]}" if detail.startswith(said) else detail


def _first_error(text: str) -> str:
    """A GradingError's first line, and nbgrader's last logged error after it (its log ends the message)."""
    lines = text.strip().splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("[ERROR]")]
    said = " ".join(" ".join(lines[errors[-1]:]).removeprefix("[ERROR]").split()) if errors else ""
    return f"{lines[0]} {said}".strip()[:400] if lines else "no message"


def _read_report(result: SelfCheck, report: WorkerReport, progress: Path, nb, released, config,
                 cell_timeout_s: float, timeout_s: float) -> None:
    """Fill ``result`` from the worker's report and the notebook as it saved it after every cell."""
    import nbformat
    from nbgrader.preprocessors import IgnorePattern

    if progress.exists():
        ran = nbformat.read(progress, as_version=4)
    else:  # stopped before its first cell ran
        ran = nb
        for cell in ran.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
    end = ran.metadata.get("streamlab_progress", {})
    result.status, result.detail, stopped = report.status, report.detail, None
    if not report.scored:
        if end.get("error"):
            result.detail = f"{report.detail} ({end['error']})"
            stopped = (Outcome.TIMED_OUT if report.status is Status.TIMED_OUT else Outcome.FAILED,
                       f"the run stopped here: {end['error']}")
        elif report.status is Status.TIMED_OUT:  # the whole notebook's limit
            result.detail = f"the notebook did not finish within {timeout_s:g} s; it was stopped (kernel and Spark)"
            stopped = (Outcome.TIMED_OUT,
                       f"still running when the time for the whole notebook ({timeout_s:g} s) ran out")
        elif not end.get("complete"):
            stopped = (Outcome.FAILED, "the run stopped here (see above)")
    ran, _ = IgnorePattern(config=config).preprocess(ran, {})  # Spark's log lines are no failure
    scores = {cell.grade_id: cell.score or 0.0 for cell in report.cells} if report.scored else None
    result.checks = list(report.checks)
    withdrawn = {cell: f"not confirmed by the hidden check {check.name}: {check.detail}"
                 for check in reversed(result.checks) if not check.passed for cell in check.cells}
    result.parts = parts_of(ran, scores=scores, withdrawn=withdrawn, cell_timeout_s=cell_timeout_s, stopped=stopped)
    have = {p.grade_id for p in result.parts}
    result.parts += [Part(_meta(c)["grade_id"], float(_meta(c).get("points") or 0), Outcome.FAILED,
                          "this test cell is missing from your notebook: the grader scores it 0")
                     for c in (released.cells if released else [])
                     if is_test_cell(c) and _meta(c)["grade_id"] not in have]


def _points(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def format_report(result: SelfCheck, message_width: int = 90) -> str:
    """The table ``streamlab check`` prints: part, points, passed or why not, the cell that failed; in the
    notebook's language (``outputs/languages.py``)."""
    words, language = SELF_CHECK[result.language], result.language
    limits = words["then"] + result.limits if result.limits else ""
    scope = words["scope_checks"] if result.checks else words["scope_visible"]
    lines = [words["title"].format(notebook=result.notebook, seconds=result.seconds, limits=limits, scope=scope), ""]
    if result.status is Status.INVALID or (not result.parts and result.detail):
        return "\n".join(lines + [words["cannot"].format(detail=result.detail)])
    rows = [list(words["header"])]
    for part in result.parts:
        outcome = said(part.outcome, language)
        text = outcome if part.outcome == Outcome.PASSED or not part.message else f"{outcome}: {part.message}"
        if len(text) > message_width:
            text = text[: message_width - 3] + "..."
        rows.append([part.grade_id, _points(part.points), text, part.cell])
    widths = [max(translations.display_width(row[i]) for row in rows) for i in range(4)]
    lines += ["  ".join(c + " " * (w - translations.display_width(c)) for c, w in zip(row, widths)).rstrip()
              for row in rows]
    if result.checks:
        lines += ["", words["checks"]]
        lines += [f"  {c.name}: {said(c.outcome, language)}" + ("" if c.passed else f": {c.detail}")
                  + f" ({words['check_cells'].format(cells=', '.join(c.cells))})" for c in result.checks]
    earned = sum(p.earned for p in result.parts)
    total = sum(p.points for p in result.parts)
    todo = sum(p.outcome != Outcome.PASSED for p in result.parts)
    what = words["what_checks"] if result.checks else words["what_visible"]
    lines += ["", words["total"].format(what=what, earned=_points(earned), total=_points(total))
              + (words["todo"].format(todo=todo) if todo else words["done"])]
    if result.status is not Status.GRADED:
        lines.append(words["abnormal"].format(status=said(result.status, language), detail=result.detail))
        if not any(p.earned for p in result.parts) and any(p.outcome == Outcome.PASSED for p in result.parts):
            lines.append(words["scored_zero"])
    lines += [words["note"].format(note=note) for note in result.notes]
    if not result.checks:
        lines.append(words["more"])
    return "\n".join(lines)

