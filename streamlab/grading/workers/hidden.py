"""Hidden checks in the grader: confirm each test cell's points outside the student's kernel.

After nbgrader has run the notebook (and the student's kernel is gone), the worker runs the lab's
``hidden_checks.py`` (see ``streamlab.grading.hidden_checks``) on what the run left in the submission's
data folder and topics, in a process of their own (``ChecksProcess``, the child ``checks_runner``): a fresh
Spark per submission, started while the notebook runs, in a sandbox of its own with its own limits and a
read-only view of the student's data folder. A test cell keeps nbgrader's points only if every check naming
it passed; otherwise its score in the gradebook is set to 0 before the feedback is written. When the checks
themselves break (their process dies, hits a limit or its JVM fails), the student is not scored at all:
``ChecksBroken``, a grader error, graded again by the next run. The feedback page then gets a short table
of the checks (name, passed or why not), never their code (``outputs.verdicts``).
"""
from __future__ import annotations

import hashlib
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

from .. import bounds
from ..bounds import MB
from ..outputs.results import CheckResult
from ..sandbox.box import output_tail
from ..sandbox.limits import Limits

# What one submission's checks may use. A lab's checks peak at ~1.3 GB (their Spark driver has 1 GB of heap).
CHECKS_LIMITS = Limits(memory_mb=bounds.CHECKS_MEMORY_MB, processes=bounds.CHECKS_PROCESSES,
                       cpu_seconds=bounds.CHECKS_CPU_SECONDS, disk_mb=bounds.CHECKS_DISK_MB)


class ChecksBroken(RuntimeError):
    """The hidden checks could not give a verdict: their process or runtime failed (not the student's doing)."""


def checks_work(data_dir: Path) -> Path:
    """The hidden checks' own work folder for the submission whose data folder is ``data_dir``: beside the
    submission's work folder, never inside it (the student writes there)."""
    work = Path(data_dir).parent
    return work.with_name(work.name + ".checks")


def checks_file(solutions: Path, lab: str) -> Path | None:
    path = Path(solutions) / lab / "hidden_checks.py"
    return path if path.is_file() else None


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class ChecksProcess:
    """One submission's hidden checks, in a process of their own: ``python -m streamlab.grading.workers.checks_runner``.

    Started when the submission's turn begins: its Spark starts while the notebook runs, as soon as the run
    commits a batch (none for a run that commits nothing: see ``checks_runner``). With ``make_box`` (a function
    making a ``Sandbox`` for it), the process runs in that sandbox: its own limits, user, processes and network
    (Kafka through the door), the student's data folder read-only. ``run()`` waits for it to be ready (its Spark,
    if started, answered a query), replaces one that could not start once, then checks.
    """

    def __init__(self, checks: Path, checks_sha256: str, *, student_data: Path, topic_prefix: str, env: dict,
                 log: Path | None = None, make_box: Callable[[], object] | None = None):
        self.command = [sys.executable, "-m", "streamlab.grading.workers.checks_runner", str(checks),
                        "--sha256", checks_sha256, "--student-data", str(student_data),
                        "--topic-prefix", topic_prefix]
        # log: a file for its stdout and stderr, in its own work folder (within its disk limit); None: ours
        self.env, self.log, self.make_box = env, log, make_box
        self.box = None
        self.proc: subprocess.Popen | None = None
        self.started = 0
        self.spark_before_checks = False  # its Spark was running when the checks began
        self._buffer = b""
        self._start()

    def _start(self) -> None:
        self.box = self.make_box() if self.make_box is not None else None
        command = self.box.command(*self.command) if self.box is not None else self.command
        cwd = self.box.work if self.box is not None else Path(self.env["STREAMLAB_DATA_DIR"]).parent
        Path(cwd).mkdir(parents=True, exist_ok=True)
        with (open(self.log, "ab") if self.log is not None else nullcontext(sys.stderr)) as log:
            self.proc = subprocess.Popen(command, env=self.env, cwd=str(cwd), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log, start_new_session=True)
        self._buffer = b""
        self.started += 1

    def _why_gone(self) -> str:
        hit = self.box.limits_hit() if self.box is not None else []
        code = self.proc.poll()
        return (f"the checks' process hit a limit: {', '.join(hit)}" if hit else
                f"the checks' process ended (exit status {code})" if code is not None else
                "the checks' process stopped answering")

    def _receive(self, wait_s: float) -> dict:
        """The next JSON line from the process, within ``wait_s``; ChecksBroken if none comes."""
        deadline = time.monotonic() + wait_s
        out = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChecksBroken(f"the checks gave no answer within {wait_s:g} s")
            ready, _, _ = select.select([out], [], [], min(remaining, 1.0))
            if not ready:
                if self.proc.poll() is not None:
                    raise ChecksBroken(self._why_gone())
                continue
            chunk = os.read(out, 65536)
            if not chunk:
                self.proc.wait(timeout=10)
                raise ChecksBroken(self._why_gone())
            self._buffer += chunk
            if len(self._buffer) > bounds.CHECKS_MESSAGE_BYTES:
                raise ChecksBroken(f"the checks' answer is longer than {bounds.CHECKS_MESSAGE_BYTES // MB} MB")
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            message = json.loads(line)
        except ValueError as err:
            raise ChecksBroken(f"the checks' answer is not JSON ({err})") from err
        if not isinstance(message, dict):
            raise ChecksBroken("the checks' answer is not a JSON object")
        return message

    def _go(self, wait_s: float) -> None:
        """Tell the process the kernel is gone, then wait for it to be ready (its Spark started if the run
        committed a batch). A process that already said it could not start, or died, is ChecksBroken here."""
        try:
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.flush()
        except OSError:
            pass  # gone already: what it said before it went (or its exit) is read below
        message = self._receive(wait_s)
        if message.get("ready") is not True:
            raise ChecksBroken(f"the checks did not start: {message.get('error', message)}")
        self.spark_before_checks = bool(message.get("spark"))

    def run(self, *, ready_wait_s: float = bounds.CHECKS_READY_WAIT_S,
            wait_s: float = bounds.CHECKS_WAIT_S) -> list[CheckResult]:
        """The checks on what the submission left, once the process is ready (replacing one that could not
        start, once)."""
        try:
            self._go(ready_wait_s)
        except ChecksBroken as first:
            print(f"hidden checks: {first}; starting them again", file=sys.stderr)
            self.close()
            self._start()
            self._go(ready_wait_s)
        message = self._receive(wait_s)
        if "error" in message:
            raise ChecksBroken(str(message["error"])[:500])
        try:
            return [CheckResult.from_dict(o) for o in message["verdicts"]]
        except (KeyError, TypeError) as err:
            raise ChecksBroken(f"the checks' answer is malformed ({err})") from err

    def close(self) -> None:
        """Stop the process (and everything in its sandbox), copy the end of its output into this process's
        stderr (the student's log), and remove its sandbox and work folder."""
        if self.proc is not None:
            if self.box is not None:
                self.box.stop()
            if self.proc.poll() is None:
                self.proc.kill()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            self.proc = None
        if self.log is not None and (tail := output_tail(self.log)):
            print(f"--- the hidden checks' own output, its end ---\n{tail}\n---", file=sys.stderr)
        if self.box is not None:
            self.box.close()
            self.box.remove_work()
            self.box = None


def unconfirmed_cells(verdicts: list[CheckResult]) -> set[str]:
    """The test cells at least one failed check names: they score 0."""
    return {cell for o in verdicts if not o.passed for cell in o.cells}


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
