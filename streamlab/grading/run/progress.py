"""Progress lines for long grading runs: done / total, rate, time left, and the final line.

    shard 2/4: 3/12 done (25%), 1.9 per minute, about 4 min 40 s left
    Done in 6 min 12 s of wall time for 12 submissions: 31.0 s per submission (each took 58.4 s on average
    with 2 jobs at a time); 10 graded, 2 invalid notebook.

The rate counts only submissions graded in this run: those skipped (graded earlier) take no time and
would make the time left look shorter than it is.
"""
from __future__ import annotations

import time
from collections import Counter


def format_duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 07 min``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class Progress:
    """Counts submissions as they finish and says how far the run is (``clock``: seconds, monotonic)."""

    def __init__(self, total: int, label: str = "progress", clock=time.monotonic):
        self.total, self.label, self.clock = total, label, clock
        self.started = clock()
        self.done = 0       # finished: graded now or skipped
        self.graded = 0     # graded in this run

    def step(self, skipped: bool = False) -> str:
        """One more submission finished: the progress line to print."""
        self.done += 1
        self.graded += 0 if skipped else 1
        elapsed = self.clock() - self.started
        left = self.total - self.done
        share = f"{100 * self.done / self.total:.0f}%" if self.total else "-"
        line = f"{self.label}: {self.done}/{self.total} done ({share})"
        if self.graded and elapsed > 0:
            per_minute = 60 * self.graded / elapsed
            line += f", {per_minute:.1f} per minute"
            if left:
                line += f", about {format_duration(left * elapsed / self.graded)} left"
        elif left:
            line += ", time left not known yet"
        return line

    def final(self, seconds_each: list[float], statuses: list[str], jobs: int = 1) -> str:
        """The last line: wall time, per-submission mean, and the statuses.
        ``seconds_each``: the grading time of each submission graded in this run."""
        wall = self.clock() - self.started
        counts = Counter(statuses)
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "nothing graded"
        n = self.done
        line = f"Done in {format_duration(wall)} of wall time for {n} submission{'s' if n != 1 else ''}"
        if self.graded:
            mean = sum(seconds_each) / len(seconds_each) if seconds_each else 0.0
            line += (f": {wall / self.graded:.1f} s per submission (each took {mean:.1f} s on average, "
                     f"{jobs} at a time)")
        return f"{line}; {summary}."
