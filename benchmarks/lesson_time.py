"""How long each lesson takes a learner who reads it and runs it: the "Time:" line of its first cell.

    .venv/bin/python benchmarks/lesson_time.py [NOTEBOOK ...] [--no-run] [--json FILE]

For each lesson (all of ``notebooks/NN*_*.ipynb`` unless named) it counts what there is to read and, unless
``--no-run``, runs it once top to bottom on a fresh kernel (as ``tests/test_notebooks.py`` does), then prints
one row per lesson and the estimate:

    minutes = prose words / 200             reading the text at 200 words a minute
            + code lines * 5 s / 60         reading each line of code before running it
            + code cells * 10 s / 60        looking at what each cell shows (a table, a plot, a line)
            + run seconds / 60              waiting for the cells, measured

rounded up to the next 5 minutes. Prose is the words of the Markdown cells outside fenced blocks (a CJK
character counts as a word); code lines are the non-blank lines of code cells and of fenced blocks in
Markdown (diagrams and Java snippets are read like code). Run it on a quiet machine: the run time is what
a learner's laptop waits, and it grows with the load. Reports numbers; asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
WORDS_PER_MINUTE = 200
SECONDS_PER_CODE_LINE = 5
SECONDS_PER_RESULT = 10
CJK = re.compile(r"[\u3400-\u9fff]")


def counts(path: Path) -> dict:
    """What a learner reads in a lesson: prose words, code lines, code cells."""
    nb = nbformat.read(path, as_version=4)
    words = code_lines = cells = 0
    for cell in nb.cells:
        if cell.cell_type == "code":
            cells += 1
            code_lines += sum(1 for line in cell.source.splitlines() if line.strip())
            continue
        if cell.cell_type != "markdown":
            continue
        fenced = False
        for line in cell.source.splitlines():
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                code_lines += bool(line.strip())
            else:
                words += len(CJK.sub(" x ", line).split())
    return {"words": words, "code_lines": code_lines, "code_cells": cells}


def run_seconds(path: Path) -> float:
    """Run the lesson once, top to bottom, on a fresh kernel; the wall-clock seconds it took."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    started = time.monotonic()
    client.execute()
    return time.monotonic() - started


def estimate(row: dict) -> dict:
    read = row["words"] / WORDS_PER_MINUTE
    code = row["code_lines"] * SECONDS_PER_CODE_LINE / 60
    look = row["code_cells"] * SECONDS_PER_RESULT / 60
    run = (row.get("run_s") or 0) / 60
    total = read + code + look + run
    return {"read_min": read, "code_min": code, "look_min": look, "run_min": run, "total_min": total,
            "time_line_min": 5 * math.ceil(total / 5)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--no-run", action="store_true", help="count only; the run time is left out")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args()
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
    if not args.no_run:
        import streamlab as sl

        os.environ.setdefault("KAFKA_BOOTSTRAP_SERVERS", sl.bootstrap_servers())  # one broker for every kernel
        print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    rows = []
    print(f"{'lesson':<34} {'words':>6} {'code lines':>10} {'cells':>6} {'run s':>6} "
          f"{'read':>5} {'code':>5} {'look':>5} {'run':>5} {'total':>6}  Time:")
    for path in paths:
        row = {"lesson": path.stem, **counts(path)}
        if not args.no_run:
            try:
                row["run_s"] = round(run_seconds(path), 1)
            except Exception as error:  # a failing lesson is reported, the others still run
                row["error"] = str(error).strip().splitlines()[-1][:300]
                print(f"{path.stem}: FAILED: {row['error']}", flush=True)
        row.update(estimate(row))
        rows.append(row)
        print(f"{row['lesson']:<34} {row['words']:>6} {row['code_lines']:>10} {row['code_cells']:>6} "
              f"{row.get('run_s', float('nan')):>6.0f} {row['read_min']:>5.1f} {row['code_min']:>5.1f} "
              f"{row['look_min']:>5.1f} {row['run_min']:>5.1f} {row['total_min']:>6.1f}  "
              f"about {row['time_line_min']} minutes", flush=True)
    if not args.no_run:
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
