"""What one ``streamlab grade`` run was: ``OUT/run.json``.

Written when the run starts and again when it ends, it says which lab, which shard of the submissions
folder and which students that shard holds, the lab's version (hashes of its solution folder, with
``hidden_checks.py``, and of ``nbgrader_config.py``), the grader's version (the streamlab and nbgrader
versions and a hash of the code that decides a grade: the grader's, and the lessons' helpers it grades
with), the settings that change a grade (the sandbox on or off, its limits, the time limits), the machine
and the times. ``streamlab grade merge`` reads it to refuse shards that do not belong together; the class
summary says how many shards and machines made it. Each student's result records the grader's version
too, and a rerun grades again a result that other code made.
"""
from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from ...stack.paths import project_root
from ..labs import solutions_dir
from ..outputs.results import write_atomically
from .imports import closure, import_graph, imports_in, module_files

RUN_FILE = "run.json"      # one grading run (a shard, or the whole folder)
RUNS_FILE = "runs.json"    # a merged output: the runs that made it


def lab_fingerprint(source: Path) -> tuple[str, str | None]:
    """The lab's version, from the folder its template is made from (``solutions/<lab>/``, or a released lab): (hash
    of that folder and nbgrader_config.py, hash of its hidden_checks.py)."""
    source = Path(source)
    digest = hashlib.sha256()
    for path in sorted(source.rglob("*")):
        if path.is_file() and not {".ipynb_checkpoints", "__pycache__"} & set(path.parts):
            digest.update(str(path.relative_to(source.parent)).encode())
            digest.update(path.read_bytes())
    digest.update((project_root() / "nbgrader_config.py").read_bytes())
    checks = source / "hidden_checks.py"
    return digest.hexdigest(), (hashlib.sha256(checks.read_bytes()).hexdigest() if checks.is_file() else None)


def package_root() -> Path:
    """streamlab/: the package whose code decides a grade (see ``grade_deciding_files``)."""
    return Path(__file__).resolve().parents[2]


READ_NOT_IMPORTED = ("conf",)
"""What the grade's code reads rather than imports, under streamlab/: Spark's and Kafka's settings and logging."""


def grade_deciding_files() -> list[Path]:
    """Every file that decides a grade, found from the imports (``imports``): the modules that the grader in all its
    wings (every module of streamlab/grading/, the worker and the checks' process included), ``import streamlab``
    (what a lab's notebook is given) and each lab's hidden_checks.py import, directly or not, with the packages that
    hold them; and ``READ_NOT_IMPORTED``. Nothing of a grade imports the site, the classroom or the command line, so
    they are not in it."""
    root = package_root()
    files = module_files(root)
    start = {module for module in files if module.split(".")[:2] == [root.name, "grading"]} | {root.name}
    for checks in sorted(solutions_dir().glob("*/hidden_checks.py")):  # none in the course as students get it
        start |= imports_in(checks.read_text(encoding="utf-8"), "hidden_checks", set(files))
    found = [files[module] for module in closure(import_graph(root), start)]
    for name in READ_NOT_IMPORTED:
        found += [path for path in (root / name).rglob("*") if path.is_file()]
    return sorted(found)


def grader_version() -> str:
    """The grader's version: ``streamlab 0.1.0, nbgrader 0.9.5, pyspark 4.3.0, grading code 1a2b3c4d5e6f`` (a hash of
    every file that decides a grade, ``grade_deciding_files``). nbgrader runs and scores the notebook; Spark reads the
    state the checks grade (its state reader's output changes between releases), so both are part of it."""
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "?"

    digest = hashlib.sha256()
    root = package_root()
    for path in grade_deciding_files():
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return (f"streamlab {of('streamlab')}, nbgrader {of('nbgrader')}, pyspark {of('pyspark')}, "
            f"grading code {digest.hexdigest()[:12]}")


def grading_settings(*, sandbox: dict | None, timeout_s: float, cell_timeout_s: float | None) -> dict:
    """The settings that can change a grade (``--jobs`` cannot: it is left out)."""
    return {"sandbox": sandbox is not None, "limits": sandbox, "timeout_s": float(timeout_s),
            "cell_timeout_s": None if cell_timeout_s is None else float(cell_timeout_s)}


def folder_digest(keys: list[str]) -> str:
    """A hash of the submissions folder's names: shards that saw different folders differ here."""
    return hashlib.sha256("\n".join(sorted(keys)).encode("utf-8")).hexdigest()


def now() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


@dataclass
class RunRecord:
    lab: str
    shard: str                          # "K/N"; "1/1" for the whole folder
    students: dict[str, str]            # student id -> name in the folder, for the students of this shard
    folder_total: int                   # submissions in the whole folder (every shard)
    folder_sha256: str                  # folder_digest of the whole folder's names
    solution_sha256: str
    checks_sha256: str | None
    grader: str                         # grader_version()
    settings: dict                      # grading_settings()
    machine: str = field(default_factory=platform.node)
    started_at: str = field(default_factory=now)
    finished_at: str = ""               # empty: the run did not finish (still running, or killed)
    wall_seconds: float | None = None
    graded: int = 0                     # graded in this run
    skipped: int = 0                    # already graded by an earlier run into the same folder

    @property
    def shard_index(self) -> int:
        return int(self.shard.split("/")[0])

    @property
    def shard_count(self) -> int:
        return int(self.shard.split("/")[1])

    @property
    def finished(self) -> bool:
        return bool(self.finished_at)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict) -> RunRecord:
        if not isinstance(data, dict):
            raise TypeError("a run record is a JSON object")
        return cls(**data)

    def write(self, out: Path) -> Path:
        return write_atomically(Path(out) / RUN_FILE, self.to_json())


def read_runs(out: Path) -> list[RunRecord]:
    """The runs behind a grading output: its run.json, or a merged output's runs.json; [] if neither.
    Raises ValueError or TypeError for a file this version did not write."""
    out = Path(out)
    if (out / RUNS_FILE).is_file():
        data = json.loads((out / RUNS_FILE).read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise TypeError(f"{out / RUNS_FILE} is not a list of runs")
        return [RunRecord.from_dict(item) for item in data]
    if (out / RUN_FILE).is_file():
        return [RunRecord.from_dict(json.loads((out / RUN_FILE).read_text(encoding="utf-8")))]
    return []


def write_runs(out: Path, runs: list[RunRecord]) -> Path:
    return write_atomically(Path(out) / RUNS_FILE, json.dumps([asdict(r) for r in runs], indent=1, sort_keys=True))


def describe_runs(runs: list[RunRecord]) -> str:
    """``2 shards on 2 machines (node-a: 1/2; node-b: 2/2)``."""
    shards = sorted({r.shard for r in runs}, key=lambda s: tuple(int(x) for x in s.split("/")))
    machines: dict[str, list[str]] = {}
    for run in sorted(runs, key=lambda r: r.shard_index):
        machines.setdefault(run.machine, []).append(run.shard)
    where = "; ".join(f"{m}: {', '.join(s)}" for m, s in machines.items())
    return (f"{len(shards)} shard{'s' if len(shards) != 1 else ''} on {len(machines)} "
            f"machine{'s' if len(machines) != 1 else ''} ({where})")
