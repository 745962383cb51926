"""Graded labs: release them to students, and grade what students hand in, with nbgrader.

    streamlab release-labs                      solutions/<lab>/ -> labs/<lab>/ (nbgrader generate_assignment)
    streamlab grade LAB SUBMISSIONS [--out DIR] grade a folder of submissions -> grades.csv + feedback + summary
        [--shard K/N] [--roster FILE]           ... only shard K of N (merge the shards' outputs afterwards)
    streamlab grade merge OUT... --out DIR      shards' outputs -> one class's grades (or a refusal naming why)
    streamlab grade export OUT --format F       grades as Canvas, Moodle or a plain CSV import them
    streamlab grade gradescope LAB --out F.zip  the lab's autograder for a Gradescope assignment
    streamlab check LAB_NOTEBOOK                a learner's self-check: each part passed or why not

Follow one submission through five wings, each a folder with its reading order in its ``__init__``:

    labs          the labs: where they live, the course's nbgrader config, release_labs
    bounds        how much of what a student made the grader reads: every untrusted size, bounded
    run/          the run: submissions found, the Grader (a SubmissionContext each), shards, progress, run.json, merge
    workers/      the child processes the run hands submissions to: the warm worker (autograde, checks, feedback),
                  the checks' process
    sandbox/      where a kernel runs: isolation, the Kafka door's requests, tenancy, the box and its boot
    outputs/      results (Status, CheckResult, Result, grades.csv), feedback, summary, roster, exports
    steps/        the grader's own steps in nbgrader's pipelines, one class to a file (BoundedExecute ...)
    hidden_checks the lab authors' side of the hidden checks: ``@check`` and ``Artifacts`` (run in workers/)

and the front ends, each a thin layer over the run: ``cli`` (the argparse commands), ``gradescope`` (a lab's
Gradescope autograder), ``selfcheck`` (``streamlab check``: a learner runs a lab as the grader will) and
``release`` (the course as students get it, checked to hold no answer key).

The grader's own steps in nbgrader's pipelines (``steps/``: BoundedExecute, HideHiddenTests, InertFeedback ...) are
each a class in a file of its own; importing this package imports none of them, nor nbconvert.
"""
from .cli import add_grade_command
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
from .outputs.results import Result, Status, WorkerReport, write_csv
from .outputs.summary import write_summary
from .run.grader import Grader
from .run.submissions import check_notebook, find_submissions
from .sandbox.isolation import kill_submission_processes, leftover_processes
from .selfcheck import run_selfcheck

__all__ = [
    "find_labs", "resolve_lab", "lab_notebooks", "nbgrader_config", "generate_assignment", "release_labs",
    "released_notebook", "reference_notebook", "answer_cells",
    "find_submissions", "check_notebook",
    "Grader", "GradingError", "leftover_processes", "kill_submission_processes",
    "write_csv", "Status", "Result", "WorkerReport",
    "add_grade_command", "run_selfcheck", "write_summary",
]

