"""What grading one submission produces: a status, a score, the worker's report, a row of grades.csv.

Statuses (grades.csv shows these strings):

    graded            nbgrader ran every cell and scored the notebook
    timed out         a cell hit the per-cell limit and was interrupted: the other cells still count;
                      a cell that cannot be interrupted, or the whole submission hitting --timeout: 0 points
    crashed           the notebook killed its own kernel: 0 points
    invalid notebook  not JSON, not a notebook, or the lab's notebook is missing: 0 points
    limit exceeded    the submission ran into one of the sandbox's limits (memory, processes, CPU
                      time, disk; ``detail`` names it): 0 points
    grader error      something failed that is not the student's doing (graded again next run)

The worker (the child process that runs nbgrader for one student) writes a ``WorkerReport`` as
JSON; the student's ``Result`` holds it as it came, is kept in ``OUT/results/<student>.json`` and becomes
one row of ``grades.csv``.
"""
from __future__ import annotations

import csv
import json
import re
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path

from .. import bounds

CSV_COLUMNS = ["student", "score", "max_score", "status", "seconds", "detail", "file"]


class Status(StrEnum):
    GRADED = "graded"
    TIMED_OUT = "timed out"
    CRASHED = "crashed"
    INVALID = "invalid notebook"
    LIMIT = "limit exceeded"
    ERROR = "grader error"

    @property
    def is_final(self) -> bool:
        """Grading the same file again would end the same way (a grader error would not)."""
        return self is not Status.ERROR


class Outcome(StrEnum):
    """How one graded part went (a test cell in ``streamlab check``, a check on the feedback page)."""
    PASSED = "passed"
    FAILED = "failed"
    TIMED_OUT = "timed out"
    NOT_RUN = "not run"


@dataclass
class CellGrade:
    """nbgrader's score for one test cell: ``score`` is the final one (after the grader's hidden checks),
    ``auto_score`` what the cell's own tests gave it (None in results written before it was kept)."""
    notebook: str
    grade_id: str
    score: float | None
    max_score: float | None
    auto_score: float | None = None


def _cells(raw: list) -> list[CellGrade]:
    return [cell if isinstance(cell, CellGrade) else CellGrade(**cell) for cell in raw]




def _int_or_none(value):
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def clean_traces(traces) -> list[dict]:
    """State traces as a check sent them, kept to their shape and size (ints, short strings, 40 batches)."""
    kept = []
    for trace in traces if isinstance(traces, list) else []:
        if not isinstance(trace, dict) or not isinstance(trace.get("rows"), list):
            continue
        rows = [{"batch": _int_or_none(r.get("batch")), "yours": _int_or_none(r.get("yours")),
                 "reference": _int_or_none(r.get("reference")), "differ": _int_or_none(r.get("differ")),
                 "example": str(r.get("example", ""))[:200]}
                for r in trace["rows"][:bounds.TRACE_BATCHES] if isinstance(r, dict)]
        kept.append({"title": str(trace.get("title", ""))[:120], "rows": rows,
                     "diverged_at": _int_or_none(trace.get("diverged_at"))})
    return kept[:bounds.TRACES_PER_CHECK]


@dataclass
class CheckResult:
    """One hidden check's verdict on a submission: the test cells it confirms, whether it passed (``detail``:
    why not), and the state traces it drew (the student's state beside the reference's after each batch, see
    ``Artifacts.trace_state``). Made in the checks' process, sent to the worker as JSON, kept in the result."""
    name: str
    cells: list[str]
    passed: bool
    detail: str = ""
    traces: list[dict] = field(default_factory=list)

    @property
    def outcome(self) -> Outcome:
        return Outcome.PASSED if self.passed else Outcome.FAILED

    @classmethod
    def from_dict(cls, raw: dict) -> CheckResult:
        """A check result as the checks' process sent it (or a result file kept it), kept to its shape and size;
        KeyError or TypeError if it is not one."""
        return cls(str(raw["name"]), [str(c) for c in raw["cells"]], bool(raw["passed"]),
                   str(raw.get("detail", ""))[:300], clean_traces(raw.get("traces")))


def _checks(raw: list) -> list[CheckResult]:
    return [check if isinstance(check, CheckResult) else CheckResult.from_dict(check) for check in raw]


@dataclass
class WorkerReport:
    """What the worker found, written as JSON for the grader.

    Either scored (nbgrader scored the notebook: ``score`` and ``max_score`` are numbers and the
    status is ``graded``, or ``timed out`` when some cells were interrupted), or no result
    (``WorkerReport.no_result``): the notebook could not be scored, and the status and detail say why.
    """
    status: Status
    score: float | None = None
    max_score: float | None = None
    detail: str = ""
    autograde_seconds: float | None = None
    startup_seconds: float | None = None   # kernel start + the first code cell (it starts Spark)
    work_seconds: float | None = None      # every other code cell
    checks_seconds: float | None = None    # the lab's hidden checks, run in the worker
    cells: list[CellGrade] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)  # each hidden check's verdict
    usage: dict = field(default_factory=dict)  # in the sandbox: peak_memory_mb, cpu_seconds, disk_mb

    def __post_init__(self):
        self.status = Status(self.status)
        self.cells = _cells(self.cells)
        self.checks = _checks(self.checks)

    @classmethod
    def no_result(cls, status: Status, detail: str, **timings) -> WorkerReport:
        """A report without a score: timed out, crashed, invalid, or the grader's own failure."""
        return cls(status=Status(status), detail=detail, **timings)

    @property
    def scored(self) -> bool:
        return self.score is not None and self.status in (Status.GRADED, Status.TIMED_OUT)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerReport:
        return cls(**json.loads(text))


@dataclass
class Result:
    """One student's outcome: a row of grades.csv, and what the grader keeps to skip it next time. ``report`` is the
    worker's report as it came (None when the submission never reached a worker: invalid, or the grader failed);
    the cells' scores, the hidden checks' verdicts, the timings and the usage are read from it."""
    student: str
    status: Status
    score: float = 0.0
    max_score: float = 0.0
    seconds: float = 0.0
    detail: str = ""
    file: str = ""
    sha256: str = ""
    solution_sha256: str = ""
    grader: str = ""                 # runinfo.grader_version() of the code that graded it
    feedback: str = ""
    log: str = ""
    graded_at: str = ""
    sandboxed: bool = True
    report: WorkerReport | None = None

    def __post_init__(self):
        self.status = Status(self.status)
        if isinstance(self.report, dict):
            self.report = WorkerReport(**self.report)
        if self.report is not None and not isinstance(self.report, WorkerReport):
            raise TypeError("report must be a worker's report")
        for name in ("score", "max_score", "seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number, not {value!r}")
        if not isinstance(self.sandboxed, bool):
            raise TypeError("sandboxed must be true or false")

    @property
    def status_text(self) -> str:
        """The status as grades.csv shows it: a submission graded without the sandbox says so."""
        return self.status.value if self.sandboxed else f"{self.status.value} (no sandbox)"

    def take(self, report: WorkerReport) -> None:
        """Take the worker's report: its status and score if it has one, else 0 points and why."""
        self.report = report
        self.status, self.detail = report.status, report.detail
        if report.scored:
            self.score, self.max_score = float(report.score), float(report.max_score)
        else:
            self.score = 0.0

    @property
    def cells(self) -> list[CellGrade]:
        return list(self.report.cells) if self.report else []

    @property
    def checks(self) -> list[CheckResult]:
        return list(self.report.checks) if self.report else []

    @property
    def usage(self) -> dict:
        return dict(self.report.usage) if self.report else {}

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Result:
        """Raises ValueError or TypeError if ``text`` is not a result this version wrote."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise TypeError("a result is a JSON object")
        return cls(**data)


def format_points(value: float | None) -> str:
    """Points as grades.csv and the feedback show them: 5, 2.50, or empty."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


# OWASP's "CSV Injection": a spreadsheet opening a CSV runs a cell starting with one of these as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
PLAIN_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")


def spreadsheet_safe(cell) -> str:
    """``cell`` as text a spreadsheet shows and never runs: one starting with ``= + - @``, a tab or a carriage
    return gets a leading ``'`` (OWASP's rule for CSV injection), so ``=HYPERLINK(...)`` stays those
    characters. A plain decimal number (``-2.50``) is left as it is: it is no formula, and scores and ids
    written as numbers must stay the numbers an import reads. Every cell the grader writes to a CSV file
    passes through here."""
    text = "" if cell is None else str(cell)
    if text.startswith(FORMULA_STARTS) and not PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def safe_row(row) -> list[str]:
    return [spreadsheet_safe(cell) for cell in row]


ROSTER_COLUMNS = ["id", "name", "email", "section"]
NO_SUBMISSION = "no submission"


def write_atomically(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` so that a reader never sees half a file: through a temporary file of its own in
    the same folder (whatever else lies there), made readable by all, then renamed over ``path``."""
    import os
    import tempfile

    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_csv(path: Path, results: list[Result], roster=None) -> None:
    """Write grades.csv (one row per student, sorted by student), atomically (``write_atomically``). With
    ``roster`` (a ``roster.Matched``), each row also gets the student's id, name, e-mail and section, and the
    roster's students without a submission get a row of their own (status ``no submission``, no score). Every
    cell is ``spreadsheet_safe``: ids, names, details and file names come from students and rosters."""
    import io

    handle = io.StringIO(newline="")
    writer = csv.writer(handle)
    writer.writerow(CSV_COLUMNS + (ROSTER_COLUMNS if roster is not None else []))
    for r in sorted(results, key=lambda r: r.student):
        row = [r.student, format_points(r.score), format_points(r.max_score), r.status_text,
               f"{r.seconds:.1f}", r.detail, r.file]
        if roster is not None:
            who = roster.found.get(r.student)
            row += [who.id, who.name, who.email, who.section] if who else ["", "", "", ""]
        writer.writerow(safe_row(row))
    max_score = max((r.max_score for r in results), default=0.0)
    for who in (roster.missing if roster is not None else []):
        writer.writerow(safe_row(["", "", format_points(max_score), NO_SUBMISSION, "",
                                  "in the roster; no submission in the folder", who.file,
                                  who.id, who.name, who.email, who.section]))
    write_atomically(path, handle.getvalue())
