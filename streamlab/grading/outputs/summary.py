"""The class summary ``streamlab grade`` writes next to grades.csv: ``OUT/summary.html``.

One standalone page (no external CSS, JavaScript or images: it reads offline and can be mailed; its
Content-Security-Policy, ``feedback.make_inert``, lets nothing in it run or fetch):
the number of students, the mean and median score, a plot of the score distribution (inline SVG,
drawn with matplotlib), the count of each status (graded, timed out, crashed, ...), and for each
graded test cell how many students passed it, i.e. which parts the class found hard.

A test cell passes for a student when its final score equals its points: after nbgrader scored it
and after the grader's hidden checks, which withdraw the points of the cells they do not confirm
(``Result.cells`` holds the final scores; ``Result.checks`` says which checks failed). Students whose
notebook could not be scored (timed out as a whole, crashed, invalid, grader error) passed no cell.

It is built from ``OUT/results/<student>.json``, so a run that skipped students graded earlier
still summarises everyone.
"""
from __future__ import annotations

import html
import io
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .feedback import make_inert
from .results import Result, Status, format_points, write_atomically


@dataclass
class CellStats:
    grade_id: str
    points: float
    passed: int = 0            # students whose final score for this cell equals its points
    withdrawn: int = 0         # students whose tests passed this cell but a grader's check naming it failed


@dataclass
class ClassSummary:
    lab: str
    results: list[Result]
    max_score: float = 0.0
    cells: list[CellStats] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    skipped_files: list[str] = field(default_factory=list)   # results/*.json that could not be read
    runs: list = field(default_factory=list)      # runinfo.RunRecord of each run (shard) that graded them
    roster: object = None                         # roster.Matched, when a roster was given

    @property
    def students(self) -> int:
        return len(self.results)

    @property
    def scores(self) -> list[float]:
        return [r.score for r in self.results]

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.scores) if self.results else None

    @property
    def median(self) -> float | None:
        return statistics.median(self.scores) if self.results else None


def cell_passed(result: Result, grade_id: str) -> bool:
    """Did ``result``'s student get every point of test cell ``grade_id`` (after the hidden checks)?"""
    failed_checks = {c for check in result.checks if not check.passed for c in check.cells}
    for cell in result.cells:
        if cell.grade_id == grade_id:
            return (cell.score is not None and cell.max_score is not None and cell.score >= cell.max_score
                    and grade_id not in failed_checks)
    return False


def points_withdrawn(result: Result, grade_id: str) -> bool:
    """Did the cell's own tests give ``result``'s student every point, and a grader's check take them back?
    (Results written before ``auto_score`` was kept: did a check naming the cell fail?)"""
    if not any(not c.passed and grade_id in c.cells for c in result.checks):
        return False
    cell = next((c for c in result.cells if c.grade_id == grade_id), None)
    if cell is None or cell.auto_score is None:
        return cell is not None
    return cell.max_score is not None and cell.auto_score >= cell.max_score


def summarise(lab: str, results: list[Result]) -> ClassSummary:
    """The class summary's numbers for ``results`` (one per student)."""
    results = sorted(results, key=lambda r: r.student)
    summary = ClassSummary(lab, results)
    summary.max_score = max((r.max_score for r in results), default=0.0)
    counts = Counter(str(r.status) for r in results)
    summary.statuses = {str(status): counts.get(str(status), 0) for status in Status}
    cells: dict[str, CellStats] = {}
    for result in results:
        for cell in result.cells:
            cells.setdefault(cell.grade_id, CellStats(cell.grade_id, float(cell.max_score or 0)))
    for stats in cells.values():
        stats.passed = sum(cell_passed(r, stats.grade_id) for r in results)
        stats.withdrawn = sum(points_withdrawn(r, stats.grade_id) for r in results)
    summary.cells = list(cells.values())
    return summary


def load_results(results_dir: Path, students: list[str] | None = None) -> tuple[list[Result], list[str]]:
    """The results in ``results_dir`` (only ``students``' if given), and the files that could not be read."""
    results, unreadable = [], []
    for path in sorted(Path(results_dir).glob("*.json")):
        if students is not None and path.stem not in students:
            continue
        try:
            results.append(Result.from_json(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            unreadable.append(path.name)
    return results, unreadable


def distribution_svg(scores: list[float], max_score: float) -> str:
    """A bar chart of how many students got each score, as an inline <svg> element."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 2.8))
    ax = fig.add_subplot()
    whole = all(float(s).is_integer() for s in scores) and float(max_score).is_integer() and max_score <= 40
    if whole:
        counts = Counter(int(s) for s in scores)
        xs = list(range(int(max_score) + 1))
        ax.bar(xs, [counts.get(x, 0) for x in xs], color="#3b75af", width=0.8)
        ax.set_xticks(xs)
    else:
        ax.hist(scores, bins=10, range=(0, max_score or 1), color="#3b75af", rwidth=0.9)
    ax.set_xlabel(f"score (out of {format_points(max_score)})")
    ax.set_ylabel("students")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg"):]                                 # no XML prologue or DOCTYPE (a URL)
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)   # RDF metadata names URLs too
    return svg.replace(' xmlns:xlink="http://www.w3.org/1999/xlink"', "")


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def render(summary: ClassSummary) -> str:
    """The summary as a standalone HTML page."""
    esc, n = html.escape, summary.students
    mean = "-" if summary.mean is None else f"{summary.mean:.2f}"
    median = "-" if summary.median is None else format_points(summary.median)
    plot = distribution_svg(summary.scores, summary.max_score) if n else "<p>No students yet.</p>"
    statuses = "".join(f'<tr data-status="{esc(s)}" data-count="{c}"><td>{esc(s)}</td><td class=n>{c}</td>'
                       f"<td class=n>{_pct(c, n)}</td></tr>" for s, c in summary.statuses.items())
    rates = {c.passed for c in summary.cells}
    hardest = min(rates) if len(rates) > 1 else None  # shaded only when some parts were harder than others
    cells = "".join(
        f"<tr{' class=hard' if c.passed == hardest and c.passed < n else ''} data-cell=\"{esc(c.grade_id)}\" "
        f"data-points=\"{c.points:g}\" data-passed=\"{c.passed}\" data-students=\"{n}\" "
        f"data-withdrawn=\"{c.withdrawn}\"><td>{esc(c.grade_id)}</td>"
        f"<td class=n>{format_points(c.points)}</td><td class=n>{c.passed} / {n}</td>"
        f"<td class=n>{_pct(c.passed, n)}</td><td><span class=bar style='width:{10 * c.passed / n if n else 0:.1f}em'>"
        f"</span></td><td class=n>{c.withdrawn}</td></tr>" for c in summary.cells)
    others = "".join(f"<li>{esc(r.student)}: {esc(str(r.status))}{' - ' + esc(r.detail) if r.detail else ''}</li>"
                     for r in summary.results if r.status != Status.GRADED)
    bare = [r.student for r in summary.results if not r.sandboxed]
    unsandboxed = (f'<p id="no-sandbox"><b>Graded without the sandbox (--no-sandbox):</b> '
                   f"{esc(', '.join(bare))}. Their code ran with the grader's own powers.</p>" if bare else "")
    skipped = (f"<p>Could not read: {esc(', '.join(summary.skipped_files))}</p>" if summary.skipped_files else "")
    provenance = _provenance(summary.runs)
    roster = _roster(summary.roster)
    return make_inert(f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(summary.lab)}: class summary</title>
<style>
body {{ font-family: sans-serif; max-width: 56em; margin: 2em auto; line-height: 1.4; color: #222 }}
table {{ border-collapse: collapse; margin: .5em 0 1.5em }} td, th {{ padding: .2em .8em; text-align: left }}
th {{ border-bottom: 1px solid #999 }} td.n {{ text-align: right }} tr.hard td {{ background: #fde8e8 }}
.bar {{ display: inline-block; height: .8em; background: #3b75af; min-width: 1px }}
td:nth-child(5) {{ width: 10em }} svg {{ max-width: 100% }}
</style></head>
<body>
<h1>{esc(summary.lab)}: class summary</h1>
<p id="overview"><b>Students:</b> <span id="students">{n}</span> &nbsp;
<b>Mean:</b> <span id="mean">{mean}</span> &nbsp; <b>Median:</b> <span id="median">{median}</span>
&nbsp; (out of {format_points(summary.max_score)})</p>
<h2>Scores</h2>
<div id="distribution">{plot}</div>
<h2>Status</h2>
<table id="statuses"><tr><th>status</th><th>students</th><th>share</th></tr>{statuses}</table>
<h2>Which parts were hard</h2>
<p>A test cell passes for a student when it kept all its points, after the grader's hidden checks.
Students whose notebook could not be scored passed no cell. The hardest part is shaded. The last column
counts the students whose own tests passed a cell but whose run a hidden check did not confirm: their
points were withdrawn (see the detail in grades.csv).</p>
<table id="cells"><tr><th>test cell</th><th>points</th><th>passed</th><th>pass rate</th><th></th>
<th>tests passed, points withdrawn by the grader's checks</th></tr>{cells}</table>
{'<h2>Not graded normally</h2><ul>' + others + '</ul>' if others else ''}
{roster}{unsandboxed}{skipped}
{provenance}<p><small>Written {datetime.now().isoformat(timespec="seconds")} from results/ by streamlab grade.
</small></p>
</body></html>
""")


def _provenance(runs: list) -> str:
    """Where the grades come from: how many shards, on how many machines."""
    if not runs:
        return ""
    esc = html.escape
    shards = {r.shard for r in runs}
    machines = sorted({r.machine for r in runs})
    rows = "".join(f"<tr><td>{esc(r.shard)}</td><td>{esc(r.machine)}</td><td class=n>{len(r.students)}</td>"
                   f"<td class=n>{r.graded}</td><td class=n>{r.skipped}</td><td>{esc(r.started_at)}</td>"
                   f"<td class=n>{'' if r.wall_seconds is None else f'{r.wall_seconds:.0f}'}</td></tr>"
                   for r in sorted(runs, key=lambda r: (r.shard_index, r.started_at)))
    first = runs[0]
    return (f'<h2>How it was graded</h2><p id="provenance">In <span id="shards">{len(shards)}</span> '
            f'shard(s) on <span id="machines">{len(machines)}</span> machine(s) ({esc(", ".join(machines))}); '
            f"grader {esc(first.grader)}, lab version {esc(first.solution_sha256[:12])}.</p>"
            f'<table id="runs"><tr><th>shard</th><th>machine</th><th>students</th><th>graded</th>'
            f"<th>already graded</th><th>started</th><th>wall s</th></tr>{rows}</table>")


def _roster(matched) -> str:
    """Who the roster has without a submission, and which submissions it does not know."""
    if matched is None:
        return ""
    esc = html.escape
    missing = "".join(f"<li>{esc(s.name or s.file)} ({esc(s.file)}{', ' + esc(s.section) if s.section else ''})"
                      f"</li>" for s in matched.missing)
    unknown = "".join(f"<li>{esc(s)}</li>" for s in matched.unknown)
    return ('<h2>Roster</h2><div id="roster">'
            f'<p>In the roster, no submission: <span id="missing">{len(matched.missing)}</span></p>'
            + (f"<ul>{missing}</ul>" if missing else "")
            + f'<p>Submitted, not in the roster: <span id="unknown">{len(matched.unknown)}</span></p>'
            + (f"<ul>{unknown}</ul>" if unknown else "") + "</div>")


def write_summary(out: Path, lab: str, students: list[str] | None = None, runs: list | None = None,
                  roster=None) -> Path:
    """Write ``out/summary.html`` from ``out/results/*.json`` (only ``students``' if given), saying which
    ``runs`` (shards) made it and what the ``roster`` (a roster.Matched) found."""
    results, unreadable = load_results(Path(out) / "results", students)
    summary = summarise(lab, results)
    summary.skipped_files = unreadable
    summary.runs = list(runs or [])
    summary.roster = roster
    return write_atomically(Path(out) / "summary.html", render(summary))
