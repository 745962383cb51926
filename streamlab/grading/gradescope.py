"""Grades on Gradescope: ``streamlab grade gradescope LAB --out FILE.zip`` writes a lab's *autograder*.

A Gradescope programming assignment runs an autograder: a zip the instructor uploads once, holding two
scripts at its top level (Gradescope's "autograder specifications"):

    setup.sh         run once, as root, when Gradescope builds the assignment's image (base image: Ubuntu
                     22.04): Java 17, Python 3.11, bubblewrap, a virtual environment with the course's
                     requirements and package, the jars (Kafka broker, Spark's Kafka connector)
    run_autograder   run once per submission, in a fresh container: the student's files are in
                     /autograder/submission/, the grade goes to /autograder/results/results.json

and here ``course/``: the package, its set-up files and ``solutions/<lab>/`` (that lab's answer key: the
zip is the instructor's and goes to Gradescope only, never to students). ``run_autograder`` calls ``run``
below, which grades the submission with ``streamlab grade`` itself (its own broker, the sandbox when the
container lets bubblewrap make one, the lab's hidden checks outside the student's kernel), then writes
``results.json``: one test per graded cell with its points and the grader's checks for it, the status
(``graded``, ``timed out`` ...), and, when the sandbox could not be made or a limit cannot be enforced in
the container, a line that says so. Text only (``output_format: text``): what a submission prints is never
rendered as HTML or Markdown.

What a student uploads is read as ``streamlab grade`` reads a folder: regular files only (never a link),
the lab's notebook by name, else the one notebook there is, within ``bounds.NOTEBOOK_BYTES``.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import time
import zipfile
from pathlib import Path

from ..stack import broker
from .labs import GradingError, lab_notebooks, resolve_lab, solutions_dir
from .outputs.results import CheckResult, Outcome, Result, Status
from .release import IGNORED  # what a release leaves out of the package, the autograder too
from .run.grader import Grader
from .run.submissions import SubmissionRefused, find_submissions, read_submitted_file
from .sandbox.box import not_enforced_here, unavailable_reason
from .sandbox.limits import Limits

VISIBILITY = ("hidden", "after_due_date", "after_published", "visible")  # Gradescope's four settings
SUBMISSION_ID = "submission"  # the one student's id in the grader's run
COURSE_FILES = ("requirements.txt", "pyproject.toml", "nbgrader_config.py", "LICENSE", "LICENSE-CONTENT")
EXECUTABLE = 0o100755 << 16  # a zip entry's external attributes: a regular file, rwxr-xr-x

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (choose the Ubuntu 22.04 base;
# Debian 12 works too). The course's package and the lab's answer key are in /autograder/source/course/.
set -euo pipefail
. /etc/os-release
case "$ID $VERSION_ID" in
  "ubuntu 22.04"|"debian 12") ;;
  *) echo "setup.sh: made for Ubuntu 22.04 (or Debian 12), not $PRETTY_NAME: choose Ubuntu 22.04 as the" \\
          "autograder's base image in Gradescope's settings" >&2; exit 1 ;;
esac
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends openjdk-17-jdk-headless python3.11 python3.11-venv bubblewrap \\
    ca-certificates
python3.11 -m venv /autograder/venv
/autograder/venv/bin/python -m pip install --quiet --upgrade pip
/autograder/venv/bin/python -m pip install --quiet -r /autograder/source/course/requirements.txt
/autograder/venv/bin/python -m pip install --quiet --no-deps -e /autograder/source/course
cd /autograder/source/course
/autograder/venv/bin/streamlab fetch --connector --kafka
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this once per submission: it grades /autograder/submission/ and writes
# /autograder/results/results.json (streamlab.grading.gradescope.run, through the streamlab command).
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
cd "$ROOT/source/course"
exec "${{STREAMLAB_AUTOGRADER_VENV:-$ROOT/venv}}/bin/python" -m streamlab grade gradescope {lab} --run "$ROOT" \\
    --visibility {visibility} --timeout {timeout:g}
"""


# ----------------------------------------------------------------------------- the package

def package(lab: str, out: Path, *, visibility: str = "visible", timeout_s: float = 900) -> list[str]:
    """Write ``lab``'s autograder zip to ``out``; returns the names in it."""
    lab = resolve_lab(lab)
    if visibility not in VISIBILITY:
        raise GradingError(f"visibility is one of {', '.join(VISIBILITY)}, not {visibility!r}")
    course = solutions_dir().parent
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.with_name(out.name + ".partial")
    with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as zf:
        _script(zf, "setup.sh", SETUP_SH)
        _script(zf, "run_autograder", RUN_AUTOGRADER.format(lab=lab, visibility=visibility, timeout=timeout_s))
        for name in COURSE_FILES:
            if (course / name).is_file():
                zf.write(course / name, f"course/{name}")
        for folder, prefix in ((course / "streamlab", "course/streamlab"),
                               (solutions_dir() / lab, f"course/solutions/{lab}")):
            for path in _files(folder):
                zf.write(path, f"{prefix}/{path.relative_to(folder).as_posix()}")
        names = zf.namelist()
    staging.replace(out)
    return names


def _script(zf: zipfile.ZipFile, name: str, text: str) -> None:
    info = zipfile.ZipInfo(name, date_time=time.localtime()[:6])
    info.external_attr = EXECUTABLE
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, text)


def _files(folder: Path) -> list[Path]:
    found = []
    for root, dirs, files in os.walk(folder):
        ignored = IGNORED(root, dirs + files)
        dirs[:] = sorted(d for d in dirs if d not in ignored)
        found += [Path(root) / f for f in sorted(files) if f not in ignored]
    return found


# ----------------------------------------------------------------------------- one submission

def submitted_notebook(folder: Path, lab: str) -> tuple[Path | None, str]:
    """(the notebook to grade in what the student uploaded, or None; why not). Regular files only, found
    without following a link; the lab's notebook by name, else the only notebook there is."""
    (wanted,) = lab_notebooks(lab)  # a Gradescope assignment is one notebook
    found = []
    for root, dirs, files in os.walk(folder):  # os.walk lists a linked folder but never enters it
        dirs[:] = [d for d in dirs if d != ".ipynb_checkpoints"]
        for name in files:
            path = Path(root) / name
            if name.endswith(".ipynb") and stat.S_ISREG(path.lstat().st_mode):
                found.append(path)
    named = [p for p in found if p.name == f"{wanted}.ipynb"]
    if len(named) == 1:
        return named[0], ""
    if len(found) == 1 and not named:
        return found[0], ""
    if not found:
        return None, f"no notebook in your submission: upload {wanted}.ipynb"
    return None, (f"{len(found)} notebooks in your submission and not one {wanted}.ipynb: upload only "
                  f"{wanted}.ipynb")


def run(lab: str, root: Path, *, visibility: str = "visible", timeout_s: float = 900) -> dict:
    """Grade ``root/submission`` and write ``root/results/results.json``; returns what it wrote."""
    lab = resolve_lab(lab)
    root = Path(root)
    work = root / "grading"
    if work.exists():
        shutil.rmtree(work)
    notebook, problem = submitted_notebook(root / "submission", lab)
    folder = work / "submissions"
    folder.mkdir(parents=True)
    if notebook is not None:
        try:  # read as the grader reads a submitted file: no link followed, no FIFO waited on, bounded
            (folder / f"{SUBMISSION_ID}.ipynb").write_bytes(read_submitted_file(notebook))
        except SubmissionRefused as refused:
            problem = str(refused)
    if problem:
        result = Result(student=SUBMISSION_ID, status=Status.INVALID, detail=problem)
        return write_results(root, lab, result, visibility=visibility, box_note="")
    reason = unavailable_reason()
    limits = None if reason else Limits()
    box_note = (f"Graded WITHOUT the sandbox: {reason}." if reason else
                f"Graded in the sandbox ({limits.describe()}){not_enforced_here()}.")
    started = None
    if not os.environ.get("KAFKA_BOOTSTRAP_SERVERS") and not broker.status().running:
        started = broker.start()  # the container's own broker, for this submission alone
    try:
        (submission,) = find_submissions(folder, lab)
        grader = Grader(lab, work / "out", timeout_s=timeout_s, limits=limits)
        try:
            result = grader.grade(submission)
        finally:
            grader.close()
    except GradingError as err:
        result = Result(student=SUBMISSION_ID, status=Status.ERROR, detail=str(err))
    finally:
        if started is not None:
            broker.stop()
    return write_results(root, lab, result, visibility=visibility, box_note=box_note)


def results_json(lab: str, result: Result, *, visibility: str = "visible", box_note: str = "") -> dict:
    """Gradescope's results.json for one graded submission."""
    checks_of: dict[str, list[CheckResult]] = {}
    for check in result.checks:
        for cell in check.cells:
            checks_of.setdefault(cell, []).append(check)
    tests = []
    for number, cell in enumerate(result.cells, start=1):
        lines = [f"{c.outcome.upper() if not c.passed else c.outcome}: {c.name}" + (f": {c.detail}" if c.detail else "")
                 for c in checks_of.get(cell.grade_id, [])]
        score, max_score = float(cell.score or 0), float(cell.max_score or 0)
        tests.append({"name": cell.grade_id, "number": str(number), "score": score, "max_score": max_score,
                      "status": Outcome.PASSED if score >= max_score else Outcome.FAILED,  # Gradescope's words too
                      "output": "\n".join(["Checked by the grader, outside your notebook:", *lines]) if lines
                      else "", "visibility": visibility})
    summary = [f"{lab}: {result.status.value}, {result.score:g} of {result.max_score:g} points."]
    if result.detail:
        summary.append(result.detail)
    if result.status is Status.ERROR:
        summary.append("The grader failed, not your work: your instructor will grade this submission again.")
    if box_note:
        summary.append(box_note)
    return {"score": float(result.score if result.status is not Status.ERROR else 0.0),
            "execution_time": int(round(result.seconds)),
            "output": "\n".join(summary), "output_format": "text", "test_output_format": "text",
            "test_name_format": "text", "visibility": visibility, "stdout_visibility": "hidden",
            "extra_data": {"lab": lab, "status": result.status.value, "sandboxed": bool(box_note.startswith(
                "Graded in the sandbox"))},
            "tests": tests}


def write_results(root: Path, lab: str, result: Result, *, visibility: str, box_note: str) -> dict:
    results = results_json(lab, result, visibility=visibility, box_note=box_note)
    target = Path(root) / "results" / "results.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name("results.json.partial")
    partial.write_text(json.dumps(results, indent=2), encoding="utf-8")
    partial.replace(target)  # whatever a submission left at that path is replaced, never appended to
    return results
