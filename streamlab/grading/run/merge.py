"""Putting shards back together: ``streamlab grade merge OUT... --out DIR``.

Each OUT is what one ``streamlab grade --shard K/N`` wrote (copied from wherever it ran): its ``run.json``,
``results/``, ``feedback/`` and ``logs/``. The merge checks that they belong together and make a whole, and
only then writes DIR/grades.csv, DIR/feedback/, DIR/results/, DIR/logs/, DIR/summary.html and DIR/runs.json
(the runs that made it). It refuses, naming the outputs concerned, when:

- an output has no run record, or its run did not finish (killed, or still running);
- the outputs were graded with a different lab version, hidden checks, grader or settings, or over
  different submission folders, or split in different numbers of shards;
- a shard is missing, or a shard has no result for one of its students;
- the same student was graded twice (two outputs of the same shard, say) with different results.

Re-running the one shard that failed, into its own output, and merging again is the way to recover:
results already there are kept (``streamlab grade`` skips them), nothing is graded twice.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..labs import GradingError
from ..outputs.results import Result, format_points
from .runinfo import RUN_FILE, RUNS_FILE, RunRecord, read_runs, write_runs

COMPARED = [  # (what, how it is read from a run) that every shard must share
    ("lab", lambda r: r.lab),
    ("solution (solutions/<lab>/ and nbgrader_config.py)", lambda r: r.solution_sha256[:12]),
    ("hidden checks", lambda r: (r.checks_sha256 or "none")[:12]),
    ("grader", lambda r: r.grader),
    ("settings (sandbox, limits, time limits)", lambda r: _settings_text(r.settings)),
    ("submissions folder", lambda r: f"{r.folder_total} submissions, {r.folder_sha256[:12]}"),
    ("number of shards", lambda r: str(r.shard_count)),
]


class MergeRefused(GradingError):
    """The outputs do not make one class's grades; ``problems`` says why, one line each."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("cannot merge these outputs:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass
class ShardOutput:
    path: Path
    run: RunRecord
    results: dict[str, Result] = field(default_factory=dict)   # student id -> result, this shard's students
    unreadable: list[str] = field(default_factory=list)        # its students whose result could not be read


def _settings_text(settings: dict) -> str:
    if not settings.get("sandbox"):
        limits = "no sandbox"
    else:
        limits = "sandbox " + ", ".join(f"{k}={v}" for k, v in sorted((settings.get("limits") or {}).items()))
    return (f"{limits}; timeout {settings.get('timeout_s'):g} s; cell timeout "
            f"{settings.get('cell_timeout_s') if settings.get('cell_timeout_s') is not None else 'default'}")


def load_output(path: Path) -> ShardOutput:
    """One shard's output: its run record and its students' results. A GradingError if it has no record."""
    path = Path(path)
    if not path.is_dir():
        raise MergeRefused([f"{path} is not a folder"])
    try:
        runs = read_runs(path)
    except (OSError, ValueError, TypeError) as err:
        raise MergeRefused([f"{path}/{RUN_FILE} cannot be read ({type(err).__name__}: {err})"]) from err
    if len(runs) != 1 or not (path / RUN_FILE).is_file():
        what = "a merged output" if (path / RUNS_FILE).is_file() else f"no {RUN_FILE}"
        raise MergeRefused([f"{path} is {what}, not the output of one `streamlab grade` run"])
    output = ShardOutput(path, runs[0])
    for student in output.run.students:
        file = path / "results" / f"{student}.json"
        if not file.is_file():
            continue
        try:
            output.results[student] = Result.from_json(file.read_text(encoding="utf-8"))
        except (OSError, ValueError, TypeError):
            output.unreadable.append(student)
    return output


def problems(outputs: list[ShardOutput]) -> list[str]:
    """Why these outputs cannot be merged ([] if they can)."""
    found: list[str] = []
    if not outputs:
        return ["no outputs to merge"]
    for output in outputs:
        if not output.run.finished:
            found.append(f"{output.path} (shard {output.run.shard}, started {output.run.started_at} on "
                         f"{output.run.machine}) did not finish: run that shard again")
    for what, value_of in COMPARED:
        groups: dict[str, list[str]] = {}
        for output in outputs:
            groups.setdefault(value_of(output.run), []).append(str(output.path))
        if len(groups) > 1:
            hint = (" (the folder changed between shards: run every shard again on the same folder; each grades "
                    "only what it has not graded yet)" if what == "submissions folder" else "")
            found.append(f"graded with a different {what}: "
                         + "; ".join(f"{value} in {', '.join(paths)}" for value, paths in groups.items()) + hint)
    counts = {o.run.shard_count for o in outputs}
    if len(counts) == 1:
        count = counts.pop()
        present = {o.run.shard_index for o in outputs}
        for index in range(1, count + 1):
            if index not in present:
                found.append(f"shard {index}/{count} is missing (grade it with --shard {index}/{count} "
                             f"and merge again)")
    for output in outputs:
        lost = sorted(set(output.run.students) - set(output.results) - set(output.unreadable))
        if lost:
            found.append(f"{output.path} (shard {output.run.shard}) has no result for {len(lost)} of its "
                         f"students: {', '.join(lost)} (run that shard again: it grades only what is missing)")
        if output.unreadable:
            found.append(f"{output.path} (shard {output.run.shard}): results that cannot be read: "
                         f"{', '.join(output.unreadable)}")
    seen: dict[str, tuple[ShardOutput, Result]] = {}
    for output in outputs:
        for student, result in output.results.items():
            if student in seen:
                first, earlier = seen[student]
                if _outcome(earlier) != _outcome(result):
                    found.append(f"{student} was graded twice with different results: "
                                 f"{_describe(earlier)} in {first.path}, {_describe(result)} in {output.path}")
            else:
                seen[student] = (output, result)
    return found


def _outcome(result: Result) -> tuple:
    return (result.score, result.max_score, str(result.status), result.sha256)


def _describe(result: Result) -> str:
    return f"{format_points(result.score)}/{format_points(result.max_score)} ({result.status_text})"


def merge(paths: list[Path], dest: Path) -> tuple[list[Result], list[RunRecord]]:
    """Check the outputs and copy them into ``dest`` (results, feedback, logs, runs.json; the caller writes
    grades.csv and the summary); raises MergeRefused, writing nothing, if they do not make a whole."""

    dest = Path(dest).resolve()
    outputs, refused = [], []
    for path in paths:
        try:
            outputs.append(load_output(path))
        except MergeRefused as err:
            refused += err.problems
    for output in outputs:
        if output.path.resolve() == dest:
            refused.append(f"--out {dest} is one of the outputs being merged: merge into a new folder")
    if dest.exists() and any(dest.iterdir()) and not (dest / RUNS_FILE).is_file():
        refused.append(f"--out {dest} is a folder with other things in it; merge into a new folder "
                       f"(or into an earlier merge's, which is replaced)")
    refused += problems(outputs) if outputs else []
    if refused:
        raise MergeRefused(refused)
    for name in ("results", "feedback", "logs"):
        shutil.rmtree(dest / name, ignore_errors=True)
        (dest / name).mkdir(parents=True)
    merged: dict[str, Result] = {}
    for output in sorted(outputs, key=lambda o: o.run.shard_index):
        for student, result in sorted(output.results.items()):
            if student in merged:
                continue
            result.feedback = _copy(Path(result.feedback), output.path / "feedback", dest / "feedback")
            result.log = _copy(Path(result.log), output.path / "logs", dest / "logs")
            (dest / "results" / f"{student}.json").write_text(result.to_json(), encoding="utf-8")
            merged[student] = result
    results = [merged[s] for s in sorted(merged)]
    runs = sorted((o.run for o in outputs), key=lambda r: (r.shard_index, r.started_at))
    write_runs(dest, runs)
    return results, runs


def _copy(original: Path, folder: Path, target_folder: Path) -> str:
    """Copy a student's feedback page (or folder of pages) or log from a shard's ``folder``, found by its
    name (the absolute path it was written at is on another machine); the new path, or "" if none."""
    if not original.name:
        return ""
    source = folder / original.name
    target = target_folder / original.name
    if source.is_dir():
        shutil.copytree(source, target)
    elif source.is_file():
        shutil.copyfile(source, target)
    else:
        return ""
    return str(target)
