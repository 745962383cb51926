"""Grading outputs as `streamlab grade --shard K/N` leaves them, built in memory (no kernel): for the tests of
merging, the roster and the exports."""
from __future__ import annotations

from pathlib import Path

from streamlab.grading.outputs.results import Result, Status
from streamlab.grading.run.runinfo import RunRecord, folder_digest
from streamlab.grading.run.shards import shard_of

LAB = "lab01_x"
CLASS = {"ana": (5, Status.GRADED), "ben": (3, Status.GRADED), "cem": (0, Status.TIMED_OUT),
         "dan": (0, Status.INVALID), "eve": (4, Status.GRADED), "fay": (0, Status.LIMIT),
         "gus": (5, Status.GRADED), "hal": (2, Status.GRADED)}
FILES = {s: f"{s}.ipynb" for s in CLASS}
SETTINGS = {"sandbox": True, "limits": {"memory_mb": 4096, "processes": 1024, "cpu_seconds": 900, "disk_mb": 1024},
            "timeout_s": 900.0, "cell_timeout_s": None}


def _record(shard: str, students: list[str], **changes) -> RunRecord:
    fields = dict(lab=LAB, shard=shard, students={s: FILES[s] for s in students}, folder_total=len(CLASS),
                  folder_sha256=folder_digest(list(FILES.values())), solution_sha256="a" * 64, checks_sha256="c" * 64,
                  grader="streamlab 0.1.0, nbgrader 0.9.5, pyspark 4.3.0, grading code 123456789abc", settings=SETTINGS,
                  machine="node-a", started_at="2026-11-25T10:00:00+00:00", finished_at="2026-11-25T10:30:00+00:00",
                  wall_seconds=1800.0, graded=len(students))
    fields.update(changes)
    return RunRecord(**fields)


def _result(student: str, out: Path, score=None, status=None) -> Result:
    default_score, default_status = CLASS[student]
    return Result(student=student, status=status or default_status, score=float(default_score if score is None
                                                                                 else score),
                  max_score=5.0, seconds=30.0, detail="" if (status or default_status) == Status.GRADED else "why",
                  file=f"/home/me/subs/{FILES[student]}", sha256=f"sha-{student}", solution_sha256="a" * 64,
                  feedback=str(out / "feedback" / f"{student}.html"), log=str(out / "logs" / f"{student}.log"))


def make_output(out: Path, shard: str, students: list[str], scores: dict | None = None, **changes) -> Path:
    """A folder as `streamlab grade --shard` leaves it (on another machine: the paths inside are its own)."""
    for folder in ("results", "feedback", "logs"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    for student in students:
        result = _result(student, Path("/elsewhere") / out.name, score=(scores or {}).get(student))
        (out / "results" / f"{student}.json").write_text(result.to_json())
        (out / "feedback" / f"{student}.html").write_text(f"<p>feedback of {student}</p>")
        (out / "logs" / f"{student}.log").write_text(f"log of {student}\n")
    _record(shard, students, **changes).write(out)
    return out


def shards(n: int) -> list[list[str]]:
    return [[s for s in CLASS if shard_of(FILES[s], n) == k] for k in range(1, n + 1)]
