"""What drawing the student's state per batch costs the grader (``run.trace_state``). Reports numbers; asserts nothing.

    .venv/bin/python benchmarks/trace_cost.py [LAB] [--runs 5]

Runs LAB's solution notebook once (default lab02_keyed_state, whose checks trace Parts B and C) with its hidden
checks, as ``streamlab check --hidden-checks`` does, keeping what it left; then runs those checks again on it,
``--runs`` times with the traces and ``--runs`` times with ``trace_state`` made a no-op, alternately, in one Spark
session (as the grader's checks process does). Printed: the medians of the whole checks' time, the batches traced
and the reading time per traced batch.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

from streamlab.grading.hidden_checks import Artifacts, load_checks, run_checks
from streamlab.grading.sandbox.isolation import delete_prefixed
from streamlab.grading.selfcheck import format_report, run_selfcheck

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lab", nargs="?", default="lab02_keyed_state")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    notebook = ROOT / "solutions" / args.lab / f"{args.lab}.ipynb"
    ran = run_selfcheck(notebook, hidden_checks=True, keep=True)
    try:
        if not ran.passed:
            print("the solution does not pass its own checks:\n" + format_report(ran))
            return 1
        return measure(args, Artifacts(ran.kept["data_dir"], ran.kept["topic_prefix"]))
    finally:
        if ran.kept:
            delete_prefixed(ran.kept["topic_prefix"])
            shutil.rmtree(ran.kept["work"], ignore_errors=True)  # the check's work folder


def measure(args, artifacts: Artifacts) -> int:
    checks = load_checks(ROOT / "solutions" / args.lab / "hidden_checks.py")
    traced = Artifacts.trace_state

    def untraced(self, title, ckpt, expected, read, **options):
        return None

    with_trace, without, batches = [], [], 0
    for _ in range(args.runs):
        for times, method in ((with_trace, traced), (without, untraced)):
            Artifacts.trace_state = method
            started = time.perf_counter()
            outcome = run_checks(checks, artifacts)
            times.append(time.perf_counter() - started)
            if method is traced:
                batches = sum(len(t["rows"]) for r in outcome for t in r.traces)
    Artifacts.trace_state = traced
    on, off = statistics.median(with_trace), statistics.median(without)
    print(f"{args.lab}: checks {off:.2f} s without traces, {on:.2f} s with them (median of {args.runs}); "
          f"{batches} batches traced, {(on - off) / max(batches, 1):.2f} s per traced batch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
