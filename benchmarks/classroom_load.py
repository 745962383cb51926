"""A class at work on one server: the hub's start, and each student's memory and CPU while lesson 01 and then lab 01
(the reference answers) run in N students' servers at once. Reports numbers; asserts nothing.

    .venv/bin/python benchmarks/classroom_load.py --students 3

Needs what ``streamlab classroom up`` needs (Docker, the course image, configurable-http-proxy). It starts a
classroom of its own on free ports (students s1..sN), starts every server through the hub, runs lesson 01 in all
of them at the same time (each cell through the hub's proxy, as a student's browser would), then lab 01's reference
notebook in all of them at once, while ``docker stats`` samples every container of the class. Printed: the hub's
start time, the servers' start time, each phase's wall time, and per phase the peak memory of the busiest student's
container, of the broker's, of all containers together, and the class's mean CPU. Then it stops the class and
deletes its volumes.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat

from streamlab import grading
from streamlab.classroom import KAFKA_CONTAINER, hub

ROOT = Path(__file__).resolve().parents[1]
LAB = "lab01_stateless_vs_stateful"
UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def _bytes(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)\s*([KMG]?i?B)", text.strip()).groups()
    return float(number) * UNITS[unit]


class Sampler(threading.Thread):
    """``docker stats`` of the class's containers, again and again, until stopped."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples: list[dict[str, tuple[float, float]]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            out = subprocess.run(["docker", "stats", "--no-stream", "--format", "{{.Name}}\t{{.MemUsage}}\t"
                                  "{{.CPUPerc}}"], capture_output=True, text=True, timeout=60).stdout
            sample = {}
            for line in out.splitlines():
                name, memory, cpu = line.split("\t")
                if name.startswith("streamlab-classroom-"):
                    sample[name] = (_bytes(memory.split("/")[0]), float(cpu.rstrip("%")))
            self.samples.append(sample)

    def report(self, phase: str, seconds: float) -> None:
        students = [(n, m) for s in self.samples for n, (m, _) in s.items() if n != KAFKA_CONTAINER]
        broker = [s[KAFKA_CONTAINER][0] for s in self.samples if KAFKA_CONTAINER in s]
        total = [sum(m for m, _ in s.values()) for s in self.samples]
        cpu = [sum(c for _, c in s.values()) for s in self.samples]
        print(f"{phase}: {seconds:.0f} s; peak memory: a student {max(m for _, m in students) / 2**30:.2f} GiB, "
              f"the broker {max(broker) / 2**30:.2f} GiB, all {max(total) / 2**30:.2f} GiB; CPU of the class: "
              f"mean {sum(cpu) / len(cpu) / 100:.2f} cores, peak {max(cpu) / 100:.2f} ({len(self.samples)} samples)")


def _at_once(students: list[str], work) -> dict[str, str]:
    results = {}
    threads = [threading.Thread(target=lambda n=n: results.__setitem__(n, work(n))) for n in students]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def _notebook_in(the_hub: hub.Hub, name: str, path: str, local: Path) -> str:
    kernel = the_hub.kernel(name, path)
    try:
        return kernel.run_notebook(local)
    finally:
        kernel.close()


def phase(title: str, students: list[str], work) -> dict[str, str]:
    sampler = Sampler()
    sampler.start()
    started = time.monotonic()
    results = _at_once(students, work)
    seconds = time.monotonic() - started
    sampler.done.set()
    sampler.join()
    sampler.report(title, seconds)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=3)
    args = parser.parse_args()
    students = [f"s{i}" for i in range(1, args.students + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "state"
        roster = Path(tmp) / "students.txt"
        roster.write_text("".join(f"{n}\n" for n in students))
        try:
            started = time.monotonic()
            hub.up(roster, ip="127.0.0.1", port=hub.free_port(), directory=directory, say=lambda _: None)
            print(f"{args.students} students on {os.cpu_count()} cores; the hub answered "
                  f"{time.monotonic() - started:.1f} s after `up`")
            the_hub = hub.Hub(directory)
            started = time.monotonic()
            _at_once(students, the_hub.start)
            print(f"every server ready {time.monotonic() - started:.1f} s after they were asked for at once")
            lesson = ROOT / "notebooks" / "01_stateless_vs_stateful.ipynb"
            results = phase("lesson 01", students, lambda n: _notebook_in(the_hub, n, f"notebooks/{lesson.name}",
                                                                           lesson))
            reference = Path(tmp) / f"{LAB}.ipynb"
            reference.write_text(nbformat.writes(grading.reference_notebook(LAB, LAB)))
            for name in students:
                the_hub.put_file(name, f"labs/{LAB}/{LAB}.ipynb", json.loads(reference.read_text()), notebook=True)
            results |= {f"{n} (lab)": r for n, r in phase(
                "lab 01", students, lambda n: _notebook_in(the_hub, n, f"labs/{LAB}/{LAB}.ipynb", reference)).items()}
            failed = {n: r for n, r in results.items() if r != "ok"}
            if failed:
                print("failed:", json.dumps(failed, indent=1)[:3000], file=sys.stderr)
                return 1
        finally:
            hub.down(directory=directory, say=lambda _: None)
            subprocess.run(["docker", "volume", "rm", "-f", hub.KAFKA_VOLUME,
                            *(f"streamlab-classroom-work-{n}" for n in students)], capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
