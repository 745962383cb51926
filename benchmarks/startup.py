"""What a learner waits for, side by side, in one run on one machine. Reports numbers; asserts nothing.

    .venv/bin/python benchmarks/startup.py [--runs 3] [--all-notebooks]

Each line is the median of ``--runs`` runs; the variants of one line run alternately (a, b, a, b, ...),
so a machine that slows down slows all of them:

* a SparkSession and ``range(10).count()`` in a new Python process: bare pyspark
  (``SparkSession.builder.master("local[2]")``), ``sl.spark()``, and ``sl.spark()`` without the JVMs'
  start-up archives (``STREAMLAB_JVM_ARCHIVES=off``);
* the native broker, from the command to ready, on fresh storage in a temporary data folder;
* lesson 01 top to bottom on a fresh kernel (and the peak memory of its Spark driver);
* one graded submission of lab 01 (the reference solution; ``streamlab grade``, sandboxed if it can be);
* with ``--all-notebooks``: every lesson once, with its Spark driver's peak memory.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
OFF = {"STREAMLAB_JVM_ARCHIVES": "off"}
BARE = ("import time; t = time.monotonic(); from pyspark.sql import SparkSession; "
        "s = SparkSession.builder.master('local[2]').getOrCreate(); s.range(10).count(); print(time.monotonic() - t)")
COURSE = ("import time; t = time.monotonic(); import streamlab as sl; "
          "s = sl.spark(); s.range(10).count(); print(time.monotonic() - t)")


def python_seconds(code: str, env: dict) -> float:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, **env}, cwd=tempfile.gettempdir())
    return float(out.stdout.strip().splitlines()[-1])


def broker_start(env: dict) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, **env, "STREAMLAB_DATA_DIR": tmp}
        env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "streamlab", "kafka", "start", "--port", "29192"], env=env,
                       check=True, capture_output=True)
        seconds = time.monotonic() - started
        subprocess.run([sys.executable, "-m", "streamlab", "kafka", "stop"], env=env, check=True, capture_output=True)
    return seconds


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_notebook(path: Path, env: dict) -> tuple[float, float]:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    started = time.monotonic()
    with client.setup_kernel(env={**os.environ, **env}):
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        seconds = time.monotonic() - started
        kernel = psutil.Process(client.km.provisioner.pid)
        jvms = [p for p in kernel.children(recursive=True) if p.name() == "java"]
        peak = max((peak_rss_mib(p.pid) for p in jvms), default=float("nan"))
    return seconds, peak


def lesson(env: dict) -> float:
    return run_notebook(ROOT / "notebooks" / "01_stateless_vs_stateful.ipynb", env)[0]


def graded_submission(env: dict) -> float:
    from streamlab import grading
    from streamlab.grading.sandbox.box import unavailable_reason

    lab = grading.resolve_lab("lab01")
    reference = grading.reference_notebook(lab, grading.lab_notebooks(lab)[0])
    with tempfile.TemporaryDirectory(prefix="streamlab-bench-") as tmp:
        folder = Path(tmp) / "submissions"
        folder.mkdir()
        nbformat.write(reference, folder / "student.ipynb")
        sandbox = [] if unavailable_reason() is None else ["--no-sandbox"]
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "streamlab", "grade", lab, str(folder), "--out", str(Path(tmp) / "out"),
                        "--force", *sandbox], check=True, stdout=subprocess.DEVNULL, env={**os.environ, **env})
        return time.monotonic() - started


def side_by_side(label: str, variants: dict, runs: int) -> dict[str, float]:
    """Run each variant ``runs`` times, alternating; print and return the medians."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, measure in variants.items():
            times[name].append(measure())
    medians = {name: statistics.median(values) for name, values in times.items()}
    first = next(iter(medians.values()))
    print(label)
    for name, value in medians.items():
        print(f"  {name:<42} {value:6.1f} s  ({value / first:.2f}x)   runs {[round(v, 1) for v in times[name]]}")
    return medians


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--all-notebooks", action="store_true")
    args = parser.parse_args()
    import streamlab as sl
    from streamlab.stack.make_archives import states

    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = sl.bootstrap_servers()
    ready = ", ".join(f"{s.kind} {s.detail}" for s in states())
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; archives: {ready}")
    side_by_side("SparkSession + range(10).count(), new Python process",
                 {"bare pyspark": lambda: python_seconds(BARE, {}),
                  "sl.spark()": lambda: python_seconds(COURSE, {}),
                  "sl.spark(), no archives": lambda: python_seconds(COURSE, OFF)}, args.runs)
    side_by_side("native broker, command to ready (fresh storage)",
                 {"with its archive": lambda: broker_start({}),
                  "no archive": lambda: broker_start(OFF)}, args.runs)
    side_by_side("lesson 01 top to bottom, fresh kernel",
                 {"with archives": lambda: lesson({}), "no archives": lambda: lesson(OFF)}, args.runs)
    side_by_side("one graded submission of lab 01 (streamlab grade, whole command)",
                 {"with archives": lambda: graded_submission({}),
                  "no archives": lambda: graded_submission(OFF)}, args.runs)
    if args.all_notebooks:
        for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb")):
            seconds, peak = run_notebook(path, {})
            print(f"{path.name:<40} {seconds:6.1f} s   Spark driver peak RSS {peak:6.0f} MiB")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
