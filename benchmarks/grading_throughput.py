"""How close grading a class gets to the lab's own run time. Reports numbers; asserts nothing.

    .venv/bin/python benchmarks/grading_throughput.py [--copies 20] [--jobs 1 2] [--lab lab01] [--sandbox both]

1. The lab's own time: the reference solution executed top to bottom by plain nbclient on a fresh
   kernel, in the environment a submission gets (its own topic prefix and data folder), three
   times; the median counts.
2. Grading: ``streamlab grade`` over ``--copies`` copies of the same reference solution, once for
   each ``--jobs`` and each sandbox setting (``--sandbox both``: sandboxed, then ``--no-sandbox``, in the
   same run); the wall time of the whole run divided by the copies is the time per submission.

    .venv/bin/python benchmarks/grading_throughput.py --class [--copies 6] [--labs lab02 lab06]

``--class``: a class of every lab instead (or of the ``--labs`` named), the way an instructor grades one: ``--copies``
copies of each of the seven labs' reference solutions, ``--jobs 2``, in the sandbox; a table of seconds per
submission for each lab, against the goal (18 s: a class of 200 in an hour), and the minutes a class of 200 of it
would take.

Per-submission overhead = time per submission - the lab's own time. Every copy must get full marks,
or the numbers are not reported as valid. While each grading run goes, the grader's warm workers are
sampled every 0.2 s: their peak memory (RSS) and threads are printed too (the student's kernel and the
hidden checks run in processes and sandboxes of their own, with limits of their own).
"""
from __future__ import annotations

import argparse
import csv
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from streamlab import grading
from streamlab.grading.sandbox.isolation import (
    delete_prefixed,
    kill_submission_processes,
    submission_environment,
)
from streamlab.stack.kafka import bootstrap_servers


def own_time(lab: str, notebook) -> float:
    """Seconds plain nbclient takes to run ``notebook`` on a fresh kernel, as a submission would."""
    tag = f"bench-{secrets.token_hex(3)}"
    workdir = Path(tempfile.mkdtemp(prefix="streamlab-bench-"))
    env = submission_environment(tag, bootstrap=bootstrap_servers(), workdir=workdir)
    client = NotebookClient(nbformat.from_dict(notebook), timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(workdir)}})
    try:
        started = time.monotonic()
        client.execute(env=env)
        return time.monotonic() - started
    finally:
        kill_submission_processes(None, tag)
        delete_prefixed(env["STREAMLAB_TOPIC_PREFIX"])
        shutil.rmtree(workdir, ignore_errors=True)


class WorkerWatch:
    """Samples the grader's warm workers (``streamlab.grading.workers.worker``) in a thread: peak RSS, threads."""

    def __init__(self, every_s: float = 0.2):
        import threading

        self.peak_rss_mb = 0.0
        self.peak_threads = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(every_s,), daemon=True)
        self._thread.start()

    def _watch(self, every_s: float) -> None:
        import psutil

        while not self._done.wait(every_s):
            for proc in psutil.process_iter(["cmdline"]):
                try:
                    line = " ".join(proc.info["cmdline"] or [])
                    if "streamlab.grading.workers.worker" in line and "--serve" in line:
                        self.peak_rss_mb = max(self.peak_rss_mb, proc.memory_info().rss / 2**20)
                        self.peak_threads = max(self.peak_threads, proc.num_threads())
                except psutil.Error:
                    continue

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def grade(lab: str, folder: Path, jobs: int, out: Path,
          sandboxed: bool = True) -> tuple[float, list[dict], WorkerWatch]:
    watch = WorkerWatch()
    started = time.monotonic()
    try:
        subprocess.run([sys.executable, "-m", "streamlab", "grade", lab, str(folder), "--out", str(out),
                        "--jobs", str(jobs), "--force", *([] if sandboxed else ["--no-sandbox"])],
                       check=True, stdout=subprocess.DEVNULL)
    finally:
        watch.stop()
    seconds = time.monotonic() - started
    with (out / "grades.csv").open() as f:
        return seconds, list(csv.DictReader(f)), watch


GOAL_S = 18  # seconds per submission: a class of 200 in an hour


def class_table(copies: int, labs: list[str] | None = None) -> int:
    """Each lab (of ``labs``: names or unique prefixes, e.g. lab06; all when None) graded as a class (``copies``
    copies of its reference, two jobs, sandboxed): seconds per submission."""
    print(f"a class of each lab: {copies} copies of its reference, --jobs 2, sandboxed; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'lab':<32} {'total s':>8} {'per submission s':>17} {'class of 200 min':>17} {'goal':>5}  scores")
    per_lab = []
    for lab in [grading.resolve_lab(name) for name in labs] if labs else grading.find_labs():
        reference = grading.reference_notebook(lab, grading.lab_notebooks(lab)[0])
        with tempfile.TemporaryDirectory(prefix="streamlab-bench-class-") as tmp:
            folder = Path(tmp) / "submissions"
            folder.mkdir()
            for i in range(copies):
                nbformat.write(reference, folder / f"student{i:02d}.ipynb")
            seconds, rows, _ = grade(lab, folder, 2, Path(tmp) / "out")
        per = seconds / copies
        per_lab.append(per)
        full = sum(1 for r in rows if r["status"] == "graded" and float(r["score"]) == float(r["max_score"]))
        valid = "" if full == copies else "  (NOT VALID: not every copy got full marks)"
        print(f"{lab:<32} {seconds:>8.1f} {per:>17.1f} {200 * per / 60:>17.0f} {'met' if per <= GOAL_S else 'over':>5}"
              f"  {full}/{copies} full marks{valid}", flush=True)
    mean = statistics.mean(per_lab)
    print(f"{'all labs, mean':<32} {'':>8} {mean:>17.1f} {200 * mean / 60:>17.0f} "
          f"{'met' if mean <= GOAL_S else 'over':>5}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lab", default="lab01")
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--own-runs", type=int, default=3)
    parser.add_argument("--sandbox", choices=["both", "on", "off"], default="both")
    parser.add_argument("--class", dest="class_table", action="store_true",
                        help="grade a class of each of the seven labs (--copies each, --jobs 2) and print a table")
    parser.add_argument("--labs", nargs="+", metavar="LAB", help="with --class: only these labs (e.g. lab02 lab06)")
    args = parser.parse_args()
    if args.class_table:
        return class_table(args.copies if args.copies != parser.get_default("copies") else 6, args.labs)
    lab = grading.resolve_lab(args.lab)
    name = grading.lab_notebooks(lab)[0]
    reference = grading.reference_notebook(lab, name)
    print(f"{lab}: {args.copies} copies of the reference solution; load average {os.getloadavg()[0]:.1f}")

    runs = [own_time(lab, reference) for _ in range(args.own_runs)]
    own = statistics.median(runs)
    print(f"lab's own time (plain nbclient, fresh kernel): median {own:.1f} s of {[round(r, 1) for r in runs]}")

    with tempfile.TemporaryDirectory(prefix="streamlab-bench-grade-") as tmp:
        folder = Path(tmp) / "submissions"
        folder.mkdir()
        for i in range(args.copies):
            nbformat.write(reference, folder / f"student{i:02d}.ipynb")
        print(f"{'jobs':>4} {'sandbox':>7} {'total s':>8} {'per submission s':>17} {'overhead s':>11} "
              f"{'worker MB':>9} {'threads':>7}  scores")
        modes = {"both": [True, False], "on": [True], "off": [False]}[args.sandbox]
        for jobs in args.jobs:
            for sandboxed in modes:
                out = Path(tmp) / f"out-jobs{jobs}-{'sandbox' if sandboxed else 'bare'}"
                seconds, rows, watch = grade(lab, folder, jobs, out, sandboxed)
                per = seconds / args.copies
                full = sum(1 for r in rows if r["status"].startswith("graded")
                           and float(r["score"]) == float(r["max_score"]))
                valid = "" if full == args.copies else "  (NOT VALID: not every copy got full marks)"
                print(f"{jobs:>4} {'yes' if sandboxed else 'no':>7} {seconds:>8.1f} {per:>17.1f} {per - own:>11.1f} "
                      f"{watch.peak_rss_mb:>9.0f} {watch.peak_threads:>7}  {full}/{args.copies} full marks{valid}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
