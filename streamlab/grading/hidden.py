"""Hidden checks in the grader: confirm each test cell's points outside the student's kernel.

After nbgrader has run the notebook (and the student's kernel is gone), the worker runs the lab's
``hidden_checks.py`` (see ``streamlab.grading.hidden_checks``) in its own process, on what the run left in the
submission's data folder and topics. A test cell keeps nbgrader's points only if every check
naming it passed; otherwise its score in the gradebook is set to 0 before the feedback is written.
The feedback page then gets a short table of the checks (name, passed or why not) — never their code.
"""
from __future__ import annotations

import hashlib
import html
from dataclasses import asdict, dataclass
from pathlib import Path

from ..stack.session import spark as get_spark
from .hidden_checks import Artifacts, load_checks, run_checks


@dataclass
class CheckOutcome:
    """One hidden check's result, as the worker reports it."""
    name: str
    cells: list[str]
    passed: bool
    detail: str = ""


def checks_file(solutions: Path, lab: str) -> Path | None:
    path = Path(solutions) / lab / "hidden_checks.py"
    return path if path.is_file() else None


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class SparkStarter:
    """Start the checks' SparkSession in a background thread while the notebook runs, so the
    checks do not wait for a JVM to start afterwards."""

    def __init__(self):
        import threading

        self.session = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._start, daemon=True, name="checks-spark")
        self._thread.start()

    def _start(self):
        try:
            self.session = get_spark(app_name="streamlab-hidden-checks")
        except BaseException as err:  # reported when the checks need Spark
            self.error = err

    def get(self, timeout_s: float = 300):
        self._thread.join(timeout_s)
        if self.session is None:
            raise RuntimeError(f"Spark for the hidden checks did not start: {self.error}")
        return self.session


def run_hidden_checks(path: Path, expected_sha256: str | None = None, *,
                      spark: SparkStarter | None = None, keep_spark: bool = False) -> list[CheckOutcome]:
    """Run the checks in ``path`` on this process's data folder and topic prefix.

    Spark (``spark``'s session, or one started here) is stopped afterwards, unless ``keep_spark``:
    a warm worker keeps it for the next submission's checks.

    Refuses (raises RuntimeError) if the file's bytes are not the ones the grader hashed.
    """
    checks = load_checks(path, expected_sha256)
    artifacts = Artifacts()
    if spark is not None:
        artifacts.spark = spark.get  # the session started while the notebook ran
    try:
        results = run_checks(checks, artifacts)
    finally:
        session = artifacts._spark or (spark.session if spark is not None else None)
        if session is not None and not keep_spark:
            stop_spark_and_jvm(session)
    return [CheckOutcome(r.name, list(r.cells), r.passed, r.detail) for r in results]


def stop_spark_and_jvm(session) -> None:
    """Stop Spark and its JVM now, so the grader's sweep does not count the JVM as a process the
    submission left running."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    session.stop()
    proc = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except Exception:  # still there: the grader's sweep kills it
            pass


def unconfirmed_cells(outcomes: list[CheckOutcome]) -> set[str]:
    """The test cells at least one failed check names: they score 0."""
    return {cell for o in outcomes if not o.passed for cell in o.cells}


def withdraw_points(gradebook, lab: str, student: str, cells: set[str]) -> None:
    """Set the score of each of ``cells`` to 0 in nbgrader's gradebook (as a manual score, which
    nbgrader's totals and feedback use instead of the automatic one)."""
    submission = gradebook.find_submission(lab, student)
    for notebook in submission.notebooks:
        for grade in notebook.grades:
            if grade.name in cells and (grade.score or 0) > 0:
                grade.manual_score = 0.0
    gradebook.db.commit()


def no_extra_credit(gradebook, lab: str, student: str) -> None:
    """Extra credit is the instructor's to give by hand, never a submission's: set it to 0 everywhere."""
    submission = gradebook.find_submission(lab, student)
    for notebook in submission.notebooks:
        for grade in notebook.grades:
            if grade.extra_credit:
                grade.extra_credit = 0.0
    gradebook.db.commit()


def summary_detail(outcomes: list[CheckOutcome]) -> str:
    """For grades.csv: which parts the grader's checks did not confirm, and why."""
    failed = [o for o in outcomes if not o.passed]
    if not failed:
        return ""
    return "not confirmed by the grader's checks: " + "; ".join(f"{o.name} ({o.detail})" for o in failed)


def summary_html(outcomes: list[CheckOutcome]) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(o.name)}</td><td>{html.escape(', '.join(o.cells))}</td>"
        f"<td>{'passed' if o.passed else 'failed: ' + html.escape(o.detail)}</td></tr>"
        for o in outcomes)
    return ('<div id="streamlab-hidden-checks" style="font-family:sans-serif;margin:1em 2em;padding:.5em 1em;'
            'border:1px solid #999"><h2>Checked by the grader</h2><p>After your notebook ran, the grader '
            'checked what each part left behind (its checkpoints and Kafka topics). A test cell earns its '
            'points only if these checks confirm it.</p><table><tr><th>check</th><th>test cells</th>'
            f'<th>result</th></tr>{rows}</table></div>')


def add_summary_to_feedback(feedback_dir: Path, outcomes: list[CheckOutcome]) -> None:
    """Put the checks' table at the top of every feedback page nbgrader wrote."""
    block = summary_html(outcomes)
    for page in Path(feedback_dir).glob("*.html"):
        text = page.read_text(encoding="utf-8")
        marker = text.find("<body")
        if marker < 0:
            text = block + text
        else:
            end = text.index(">", marker) + 1
            text = text[:end] + block + text[end:]
        page.write_text(text, encoding="utf-8")


def as_dicts(outcomes: list[CheckOutcome]) -> list[dict]:
    return [asdict(o) for o in outcomes]
