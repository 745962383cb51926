"""Warm workers: one grading process serves many submissions, one after another.

Starting a worker per student cost every submission a fresh Python with nbgrader imported. A
``WarmWorker`` keeps one process for a whole ``--jobs`` slot instead and sends it the submissions in
turn. What stays per student is everything the student's code, or what it made, can touch:

* a fresh kernel (nbgrader starts one per notebook), with the student's environment: their tag,
  Kafka topic prefix, data folder (``isolation.submission_environment``);
* fresh hidden checks, in a process and sandbox of their own (``hidden.ChecksProcess``), whose Spark
  starts while the notebook runs: a checkpoint crafted to break them breaks only its own student's;
* the wall-clock limit: when a submission runs out of time, the worker is killed with everything
  carrying the student's tag, and the next submission gets a new worker;
* the sweep after each submission: whatever carries the student's tag and still runs is killed.

The worker carries a tag of its own (``<run>-worker<N>``), so the sweep never hits it and the end
of the run does. When the grader sandboxes submissions, the worker itself runs within a memory limit of its
own (``bounds.WORKER_MEMORY_MB``, a control group): nbgrader parses and writes what the student's kernel sent, and a
notebook built to grow in that parsing (copies of one display update, metadata of millions of objects) stops
the worker at that limit, which that submission's row reports as a limit it hit, never the machine's memory
or the next student's grade. Requests and reports travel over a socket that kernels do not inherit; each
report carries the request's nonce, so output a student's code writes anywhere else cannot pass
for one.
"""
from __future__ import annotations

import json
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from ..labs import GradingError
from ..outputs.results import Status, WorkerReport
from ..sandbox.isolation import kill_submission_processes
from ..sandbox.limits import ControlGroups, Limits
from .context import SubmissionContext


@dataclass
class Turn:
    """How one submission's turn on a warm worker ended (``results.Outcome`` is a test's or a check's)."""
    report: WorkerReport | None   # None: the worker died or was stopped without reporting
    hit_limit: bool               # still running at the whole-submission limit (then stopped)
    killed: int                   # processes stopped afterwards (left running by the notebook)
    detail: str = ""              # why there is no report
    memory_limit: bool = False    # the worker was stopped at its own memory limit (``bounds.WORKER_MEMORY_MB``)


WORKER = [sys.executable, "-m", "streamlab.grading.workers.worker", "--serve"]  # + the channel's fd


class WarmWorker:
    def __init__(self, tag: str, *, env: dict, cwd: Path, log_path: Path,
                 checks: Path | None = None, checks_sha256: str | None = None, command: list[str] = WORKER,
                 memory_mb: int | None = None):
        self.command = command
        self.memory_mb = memory_mb  # the worker's own memory limit (None: none)
        self.groups: ControlGroups | None = None
        self.tag = tag
        self.env = env
        self.cwd = cwd
        self.log_path = log_path
        self.checks, self.checks_sha256 = checks, checks_sha256
        self.proc: subprocess.Popen | None = None
        self.channel: Connection | None = None
        self.started = 0  # how many processes this slot has needed (1 unless one was stopped)

    def _start(self) -> None:
        groups = None
        if self.memory_mb is not None:  # made first: a worker whose group cannot be made is never started
            groups = ControlGroups(f"streamlab-{self.tag}-{self.started + 1}",
                                   Limits(memory_mb=self.memory_mb, processes=4096))
        ours, theirs = socket.socketpair()
        command = [*self.command, str(theirs.fileno())]
        if self.checks:
            command += ["--checks", str(self.checks), "--checks-sha256", self.checks_sha256]
        try:
            with self.log_path.open("ab") as log:
                self.proc = subprocess.Popen(command, env=self.env, cwd=str(self.cwd), stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                             pass_fds=(theirs.fileno(),))
        except OSError:
            ours.close()
            if groups is not None:
                groups.remove()
            raise
        finally:
            theirs.close()
        self.channel = Connection(ours.detach())
        self.started += 1
        self.groups = groups
        if groups is not None:
            groups.join(self.proc.pid)

    def _hit_its_memory(self) -> bool:
        """Whether the worker was stopped at its own memory limit (what a notebook made nbgrader parse)."""
        return self.groups is not None and any(hit.startswith("memory") for hit in self.groups.hits())

    def grade(self, context: SubmissionContext, *, timeout_s: float) -> Turn:
        """Send one submission (``context``) and wait at most ``timeout_s`` for its report; then sweep away
        what the student left running (the processes carrying ``context.tag``)."""
        student_tag = context.tag
        if self.proc is None or self.proc.poll() is not None:
            self._stop()
            self._start()
        nonce = secrets.token_hex(16)
        deadline = time.monotonic() + timeout_s
        report, detail, hit_limit, memory_limit = None, "", False, False
        try:
            self.channel.send_bytes(json.dumps({**asdict(context), "nonce": nonce}).encode())
            while report is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    hit_limit = True
                    break
                if self.channel.poll(min(remaining, 1.0)):
                    message = json.loads(self.channel.recv_bytes())
                    if message.get("nonce") == nonce:
                        report = WorkerReport.from_json(message["report"])
                elif self.proc.poll() is not None:
                    detail = f"the grading process ended (exit status {self.proc.returncode}) without a report"
                    break
        except (EOFError, OSError) as err:
            detail = f"the grading process stopped answering ({type(err).__name__})"
        if report is None:  # timed out or died: it goes, with everything the student started
            memory_limit = self._hit_its_memory()
            killed = kill_submission_processes(self.proc, student_tag)
            self._stop()
        else:
            killed = kill_submission_processes(None, student_tag)
        return Turn(report, hit_limit, killed, detail, memory_limit)

    def report(self, context: SubmissionContext, *, timeout_s: float) -> tuple[WorkerReport, int]:
        """``grade``, then what it came to: the worker's report (timed out at ``timeout_s``: a report saying so),
        and how many processes left running were stopped. GradingError if the worker died without one."""
        turn = self.grade(context, timeout_s=timeout_s)
        if turn.hit_limit:
            return WorkerReport.no_result(Status.TIMED_OUT, f"the submission did not finish within {timeout_s:g} s; "
                                                            f"it was stopped (with its kernel and Spark)"), turn.killed
        if turn.report is None and turn.memory_limit:
            return WorkerReport.no_result(
                Status.LIMIT, f"limit exceeded: the grader's memory for reading this notebook ({self.memory_mb} MB); "
                              f"what its kernel sent grew past it while nbgrader read it; the submission scores 0"
            ), turn.killed
        if turn.report is None:
            raise GradingError(f"{turn.detail}; see {context.log} and {self.log_path}")
        return turn.report, turn.killed

    def _stop(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=15)  # the closed channel ends its loop; it stops its Spark
            except subprocess.TimeoutExpired:
                pass
            kill_submission_processes(self.proc, self.tag)
            self.proc = None
        if self.groups is not None:
            self.groups.kill_all()
            self.groups.remove()
            self.groups = None

    def close(self) -> None:
        """Let the worker finish (it stops its Spark), then make sure nothing of it is left."""
        self._stop()
