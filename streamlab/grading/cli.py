"""The commands: ``streamlab grade``, ``streamlab check`` and ``streamlab release-labs`` (argparse, and printing)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from .grader import DEFAULT_TIMEOUT_S, Grader
from .labs import GradingError, release_labs, resolve_lab
from .results import Status
from .sandbox import Limits
from .selfcheck import format_report, run_selfcheck
from .submissions import find_submissions


def cmd_grade(args) -> int:
    try:
        lab = resolve_lab(args.lab)
        submissions = find_submissions(Path(args.submissions), lab)
        out = Path(args.out or Path("grades") / lab)
        if not submissions:
            print(f"No submissions found in {args.submissions} (expected <student>.ipynb files or "
                  f"<student>/{lab}/ folders).")
            return 1
        limits = None if args.no_sandbox else Limits(memory_mb=args.memory_mb, processes=args.max_processes,
                                                     cpu_seconds=args.cpu_seconds, disk_mb=args.disk_mb)
        grader = Grader(lab, out, timeout_s=args.timeout, cell_timeout_s=args.cell_timeout,
                        force=args.force, jobs=args.jobs, sandbox=limits)
        print(f"Grading {len(submissions)} submission(s) of {lab} into {grader.out} "
              f"(limits: {args.timeout:g} s per submission"
              + (f", {args.cell_timeout:g} s per cell" if args.cell_timeout else "")
              + (f"; each in a sandbox: {limits.describe()})" if limits else
                 "; WITHOUT the sandbox: every submission runs with your own powers)"), flush=True)
        started = time.monotonic()
        grader.prepare()
        results = grader.run(submissions)
    except GradingError as err:
        print(f"streamlab grade: {err}", file=sys.stderr)
        return 2
    counts: dict[Status, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    print(f"Done in {time.monotonic() - started:.0f} s: {summary}.")
    print(f"Grades: {grader.out / 'grades.csv'}   Feedback: {grader.feedback_dir}/   "
          f"Class summary: {grader.out / 'summary.html'}")
    failed = [r for r in results if r.status == Status.ERROR]
    if failed:
        print(f"The grader failed on {len(failed)} submission(s): "
              + ", ".join(f"{r.student} (log: {r.log})" for r in failed), file=sys.stderr)
        return 1
    return 0


def cmd_release_labs(args) -> int:
    try:
        labs = [resolve_lab(name) for name in args.labs] if args.labs else None
        released = release_labs(labs, target=Path(args.out) if args.out else None)
    except GradingError as err:
        print(f"streamlab release-labs: {err}", file=sys.stderr)
        return 2
    for path in released:
        print(f"released {path}")
    return 0


def cmd_check(args) -> int:
    print(f"Running a copy of {args.notebook} from the top in a fresh kernel, as the grader will "
          f"(your file is not changed) ...", flush=True)
    try:
        result = run_selfcheck(Path(args.notebook), timeout_s=args.timeout, cell_timeout_s=args.cell_timeout)
    except GradingError as err:
        print(f"streamlab check: {err}", file=sys.stderr)
        return 2
    print(format_report(result))
    return result.exit_code


def add_grade_command(sub) -> None:
    """Add ``grade``, ``check`` and ``release-labs`` to the ``streamlab`` command's subparsers."""
    grade = sub.add_parser(
        "grade", help="grade students' lab notebooks with nbgrader -> grades.csv and feedback",
        description="Grade every submission of LAB in SUBMISSIONS, each in its own sandbox, kernel and "
                    "Spark, with time and resource limits; write OUT/grades.csv and OUT/feedback/<student>.html. "
                    "Submitted files are never modified.")
    grade.add_argument("lab", metavar="LAB", help="the lab, e.g. lab01_stateless_vs_stateful (or lab01)")
    grade.add_argument("submissions", metavar="SUBMISSIONS",
                       help="a folder of <student>.ipynb files, or nbgrader's <student>/<lab>/ folders")
    grade.add_argument("--out", help="where grades, feedback and logs go (default: grades/<lab>)")
    grade.add_argument("--force", action="store_true", help="grade again submissions already graded")
    grade.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                       help=f"seconds allowed for a whole submission (default {DEFAULT_TIMEOUT_S})")
    grade.add_argument("--cell-timeout", type=float, default=None,
                       help="seconds allowed per cell (default: nbgrader_config.py, 300)")
    grade.add_argument("--jobs", type=int, default=1,
                       help="submissions graded at the same time (default 1; each needs a core and ~1.5 GB)")
    box = grade.add_argument_group(
        "the sandbox", "Each submission's kernel runs sealed off: its own user, processes, network (the broker "
                       "only) and files (no answer key, no other student, no grading output). A limit it runs "
                       "into gives the status 'limit exceeded' and 0 points.")
    defaults = Limits()
    box.add_argument("--memory-mb", type=int, default=defaults.memory_mb,
                     help=f"memory of the kernel, Spark and their files (default {defaults.memory_mb})")
    box.add_argument("--max-processes", type=int, default=defaults.processes,
                     help=f"processes and threads (default {defaults.processes})")
    box.add_argument("--cpu-seconds", type=int, default=defaults.cpu_seconds,
                     help=f"CPU time of all its processes (default {defaults.cpu_seconds})")
    box.add_argument("--disk-mb", type=int, default=defaults.disk_mb,
                     help=f"its work folder: checkpoints, Spark's files, /tmp (default {defaults.disk_mb})")
    box.add_argument("--no-sandbox", action="store_true",
                     help="run submissions with your own powers (only for code you trust, or where no "
                          "sandbox can be made); grades.csv and the summary say so")
    grade.set_defaults(func=cmd_grade)

    check = sub.add_parser(
        "check", help="check your lab before you hand it in: run it as the grader will, show each part",
        description="Run a copy of LAB_NOTEBOOK top to bottom in a fresh kernel, with the grader's limits "
                    "and isolation, and print each graded part of the lab: its points, passed or the first "
                    "failure, and the cell that failed. Only the visible tests run (the grader also has "
                    "hidden ones). Exits with 0 when every part passes, 1 when one does not.")
    check.add_argument("notebook", metavar="LAB_NOTEBOOK", help="your lab notebook (.ipynb)")
    check.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                       help=f"seconds allowed for the whole notebook (default {DEFAULT_TIMEOUT_S}, as the grader)")
    check.add_argument("--cell-timeout", type=float, default=None,
                       help="seconds allowed per cell (default: nbgrader_config.py, 300, as the grader)")
    check.set_defaults(func=cmd_check)

    release = sub.add_parser("release-labs", help="generate the student labs in labs/ from solutions/",
                             description="Run nbgrader generate_assignment on solutions/<lab>/ and put "
                                         "the student version in labs/<lab>/.")
    release.add_argument("labs", nargs="*", metavar="LAB", help="labs to release (default: all)")
    release.add_argument("--out", help="release into this folder instead of labs/")
    release.set_defaults(func=cmd_release_labs)
