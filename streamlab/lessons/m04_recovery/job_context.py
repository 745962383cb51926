"""The job's side of ``sl.m04.StreamingJob``: what runs inside the job's own process.

``StreamingJob.start()`` (in ``streamlab.lessons.m04_recovery.jobs``) writes a spec file for the run and starts a
Python process that runs ``main(<spec file>)``. That process imports the job function named in
the spec (``"module:function"``) and calls it with a ``JobContext``: the job's Spark session, and
``ctx.reached_sink(batch_id)``, which reports each batch that reached the sink — and, in a run
started by ``crash_at(batch=N)``, freezes the job right after batch N until the parent kills it.
Reports go to a JSON-lines file the parent reads (``StreamingJob.events()``).
"""
from __future__ import annotations

import importlib
import json
import os
import signal
import threading
import time
from pathlib import Path

from ...stack.session import spark as get_spark

WAIT_S = 120
"""The longest a job helper waits for anything, in seconds (override with ``timeout_s=``)."""


class JobContext:
    """What a job function gets: its Spark session, and the way to report (and freeze at) a batch."""

    def __init__(self, spec: dict):
        self.run_number = spec["run"]
        self.params = spec["params"]
        self.freeze_after_batch = spec.get("freeze_after_batch")
        self.timeout_s = spec.get("timeout_s", WAIT_S)
        self._events = Path(spec["events"])
        self._lock = threading.Lock()

    def spark(self, **conf):
        """The job's SparkSession (``sl.spark(**conf)``, in the job's own process)."""
        return get_spark(**conf)

    def report(self, event: str, **fields) -> None:
        line = json.dumps({"run": self.run_number, "event": event, "time": time.time(), **fields})
        with self._lock, self._events.open("a") as out:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())

    def reached_sink(self, batch_id: int) -> None:
        """Call this after your sink wrote batch ``batch_id``. In a run started with
        ``freeze_after_batch=batch_id`` it then freezes until the parent kills the process."""
        self.report("sink", batch=int(batch_id))
        if self.freeze_after_batch is not None and int(batch_id) == self.freeze_after_batch:
            self.report("frozen", batch=int(batch_id))
            threading.Event().wait(self.timeout_s)  # the parent kills us long before this ends
            os._exit(3)

    def sink(self, write):
        """Wrap a ``foreachBatch`` function so that every batch it wrote is reported."""
        def reporting(batch_df, batch_id):
            write(batch_df, batch_id)
            self.reached_sink(batch_id)
        return reporting

    def run(self, writer) -> None:
        """Start the query of ``writer`` (a ``DataStreamWriter``) and wait until it ends by itself
        (use ``trigger(availableNow=True)``). Exits the process with an error after ``timeout_s``."""
        query = writer.start()
        if not query.awaitTermination(self.timeout_s):
            query.stop()
            raise TimeoutError(f"the query did not finish within {self.timeout_s} s")


def _watch_parent(parent: int) -> None:
    """Kill this job's whole process group as soon as the process that started it is gone."""
    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os.killpg(os.getpgrp(), signal.SIGKILL)
    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def main(spec_file: str) -> int:
    """The job's process: read the run's spec, import the job function, call it with a ``JobContext``."""
    spec = json.loads(Path(spec_file).read_text())
    _watch_parent(spec["parent"])
    module_name, function_name = spec["target"].split(":", 1)
    function = getattr(importlib.import_module(module_name), function_name)
    ctx = JobContext(spec)
    ctx.report("started", pid=os.getpid())
    function(ctx, **spec["params"])
    ctx.report("finished")
    return 0
