"""Graded labs: release them to students, and grade what students hand in, with nbgrader.

    streamlab release-labs                      solutions/<lab>/ -> labs/<lab>/ (nbgrader generate_assignment)
    streamlab grade LAB SUBMISSIONS [--out DIR] grade a folder of submissions -> grades.csv + feedback + summary
        [--shard K/N] [--roster FILE]           ... only shard K of N (merge the shards' outputs afterwards)
    streamlab grade merge OUT... --out DIR      shards' outputs -> one class's grades (or a refusal naming why)
    streamlab grade export OUT --format F       grades as Canvas, Moodle or a plain CSV import them
    streamlab grade gradescope LAB --out F.zip  the lab's autograder for a Gradescope assignment
    streamlab check LAB_NOTEBOOK                a learner's self-check: each part passed or why not

The modules, in the order they build on each other:

    results      Status, the worker's report (WorkerReport), a student's Result, grades.csv
    labs         finding labs, the course's nbgrader config, release_labs
    bounds       how much of what a student made the grader reads: every untrusted size, capped
    submissions  finding submissions in a folder (two layouts, exact names, regular files only), check_notebook
    isolation    per-submission environment, tagged processes and killing them, topic clean-up
    context      SubmissionContext: one submission as the grader hands it to a worker (JSON on the channel)
    kafka_requests  the Kafka door's view of requests: frames, and the topics and partitions a sandbox may create
    sandbox      the sandbox a submission's kernel runs in (bubblewrap, control groups, the Kafka door)
    sandbox_boot its start, with the standard library only: join the groups, drop privileges, exec
    tenancy      Kafka principals and ACLs: each sandbox touches its own topics, groups and transactions only
    feedback     the HideHiddenTests preprocessor and the page for submissions without feedback
    withhold     hidden tests taken out before the notebook runs: nothing of the answer key in the kernel
    hidden       the hidden checks' process per submission (ChecksProcess), and their points in the gradebook
    checks_runner  that process (python -m streamlab.grading.checks_runner), in a sandbox of its own
    worker       the warm worker grading submissions in turn (python -m streamlab.grading.worker --serve)
    grader       Grader: one isolated worker per student, results, feedback, grades.csv
    summary      OUT/summary.html: the class's scores, statuses and pass rate per test cell
    shards       which shard grades which submission (a hash of its name)
    runinfo      OUT/run.json: what a run was (lab, shard, versions, settings, machine)
    progress     progress lines: done / total, rate, time left, and the final line
    merge        ``streamlab grade merge``: shards' outputs into one, or a refusal naming why
    roster       the class roster (file,id,name,email,section) against the submissions
    exports      ``streamlab grade export``: Canvas's, Moodle's and a plain CSV
    gradescope   ``streamlab grade gradescope``: a lab's Gradescope autograder, and its run per submission
    release      ``streamlab release``: the course as students get it, checked to hold no answer key
    selfcheck    ``streamlab check``: a learner runs a lab as the grader will (child: checkrun)
    cli          the argparse commands

``HideHiddenTests`` (named in nbgrader_config.py) is built on first use, so that importing this
package does not import nbconvert.
"""
from .cli import add_grade_command
from .feedback import hide_hidden_tests
from .grader import Grader
from .isolation import kill_submission_processes, leftover_processes
from .labs import (
    GradingError,
    answer_cells,
    find_labs,
    generate_assignment,
    lab_notebooks,
    nbgrader_config,
    reference_notebook,
    release_labs,
    released_notebook,
    resolve_lab,
)
from .results import Result, Status, WorkerReport, write_csv
from .selfcheck import run_selfcheck
from .submissions import check_notebook, find_submissions
from .summary import write_summary

__all__ = [
    "find_labs", "resolve_lab", "lab_notebooks", "nbgrader_config", "generate_assignment", "release_labs",
    "released_notebook", "reference_notebook", "answer_cells",
    "find_submissions", "check_notebook",
    "Grader", "GradingError", "leftover_processes", "kill_submission_processes",
    "write_csv", "Status", "Result", "WorkerReport",
    "add_grade_command", "run_selfcheck", "write_summary",
]


def __getattr__(name: str):
    if name == "HideHiddenTests":
        return hide_hidden_tests()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
