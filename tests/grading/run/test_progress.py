"""Progress lines of a long grading run (a clock of our own: no waiting)."""
from __future__ import annotations

from streamlab.grading.run.progress import Progress, format_duration


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_durations():
    assert [format_duration(s) for s in (0, 42.4, 60, 185, 3599, 3600, 7620)] == \
        ["0 s", "42 s", "1 min 00 s", "3 min 05 s", "59 min 59 s", "1 h 00 min", "2 h 07 min"]


def test_rate_and_time_left():
    clock = Clock()
    progress = Progress(12, "shard 2/4", clock=clock)
    clock.now += 60
    assert progress.step() == "shard 2/4: 1/12 done (8%), 1.0 per minute, about 11 min 00 s left"
    clock.now += 60
    assert progress.step() == "shard 2/4: 2/12 done (17%), 1.0 per minute, about 10 min 00 s left"


def test_skipped_submissions_do_not_make_the_run_look_faster():
    clock = Clock()
    progress = Progress(4, clock=clock)
    assert progress.step(skipped=True) == "progress: 1/4 done (25%), time left not known yet"
    clock.now += 30
    assert progress.step() == "progress: 2/4 done (50%), 2.0 per minute, about 1 min 00 s left"
    clock.now += 30
    progress.step()
    clock.now += 30
    assert progress.step().startswith("progress: 4/4 done (100%), 2.0 per minute")


def test_final_line():
    clock = Clock()
    progress = Progress(3, clock=clock)
    for _ in range(3):
        clock.now += 40
        progress.step()
    line = progress.final([70.0, 75.0, 80.0], ["graded", "graded", "timed out"], jobs=2)
    assert line == ("Done in 2 min 00 s of wall time for 3 submissions: 40.0 s per submission (each took 75.0 s "
                    "on average, 2 at a time); 2 graded, 1 timed out.")
    assert Progress(0, clock=clock).final([], []) == "Done in 0 s of wall time for 0 submissions; nothing graded."
