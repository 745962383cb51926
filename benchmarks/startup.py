"""Measure what a learner waits for, and how much memory the stack takes. Reports numbers; asserts nothing.

    .venv/bin/python benchmarks/startup.py

* broker start: a fresh native broker in a temporary data dir (storage format + JVM start + first answer);
* SparkSession start: a new Python process until `sl.spark()` returns;
* each notebook: executed top to bottom on a fresh kernel, with the peak resident memory (VmHWM)
  of the kernel's Spark driver JVM;
* the peak resident memory of the course's running broker.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def broker_start() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, STREAMLAB_DATA_DIR=tmp)
        env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "streamlab", "kafka", "start"], env=env, check=True,
                       capture_output=True)
        seconds = time.monotonic() - started
        subprocess.run([sys.executable, "-m", "streamlab", "kafka", "stop"], env=env, check=True,
                       capture_output=True)
    return seconds


def spark_start() -> float:
    code = "import time, streamlab as sl; t = time.monotonic(); sl.spark(); print(time.monotonic() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def run_notebook(path: Path) -> tuple[float, float]:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    started = time.monotonic()
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        seconds = time.monotonic() - started
        kernel = psutil.Process(client.km.provisioner.pid)
        jvms = [p for p in kernel.children(recursive=True) if p.name() == "java"]
        peak = max((peak_rss_mib(p.pid) for p in jvms), default=float("nan"))
    return seconds, peak


def main() -> None:
    import streamlab as sl
    from streamlab import broker

    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = sl.bootstrap_servers()
    print(f"broker start (fresh storage):  {broker_start():6.1f} s")
    print(f"SparkSession start:            {spark_start():6.1f} s")
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        seconds, peak = run_notebook(path)
        print(f"{path.name:<32} {seconds:6.1f} s   Spark driver peak RSS {peak:6.0f} MiB")
    state = broker.status()
    if state.running:
        print(f"course broker peak RSS:        {peak_rss_mib(state.pid):6.0f} MiB (heap limit {broker.HEAP})")


if __name__ == "__main__":
    main()
