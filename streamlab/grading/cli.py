"""The commands: ``streamlab grade`` (and ``grade merge``, ``grade export``), ``streamlab check`` and
``streamlab release-labs``, ``streamlab release`` (argparse, and printing)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..stack.jupyter import course_language
from . import bounds
from .gradescope import VISIBILITY, package
from .gradescope import run as run_gradescope
from .labs import GradingError, release_labs, resolve_lab
from .outputs.exports import export_table, left_out, not_graded, to_csv
from .outputs.languages import SELF_CHECK, language_of_bytes
from .outputs.results import Status, write_csv
from .outputs.roster import match, read_roster
from .outputs.summary import load_results, write_summary
from .release import release
from .run.grader import Grader
from .run.merge import merge
from .run.runinfo import describe_runs, read_runs
from .run.shards import WHOLE, Shard, select
from .run.submissions import SubmissionRefused, find_submissions, read_submitted_file
from .sandbox.box import not_enforced_here
from .sandbox.limits import Limits
from .selfcheck import format_report, not_a_notebook, run_selfcheck


def _roster_for(path: str | None, submissions: list[tuple[str, str]]):
    """The roster matched to ``submissions`` ((student, file) pairs), printed; None without --roster."""
    if not path:
        return None
    matched = match(read_roster(path), submissions)
    print(matched.describe(len(submissions)), flush=True)
    return matched


def cmd_grade(args) -> int:
    try:
        lab = resolve_lab(args.lab)
        shard = Shard.parse(args.shard) if args.shard else WHOLE
        folder = find_submissions(Path(args.submissions), lab)
        out = Path(args.out or Path("grades") / lab)
        if not folder:
            print(f"No submissions found in {args.submissions} (expected <student>.ipynb files or "
                  f"<student>/{lab}/ folders).")
            return 1
        submissions = select(folder, shard)
        roster = _roster_for(args.roster, [(s.student, str(s.origin)) for s in folder])
        if roster is not None and shard != WHOLE:  # this shard's rows; the merge lists who is missing
            mine = {s.student for s in submissions}
            roster.found = {k: v for k, v in roster.found.items() if k in mine}
            roster.unknown = [k for k in roster.unknown if k in mine]
            roster.missing = []
        limits = None if args.no_sandbox else Limits(memory_mb=args.memory_mb, processes=args.max_processes,
                                                     cpu_seconds=args.cpu_seconds, disk_mb=args.disk_mb)
        which = "" if shard == WHOLE else f" (shard {shard}: {len(submissions)} of the folder's {len(folder)})"
        print(f"Grading {len(submissions)} submission(s) of {lab}{which} into {out.resolve()} "
              f"(limits: {args.timeout:g} s per submission"
              + (f", {args.cell_timeout:g} s per cell" if args.cell_timeout else "")
              + (f"; each in a sandbox: {limits.describe()}{not_enforced_here()})" if limits else
                 "; WITHOUT the sandbox: every submission runs with your own powers)"), flush=True)
        grader = Grader(lab, out, timeout_s=args.timeout, cell_timeout_s=args.cell_timeout,
                        force=args.force, jobs=args.jobs, limits=limits, shard=shard, roster=roster)
        results = grader.run(submissions, folder=folder)  # an empty shard still writes its record, for the merge
    except GradingError as err:
        print(f"streamlab grade: {err}", file=sys.stderr)
        return 2
    print(grader.final_line(results))
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


def cmd_release(args) -> int:
    try:
        written = release(Path(args.out), force=args.force)
    except GradingError as err:
        print(f"streamlab release: {err}", file=sys.stderr)
        return 2
    print(f"The course as students get it: {len(written)} files in {args.out}, checked: no solution, hidden "
          "test or hidden check in them. Publish that folder; keep this repository private.")
    return 0


def cmd_check(args) -> int:
    wrong = not_a_notebook(args.notebook, course_language())
    if wrong:  # the learner's slip first, before any run starts
        print(f"streamlab check: {wrong}", file=sys.stderr)
        return 2
    try:  # the notebook's language, for the words before its report (the report reads it again, checked)
        language = language_of_bytes(read_submitted_file(Path(args.notebook)))
    except (SubmissionRefused, OSError):
        language = "en"
    print(SELF_CHECK[language]["running"].format(notebook=args.notebook), flush=True)
    try:
        result = run_selfcheck(Path(args.notebook), timeout_s=args.timeout, cell_timeout_s=args.cell_timeout,
                               hidden_checks=args.hidden_checks)
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
                    "Submitted files are never modified. Also: `streamlab grade merge OUT... --out DIR` (shards' "
                    "outputs into one) and `streamlab grade export OUT --format canvas|moodle|csv` (see their --help).")
    grade.add_argument("lab", metavar="LAB", help="the lab, e.g. lab01_stateless_vs_stateful (or lab01)")
    grade.add_argument("submissions", metavar="SUBMISSIONS",
                       help="a folder of <student>.ipynb files, or nbgrader's <student>/<lab>/ folders")
    grade.add_argument("--out", help="where grades, feedback and logs go (default: grades/<lab>)")
    grade.add_argument("--force", action="store_true", help="grade again submissions already graded")
    grade.add_argument("--timeout", type=float, default=bounds.SUBMISSION_TIMEOUT_S,
                       help=f"seconds allowed for a whole submission (default {bounds.SUBMISSION_TIMEOUT_S})")
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
    grade.add_argument("--shard", metavar="K/N",
                       help="grade only shard K of N (1 <= K <= N): a fixed share of the folder, by a hash of each "
                            "submission's name; run the N shards anywhere, then `streamlab grade merge`")
    grade.add_argument("--roster", metavar="FILE",
                       help="CSV with the columns file,id,name,email,section: adds the students' ids to "
                            "grades.csv and lists who is missing or unknown")
    grade.set_defaults(func=cmd_grade)

    check = sub.add_parser(
        "check", help="check your lab before you hand it in: run it as the grader will, show each part",
        description="Run a copy of LAB_NOTEBOOK top to bottom in a fresh kernel, with the grader's limits "
                    "and isolation, and print each graded part of the lab: its points, passed or the first "
                    "failure, and the cell that failed. Only the visible tests run (the grader also has "
                    "hidden ones). Exits with 0 when every part passes, 1 when one does not.")
    check.add_argument("notebook", metavar="LAB_NOTEBOOK", help="your lab notebook (.ipynb)")
    check.add_argument("--timeout", type=float, default=bounds.SUBMISSION_TIMEOUT_S,
                       help=f"seconds allowed for the whole notebook (default {bounds.SUBMISSION_TIMEOUT_S}, "
                            f"as the grader)")
    check.add_argument("--cell-timeout", type=float, default=None,
                       help="seconds allowed per cell (default: nbgrader_config.py, 300, as the grader)")
    check.add_argument("--hidden-checks", action="store_true",
                       help="lab authors, in the course's private repository: grade from solutions/ and run the "
                            "lab's hidden_checks.py too, as the grader does")
    check.set_defaults(func=cmd_check)

    release = sub.add_parser("release-labs", help="generate the student labs in labs/ from solutions/",
                             description="Run nbgrader generate_assignment on solutions/<lab>/ and put "
                                         "the student version in labs/<lab>/.")
    release.add_argument("labs", nargs="*", metavar="LAB", help="labs to release (default: all)")
    release.add_argument("--out", help="release into this folder instead of labs/")
    release.set_defaults(func=cmd_release_labs)

    public = sub.add_parser("release", help="write the course as students get it: no solutions, hidden tests "
                                            "or hidden checks (the public repository; this one stays private)",
                            description="Copy the lessons, the student labs (generated now), the package and the "
                                        "set-up files into OUT, then read every file and refuse the release if "
                                        "one holds part of the answer key.")
    public.add_argument("out", metavar="OUT", help="a new folder (outside the course, or under build/)")
    public.add_argument("--force", action="store_true", help="replace OUT if it exists")
    public.set_defaults(func=cmd_release)


# ----------------------------------------------------------------------------- grade merge, grade export

def _load_roster(path: str | None, results) -> object:
    if not path:
        return None
    return match(read_roster(path), [(r.student, r.file) for r in results])


def cmd_merge(args) -> int:
    dest = Path(args.out)
    try:
        results, runs = merge([Path(p) for p in args.outputs], dest)
        roster = _load_roster(args.roster, results)
    except GradingError as err:
        print(f"streamlab grade merge: {err}", file=sys.stderr)
        return 2
    if roster is not None:
        print(roster.describe(len(results)))
    write_csv(dest / "grades.csv", results, roster=roster)
    write_summary(dest, runs[0].lab, [r.student for r in results], runs=runs, roster=roster)
    errors = [r.student for r in results if r.status == Status.ERROR]
    print(f"Merged {len(results)} student(s) of {runs[0].lab} from {describe_runs(runs)}.")
    print(f"Grades: {dest / 'grades.csv'}   Feedback: {dest / 'feedback'}/   Class summary: {dest / 'summary.html'}")
    if errors:
        print(f"{len(errors)} grader error(s): {', '.join(errors)}; run their shards again (only they are graded "
              f"again) and merge again", file=sys.stderr)
        return 1
    return 0


def cmd_export(args) -> int:
    out = Path(args.output)
    try:
        runs = read_runs(out)
        students = sorted({s for run in runs for s in run.students}) if runs else None
        results, unreadable = load_results(out / "results", students)
        if not results and not unreadable:
            raise GradingError(f"{out} has no results: give the folder `streamlab grade` or `grade merge` wrote")
        if unreadable:
            raise GradingError(f"{out}/results: cannot read {', '.join(unreadable)}")
        roster = _load_roster(args.roster, results)
        lab = runs[0].lab if runs else out.name
        max_score = max(r.max_score for r in results)
        table = export_table(args.format, results, roster, args.assignment or lab, max_score,
                             allow_unlisted=args.allow_unlisted)
    except (GradingError, ValueError, TypeError, OSError) as err:
        print(f"streamlab grade export: {err}", file=sys.stderr)
        return 2
    target = Path(args.out)
    target.write_text(to_csv(table), encoding="utf-8", newline="")
    print(f"Wrote {target}: {len(table) - (2 if args.format == 'canvas' else 1)} row(s) in {args.format}'s layout.")
    if roster is not None:
        print(roster.describe(len(results)))
    if args.format == "csv":
        return 0
    if args.format == "canvas":
        for r in not_graded(results):
            print(f"  {r.student}: {r.status_text}{' - ' + r.detail if r.detail else ''}")
    absent = left_out(results, roster)
    if absent:  # a blank score would erase their grade on the platform: they are not in the file at all
        print(f"Not in {target} (their grades on the platform stay as they are) ({len(absent)}):")
        for line in absent:
            print(f"  {line}")
    if roster.unknown:
        print(f"Not in {target}, not in the roster (--allow-unlisted) ({len(roster.unknown)}): "
              f"{', '.join(roster.unknown)}")
    return 0


def merge_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamlab grade merge",
        description="Merge the outputs of `streamlab grade --shard K/N` runs (copied from the machines that ran "
                    "them) into one grades.csv, feedback folder and summary.html. Refuses, naming them, outputs "
                    "graded with a different lab, solution, grader or settings, a missing or unfinished shard, "
                    "and a student graded twice with different results.")
    parser.add_argument("outputs", nargs="+", metavar="OUT", help="the shards' output folders")
    parser.add_argument("--out", required=True, metavar="DIR", help="where the merged grades go (a new folder, "
                        "or an earlier merge's, which is replaced)")
    parser.add_argument("--roster", metavar="FILE", help="CSV with the columns file,id,name,email,section")
    parser.set_defaults(func=cmd_merge)
    return parser


def export_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamlab grade export",
        description="Write a grading output's scores (the lab's points) as a file your learning platform "
                    "imports: canvas (the gradebook CSV), moodle (grade import CSV, by ID number) or csv. Canvas and "
                    "Moodle files hold only the roster's students with a final result (no blank score: it would "
                    "erase a grade); the export refuses a roster row without an id or sharing one, and graded "
                    "submissions the roster does not list (unless --allow-unlisted).")
    parser.add_argument("output", metavar="OUT", help="what `streamlab grade` or `streamlab grade merge` wrote")
    parser.add_argument("--format", required=True, choices=["canvas", "moodle", "csv"])
    parser.add_argument("--roster", metavar="FILE",
                        help="CSV with the columns file,id,name,email,section (needed for canvas and moodle)")
    parser.add_argument("--out", required=True, metavar="FILE.csv", help="the file to write")
    parser.add_argument("--assignment", metavar="NAME",
                        help="the column's name: the assignment in Canvas, the grade item in Moodle (default: the "
                             "lab); in Canvas, 'Lab 1 (1234)' names an existing assignment, a new name makes one")
    parser.add_argument("--allow-unlisted", action="store_true",
                        help="canvas and moodle: leave graded submissions the roster does not list out of the file "
                             "(named on the console) instead of refusing to export")
    parser.set_defaults(func=cmd_export)
    return parser


def cmd_gradescope(args) -> int:
    if args.run:  # inside Gradescope's container, from run_autograder
        results = run_gradescope(args.lab, Path(args.run), visibility=args.visibility, timeout_s=args.timeout)
        print(results["output"])
        return 1 if results["extra_data"]["status"] == Status.ERROR.value else 0
    try:
        names = package(args.lab, Path(args.out), visibility=args.visibility, timeout_s=args.timeout)
    except GradingError as err:
        print(f"streamlab grade gradescope: {err}", file=sys.stderr)
        return 2
    print(f"Wrote {args.out}: Gradescope's autograder for {resolve_lab(args.lab)} ({len(names)} files: setup.sh, "
          "run_autograder, the package and this lab's answer key). Upload it to the assignment's Autograder "
          "settings, base image Ubuntu 22.04; keep it private.")
    return 0


def gradescope_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamlab grade gradescope",
        description="Write LAB's autograder for a Gradescope programming assignment: a zip with setup.sh, "
                    "run_autograder, the course's package and the lab's answer key. Each submission is then "
                    "graded on Gradescope as `streamlab grade` grades it, and its points, per graded cell, go "
                    "to Gradescope's gradebook.")
    parser.add_argument("lab", metavar="LAB", help="the lab, e.g. lab01_stateless_vs_stateful (or lab01)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="FILE.zip", help="the zip to write")
    where.add_argument("--run", metavar="ROOT", help="inside Gradescope's container (run_autograder does it): grade "
                       "ROOT/submission into ROOT/results/results.json")
    parser.add_argument("--visibility", default="visible", choices=VISIBILITY,
                        help="when students see their results (Gradescope's setting; default: visible)")
    parser.add_argument("--timeout", type=float, default=bounds.SUBMISSION_TIMEOUT_S,
                        help="seconds per submission (default: %(default)s); set Gradescope's own timeout above it")
    parser.set_defaults(func=cmd_gradescope)
    return parser


GRADE_TOOLS = {"merge": merge_parser, "export": export_parser, "gradescope": gradescope_parser}


def parse_grade_tool(argv: list[str]):
    """``streamlab grade merge|export|gradescope ...`` parsed, or None for anything else (``grade`` itself
    takes a lab and a folder, and no lab is called merge, export or gradescope)."""
    if len(argv) >= 2 and argv[0] == "grade" and argv[1] in GRADE_TOOLS:
        return GRADE_TOOLS[argv[1]]().parse_args(argv[2:])
    return None
