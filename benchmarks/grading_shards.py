"""One run against shards: the same grades, and what the merge costs. Reports numbers; asserts nothing.

    flock /tmp/streamlab-heavy.lock .venv/bin/python benchmarks/grading_shards.py [--copies 12] [--jobs 2]

A folder of ``--copies`` copies of a lab's reference solution and as many blank labs is graded
1. as one run: ``streamlab grade LAB FOLDER --jobs J``;
2. as 2 shards run one after the other (``--shard 1/2``, then ``--shard 2/2``, each with ``--jobs J``: two
   machines of this size, taking turns on this one), then ``streamlab grade merge``.
It prints the wall time of each, the merge's own cost (the whole command, and the merge inside it), and
whether the merged grades.csv is the single run's (every column but the seconds). On N machines the shards
run at the same time: the class takes about the slowest shard's time plus the merge.
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from streamlab import grading


def run(*args: str) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "streamlab", *args], check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def grades(path: Path) -> dict[str, tuple]:
    with path.open(newline="") as handle:
        return {r["student"]: (r["score"], r["max_score"], r["status"], r["detail"]) for r in csv.DictReader(handle)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lab", default="lab01")
    parser.add_argument("--copies", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    lab = grading.resolve_lab(args.lab)
    name = grading.lab_notebooks(lab)[0]
    print(f"{lab}: {args.copies} references + {args.copies} blank labs, --jobs {args.jobs}; "
          f"load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="streamlab-bench-shards-") as tmp:
        tmp = Path(tmp)
        folder = tmp / "submissions"
        folder.mkdir()
        reference, blank = grading.reference_notebook(lab, name), grading.released_notebook(lab, name)
        for i in range(args.copies):
            nbformat.write(reference, folder / f"reference{i:02d}.ipynb")
            nbformat.write(blank, folder / f"blank{i:02d}.ipynb")
        jobs = ["--jobs", str(args.jobs), "--force"]
        single = run("grade", lab, str(folder), "--out", str(tmp / "single"), *jobs)
        shards = [run("grade", lab, str(folder), "--out", str(tmp / f"shard-{k}"), "--shard", f"{k}/2", *jobs)
                  for k in (1, 2)]
        merge_command = run("grade", "merge", str(tmp / "shard-1"), str(tmp / "shard-2"), "--out", str(tmp / "m"))
        from streamlab.grading.run.merge import merge

        started = time.monotonic()
        merge([tmp / "shard-1", tmp / "shard-2"], tmp / "m")
        merge_inside = time.monotonic() - started
        same = grades(tmp / "single" / "grades.csv") == grades(tmp / "m" / "grades.csv")
        sizes = [len(grades(tmp / f"shard-{k}" / "grades.csv")) for k in (1, 2)]
        n = 2 * args.copies
        full = sum(1 for r in grades(tmp / "m" / "grades.csv").values() if r[2] == "graded" and r[0] == r[1])
    print(f"one run:               {single:7.1f} s  ({single / n:.1f} s per submission)")
    print(f"shard 1/2 ({sizes[0]:2d} subs):   {shards[0]:7.1f} s")
    print(f"shard 2/2 ({sizes[1]:2d} subs):   {shards[1]:7.1f} s")
    print(f"shards one after other:{sum(shards):7.1f} s; on 2 machines at once: about {max(shards):.1f} s + merge")
    print(f"merge: {merge_command:.2f} s for the command ({merge_inside:.3f} s of it merging {n} students)")
    print(f"same grades: {'yes' if same else 'NO'}; {full} of {args.copies} references with full marks")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
