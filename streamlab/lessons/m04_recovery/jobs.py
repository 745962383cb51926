"""Run a streaming job in a process of its own, crash it on purpose, and restart it.

A production streaming job runs in its own driver process, and that process can die at any moment
— in the middle of a micro-batch. ``StreamingJob`` gives a notebook or a test such a process: its
own Python and its own Spark driver (JVM), which you can start, kill with ``SIGKILL`` at a chosen
point, wait for, and start again from the same checkpoint::

    job = sl.m04.StreamingJob("streamlab.lessons.m04_recovery:count_requests", topic=topic,
                              checkpoint=ckpt.path, out_topic=out_topic, max_per_batch=20)
    job.crash_at(batch=2)   # runs until batch 2 has reached its sink, then SIGKILL: no commit for 2
    job.run_to_end()        # a new process, the same checkpoint: batch 2 runs again, then the rest
    job.sink_reports()      # which batches reached the sink, in which run (batch 2 twice)

The crash point is exact, with no sleeps: the job calls ``ctx.reached_sink(batch_id)`` after its
sink wrote a batch; in the run started by ``crash_at(batch=N)`` that call, for batch N, reports
back and then **freezes** the job until the parent kills it. So batch N is in the sink and its
``commits/N`` file is never written — the moment a crash hurts most. Every wait is bounded
(``timeout_s``), and a killed job leaves no process behind: the whole process group (Python, the
JVM and Spark's Python workers) goes, and a job whose parent disappears kills itself.

A job is a function ``job(ctx, **params)`` in an importable module, named ``"module:function"``;
``params`` must be JSON values. ``ctx`` (a ``JobContext``) gives it ``ctx.spark()``,
``ctx.reached_sink(batch_id)``, ``ctx.sink(function)`` (wraps a ``foreachBatch`` function so it
reports) and ``ctx.run(writer)`` (starts the query and waits, bounded, until it ends by itself).
This module is the parent's side; the job's side is ``streamlab.lessons.m04_recovery.job_context``, and the jobs the
course runs (``count_requests``, and ``tick`` for rehearsals) are in ``streamlab.lessons.m04_recovery.example_jobs``.

Module 04's other tools live beside it, and every one is ``sl.m04.<name>`` (``streamlab.lessons.m04_recovery``).
"""
from __future__ import annotations

import atexit
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path

from ...stack.paths import data_dir, project_root
from .job_context import WAIT_S, JobContext  # noqa: F401

_POLL_S = 0.1
_CHILD = "import sys; from streamlab.lessons.m04_recovery.job_context import main; sys.exit(main(sys.argv[1]))"
_LIVE_JOBS: weakref.WeakSet[StreamingJob] = weakref.WeakSet()


class JobFailed(RuntimeError):
    """The job's process ended with an error (the message holds the end of its log)."""


# ----------------------------------------------------------------------------- the parent's side

class StreamingJob:
    """A streaming job that runs in a separate process (its own Python and Spark driver).

    ``target``: ``"package.module:function"`` (or such a function itself); ``params``: keyword
    arguments for it, JSON values only. Each ``start()`` is a new *run* (0, 1, 2, ...) of the same
    job: same parameters, so the same checkpoint if ``params`` name one.
    """

    def __init__(self, target, *, name: str | None = None, timeout_s: float = WAIT_S, **params):
        if callable(target):
            module = getattr(target, "__module__", "")
            if module in ("__main__", None) or "<locals>" in target.__qualname__:
                raise ValueError("a job must live in an importable module (a notebook's functions are "
                                 "not visible to another process): pass 'module:function'")
            target = f"{module}:{target.__qualname__}"
        if ":" not in str(target):
            raise ValueError(f"name the job as 'module:function', not {target!r}")
        json.dumps(params)  # fails early, here, if a parameter cannot reach the other process
        self.target = str(target)
        self.params = params
        self.timeout_s = timeout_s
        self.name = name or self.target.rsplit(":", 1)[1].replace("_", "-")
        self.folder = data_dir() / "jobs" / f"{self.name}-{secrets.token_hex(3)}"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.runs = 0
        self._proc: subprocess.Popen | None = None
        self.exit_codes: list[int | None] = []

    def __repr__(self) -> str:
        state = f"running (pid {self._proc.pid})" if self.running else "not running"
        return f"StreamingJob({self.target!r}, run {max(self.runs - 1, 0)}, {state})"

    # -- paths
    @property
    def events_file(self) -> Path:
        return self.folder / "events.jsonl"

    @property
    def log_file(self) -> Path:
        return self.folder / "job.log"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- start, stop, wait
    def start(self, *, freeze_after_batch: int | None = None) -> StreamingJob:
        """Start a new run in a new process. With ``freeze_after_batch=N`` the job freezes right
        after batch N reached its sink (before Spark commits it), waiting to be killed."""
        if self.running:
            raise RuntimeError(f"run {self.runs - 1} of this job is still running: kill() or wait() first")
        spec = {"target": self.target, "params": self.params, "run": self.runs, "parent": os.getpid(),
                "freeze_after_batch": freeze_after_batch, "timeout_s": self.timeout_s,
                "events": str(self.events_file)}
        spec_file = self.folder / f"run-{self.runs}.json"
        spec_file.write_text(json.dumps(spec))
        env = dict(os.environ)
        env.setdefault("STREAMLAB_SPARK_UI", "false")
        env["PYTHONPATH"] = os.pathsep.join(p for p in [str(project_root()), env.get("PYTHONPATH", "")] if p)
        with self.log_file.open("ab") as log:
            log.write(f"\n==== run {self.runs} ====\n".encode())
            log.flush()
            self._proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(spec_file)],
                                          stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True, env=env, cwd=str(self.folder))
        self.runs += 1
        _LIVE_JOBS.add(self)
        return self

    def kill(self) -> int | None:
        """SIGKILL the job's whole process group (Python, its JVM, Spark's Python workers) and
        wait until they are gone. Returns the exit code (``-9``), or None if it was not running."""
        if self._proc is None:
            return None
        proc = self._proc
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        code = proc.wait(timeout=30)
        _wait_group_gone(proc.pid)
        self._record_exit(code)
        return code

    def wait(self, timeout_s: float | None = None) -> int:
        """Wait until the running job ends by itself; returns its exit code (0).

        Raises ``TimeoutError`` (after killing it) if it is still running after ``timeout_s``,
        and ``JobFailed`` if it ended with an error."""
        if self._proc is None:
            raise RuntimeError("the job was never started")
        limit = self.timeout_s if timeout_s is None else timeout_s
        try:
            code = self._proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            self.kill()
            raise TimeoutError(f"job {self.name!r} did not finish within {limit:g} s (it was killed); "
                               f"its log: {self.log_file}") from None
        _wait_group_gone(self._proc.pid)
        self._record_exit(code)
        if code != 0:
            raise JobFailed(f"job {self.name!r} (run {self.runs - 1}) exited with code {code}:\n{self.log_tail()}")
        return code

    def wait_for_batch(self, batch_id: int, timeout_s: float | None = None) -> dict:
        """Wait until the current run reports that ``batch_id`` reached its sink; returns that report.

        Raises ``TimeoutError`` (after killing the job) when it does not come within ``timeout_s``,
        and ``JobFailed`` if the job ends first."""
        return self._wait_for(batch_id, "sink", timeout_s)

    def _wait_for(self, batch_id: int, what: str, timeout_s: float | None) -> dict:
        """Wait for the current run's ``what`` report (``sink`` or ``frozen``) of ``batch_id``."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        run = self.runs - 1
        deadline = time.monotonic() + limit
        while True:
            for event in self.events():
                if event["run"] == run and event["event"] == what and event["batch"] == batch_id:
                    return event
            if self._proc is None or self._proc.poll() is not None:
                code = None if self._proc is None else self._proc.returncode
                raise JobFailed(f"job {self.name!r} ended (code {code}) before batch {batch_id} reached "
                                f"its sink:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"batch {batch_id} of job {self.name!r} did not reach its sink within "
                                   f"{limit:g} s (the job was killed); its log: {self.log_file}")
            time.sleep(_POLL_S)

    # -- the two things a lesson does with a job
    def crash_at(self, batch: int, timeout_s: float | None = None) -> dict:
        """Start a run, let it work until ``batch`` has reached its sink, and SIGKILL it there —
        after the sink wrote the batch, before Spark wrote ``commits/<batch>``.
        Returns the crash report: ``{"run", "batch", "exit_code", "seconds"}``."""
        started = time.monotonic()
        self.start(freeze_after_batch=batch)
        try:
            # "frozen", not "sink": the job reports the sink, then freezes; killed in between, the
            # run's report would lack the frozen point (the parent raced the job's next line)
            self._wait_for(batch, "frozen", timeout_s)
        finally:
            code = self.kill()
        return {"run": self.runs - 1, "batch": batch, "exit_code": code,
                "seconds": round(time.monotonic() - started, 1)}

    def run_to_end(self, timeout_s: float | None = None) -> dict:
        """Start a run and wait until it ends by itself (the job processes what its source holds
        now and stops). Returns ``{"run", "exit_code", "seconds", "batches"}`` (batches that
        reached the sink in this run)."""
        started = time.monotonic()
        self.start()
        code = self.wait(timeout_s)
        run = self.runs - 1
        batches = [e["batch"] for e in self.events() if e["run"] == run and e["event"] == "sink"]
        return {"run": run, "exit_code": code, "seconds": round(time.monotonic() - started, 1),
                "batches": batches}

    # -- what happened
    def events(self) -> list[dict]:
        """Everything the job reported, oldest first: ``{"run", "event", "batch", "time"}``
        (events: ``started``, ``sink``, ``frozen``, ``finished``)."""
        try:
            lines = self.events_file.read_text().splitlines()
        except FileNotFoundError:
            return []
        events = []
        for line in lines:
            try:
                events.append(json.loads(line))
            except ValueError:  # a line being written right now
                continue
        return events

    def sink_reports(self):
        """One row per batch that reached the sink, per run: a pandas DataFrame (run, batch).
        A batch listed in two runs was written twice: the crash made Spark run it again."""
        import pandas as pd

        rows = [{"run": e["run"], "batch": e["batch"]} for e in self.events() if e["event"] == "sink"]
        return pd.DataFrame(rows, columns=["run", "batch"])

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def processes(self) -> list:
        """The processes of the current run still alive (psutil objects; [] once it is gone)."""
        if self._proc is None:
            return []
        return _group_members(self._proc.pid)

    def _record_exit(self, code) -> None:
        if len(self.exit_codes) < self.runs:
            self.exit_codes.append(code)


def _group_members(pgid: int) -> list:
    import psutil

    members = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.info["pid"]) == pgid:
                members.append(proc)
        except (ProcessLookupError, psutil.Error, OSError):
            continue
    return members


def _wait_group_gone(pgid: int, timeout_s: float = 30) -> None:
    """After the group leader is dead, make sure the rest of its group is too."""
    deadline = time.monotonic() + timeout_s
    while _group_members(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of group {pgid} survived SIGKILL")
        time.sleep(_POLL_S)


@atexit.register
def _kill_live_jobs() -> None:
    for job in list(_LIVE_JOBS):
        if job.running:
            job.kill()
