"""Graded labs: release them to students, and grade what students hand in, with nbgrader.

    streamlab release-labs                      solutions/<lab>/ -> labs/<lab>/ (nbgrader generate_assignment)
    streamlab grade LAB SUBMISSIONS [--out DIR] grade a folder of submissions -> grades.csv + feedback

SUBMISSIONS is either nbgrader's layout, ``<student>/<lab>/<notebook>.ipynb``, or a flat folder of
``<student>.ipynb`` files (as downloaded from a learning platform).

How a submission is graded. The submitted file is never touched: it is copied into a private
nbgrader course folder (``OUT/course/<student>/``, with the lab's gradebook). One child process per
student runs nbgrader's own ``autograde`` (which puts the original test cells back, hidden tests
included, then executes the notebook in a fresh kernel with a time limit per cell) and
``generate_feedback``. The child gets its own Kafka topic prefix (``STREAMLAB_TOPIC_PREFIX``) and
checkpoint folder (``STREAMLAB_DATA_DIR``), so students never see each other's data, and a
wall-clock limit: when it runs out, the child, its kernel and the kernel's Spark JVM are killed
(every process carrying the student's grading tag in its environment). The same sweep runs after
every student, so a query left running cannot outlive its submission.

Statuses: ``graded``; ``timed out`` (a cell hit the per-cell limit and was interrupted: the other
cells still count; a cell that cannot be interrupted, or the whole submission hitting ``--timeout``:
0 points); ``crashed`` (the notebook killed its own
kernel: 0 points); ``invalid notebook`` (not JSON, not a notebook, or the lab's notebook is
missing: 0 points); ``grader error`` (something failed that is not the student's doing: the
command exits with status 1 and says where to look).
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import html
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from .paths import cache_dir, project_root

GRADED, TIMED_OUT, CRASHED, INVALID, ERROR = "graded", "timed out", "crashed", "invalid notebook", "grader error"
FINAL_STATUSES = (GRADED, TIMED_OUT, CRASHED, INVALID)
CSV_COLUMNS = ["student", "score", "max_score", "status", "seconds", "detail", "file"]
TAG = "STREAMLAB_GRADE_TAG"  # environment variable carried by every process grading one submission
DEFAULT_TIMEOUT_S = 900


class GradingError(RuntimeError):
    """The grader cannot do its job (not a problem with a student's work)."""


# ----------------------------------------------------------------------------- labs and config

def solutions_dir() -> Path:
    return project_root() / "solutions"


def labs_dir() -> Path:
    return project_root() / "labs"


def find_labs() -> list[str]:
    """The labs in solutions/: folders holding at least one notebook."""
    root = solutions_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def resolve_lab(name: str) -> str:
    """A lab's full name from its name or a unique prefix of it ("lab01")."""
    labs = find_labs()
    if name in labs:
        return name
    matches = [lab for lab in labs if lab.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    known = ", ".join(labs) or "none"
    raise GradingError(f"no single lab matches {name!r} in {solutions_dir()} (labs: {known})")


def lab_notebooks(lab: str) -> list[str]:
    """The names (without .ipynb) of the lab's notebooks."""
    return sorted(p.stem for p in (solutions_dir() / lab).glob("*.ipynb"))


def nbgrader_config(course_root: Path, *, cell_timeout: float | None = None):
    """The repository's nbgrader_config.py, pointed at ``course_root`` (and its own gradebook)."""
    from traitlets.config.loader import PyFileConfigLoader

    config_file = project_root() / "nbgrader_config.py"
    if not config_file.exists():
        raise GradingError(f"{config_file} is missing")
    config = PyFileConfigLoader(config_file.name, path=str(config_file.parent)).load_config()
    config.CourseDirectory.root = str(course_root)
    config.CourseDirectory.db_url = f"sqlite:///{course_root / 'gradebook.db'}"
    if cell_timeout:
        config.Execute.timeout = int(cell_timeout)
    return config


def _with_scripts_on_path(env: dict | None = None) -> dict:
    """nbgrader's gradebook runs the `alembic` script found on PATH: put this environment's
    scripts folder first, so the grader works without an activated virtual environment."""
    env = os.environ if env is None else env
    scripts = str(Path(sys.executable).parent)
    if env.get("PATH", "").split(os.pathsep)[0] != scripts:
        env["PATH"] = os.pathsep.join([scripts, *[p for p in env.get("PATH", "").split(os.pathsep) if p]])
    return env


def _run_converter(converter_cls, config, *, assignment: str, student: str = ".", **attrs) -> dict:
    """Run one of nbgrader's converters (GenerateAssignment, Autograde, GenerateFeedback) the way
    nbgrader's own API does; returns {"success", "log", "error"}."""
    from nbgrader.coursedir import CourseDirectory

    _with_scripts_on_path()
    from nbgrader.utils import capture_log

    coursedir = CourseDirectory(config=config)
    coursedir.assignment_id = assignment
    coursedir.student_id = student
    converter = converter_cls(coursedir=coursedir, config=config)
    for key, value in attrs.items():
        setattr(converter, key, value)
    result = capture_log(converter)
    result.setdefault("log", "")
    return result


def generate_assignment(course_root: Path, lab: str) -> None:
    """nbgrader generate_assignment for ``lab`` in a course folder holding solutions/<lab>/: it
    writes ``course_root/labs/<lab>/`` and the lab's gradebook. Raises GradingError on failure."""
    from nbgrader.converters import GenerateAssignment

    result = _run_converter(GenerateAssignment, nbgrader_config(course_root), assignment=lab,
                            force=True, create_assignment=True)
    if not result["success"]:
        raise GradingError(f"nbgrader generate_assignment failed for {lab}:\n"
                           f"{result.get('error', '')}\n{result['log']}")


def _generate_from_solutions(course_root: Path, lab: str) -> None:
    """Copy the repository's solutions/<lab>/ into ``course_root`` and generate the lab there."""
    shutil.copytree(solutions_dir() / lab, course_root / "solutions" / lab,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    generate_assignment(course_root, lab)


def release_labs(labs: list[str] | None = None, *, target: Path | None = None) -> list[Path]:
    """Generate the student version of each lab (default: all) into ``target`` (default: labs/).

    nbgrader works in a temporary course folder (so no gradebook is left in the repository); the
    result replaces ``target/<lab>/``. Returns the released notebooks.
    """
    labs = labs or find_labs()
    target = Path(target) if target else labs_dir()
    released = []
    with tempfile.TemporaryDirectory(prefix="streamlab-release-") as tmp:
        course = Path(tmp)
        for lab in labs:
            _generate_from_solutions(course, lab)
            destination = target / lab
            if destination.exists():
                shutil.rmtree(destination)
            shutil.copytree(course / "labs" / lab, destination)
            released += sorted(destination.glob("*.ipynb"))
    return released


# ----------------------------------------------------------------------------- feedback

def _hide_hidden_tests_class():
    from nbconvert.preprocessors import Preprocessor
    from traitlets import Unicode

    class HideHiddenTests(Preprocessor):
        """For feedback: in test cells, replace hidden test regions by a note and reduce error
        tracebacks (which quote the failing line) to the error's type and message."""

        begin = Unicode("BEGIN HIDDEN TESTS").tag(config=True)
        end = Unicode("END HIDDEN TESTS").tag(config=True)
        note = Unicode("# (hidden tests: run only by the grader)").tag(config=True)
        enabled = True

        def preprocess_cell(self, cell, resources, index):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("grade"):
                return cell, resources
            lines, hidden, removed = [], False, False
            for line in cell.source.split("\n"):
                if self.begin in line:
                    hidden = removed = True
                    lines.append(line[: len(line) - len(line.lstrip())] + self.note)
                elif self.end in line:
                    hidden = False
                elif not hidden:
                    lines.append(line)
            if removed:
                cell.source = "\n".join(lines)
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    message = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}".rstrip(": ")
                    output["traceback"] = [message]
            return cell, resources

    return HideHiddenTests


_LAZY: dict[str, type] = {}


def __getattr__(name: str):
    # `streamlab.grading.HideHiddenTests` (named in nbgrader_config.py) is built on first use, so
    # that importing this module (every `streamlab` command does) does not import nbconvert.
    if name == "HideHiddenTests":
        if name not in _LAZY:
            _LAZY[name] = _hide_hidden_tests_class()
        return _LAZY[name]
    raise AttributeError(name)


STATUS_EXPLANATIONS = {
    TIMED_OUT: "Your notebook did not finish within the time allowed for the whole submission, so "
               "it could not be graded. Look for a cell that never returns: a streaming query "
               "waited on without a time limit (awaitTermination() with no timeout), a query that "
               "never ends, or an endless loop.",
    CRASHED: "Your notebook stopped the Python kernel that ran it (for example os._exit(), "
             "sys.exit() in a forked process, a killed process, or running out of memory), so it "
             "could not be graded.",
    INVALID: "The file you submitted could not be read as this lab's Jupyter notebook.",
    ERROR: "The grader failed on your submission for a reason that is not your doing. Your "
           "instructor has been told and will grade it again.",
}


def _status_page(result: "Result", lab: str) -> str:
    explanation = STATUS_EXPLANATIONS.get(result.status, "")
    detail = f"<p><b>Details:</b> {html.escape(result.detail)}</p>" if result.detail else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(lab)}: {html.escape(result.student)}</title>
<style>body {{ font-family: sans-serif; max-width: 46em; margin: 2em auto; line-height: 1.5 }}</style></head>
<body>
<h1>{html.escape(lab)}</h1>
<p><b>Student:</b> {html.escape(result.student)}<br>
<b>Status:</b> {html.escape(result.status)}<br>
<b>Score:</b> {_fmt(result.score)} / {_fmt(result.max_score)}</p>
<p>{html.escape(explanation)}</p>
{detail}
<p>Before submitting again: restart the kernel and run all cells (Kernel &rarr; Restart Kernel and
Run All Cells), and check that every cell finishes.</p>
</body></html>
"""


# ----------------------------------------------------------------------------- submissions

@dataclass
class Submission:
    student: str
    files: dict[str, Path]      # notebook name (without .ipynb) -> submitted file
    origin: Path                # what grades.csv names: the file or the student's folder
    extra: list[Path] = field(default_factory=list)   # e.g. nbgrader's timestamp.txt

    def sha256(self) -> str:
        digest = hashlib.sha256()
        for name, path in sorted(self.files.items()):
            digest.update(name.encode())
            digest.update(path.read_bytes() if path.is_file() else b"<missing>")
        return digest.hexdigest()


def _student_id(raw: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_.@-]+", "_", raw).strip("._") or "student"
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}-{n}", n + 1
    taken.add(candidate)
    return candidate


def find_submissions(folder: Path, lab: str) -> list[Submission]:
    """Submissions in ``folder``: nbgrader's ``<student>/<lab>/`` layout (also inside a
    ``submitted/`` subfolder), or a flat folder of ``<student>.ipynb`` files."""
    folder = Path(folder)
    if not folder.is_dir():
        raise GradingError(f"{folder} is not a folder")
    if (folder / "submitted").is_dir() and not any(folder.glob("*/" + lab)):
        folder = folder / "submitted"
    notebooks = lab_notebooks(lab)
    taken: set[str] = set()
    nested = sorted(d for d in folder.iterdir() if d.is_dir() and (d / lab).is_dir())
    if nested:
        submissions = []
        for student_dir in nested:
            lab_dir = student_dir / lab
            files = {name: lab_dir / f"{name}.ipynb" for name in notebooks}
            if len(notebooks) == 1 and not files[notebooks[0]].exists():
                others = sorted(lab_dir.glob("*.ipynb"))
                if len(others) == 1:  # renamed by the student: grade it anyway
                    files = {notebooks[0]: others[0]}
            extra = [p for p in [lab_dir / "timestamp.txt"] if p.exists()]
            submissions.append(Submission(_student_id(student_dir.name, taken), files, lab_dir, extra))
        return submissions
    flat = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".ipynb")
    if flat and len(notebooks) != 1:
        raise GradingError(f"{lab} has {len(notebooks)} notebooks: use nbgrader's "
                           f"<student>/{lab}/<notebook>.ipynb layout for it")
    return [Submission(_student_id(p.stem, taken), {notebooks[0]: p}, p) for p in flat]


def check_notebook(path: Path) -> str | None:
    """Why ``path`` is not a readable Jupyter notebook, or None if it is one."""
    import nbformat

    if not path.is_file():
        return f"{path.name} is missing"
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        return f"{path.name} cannot be read as text ({type(err).__name__})"
    try:
        data = json.loads(raw)
    except ValueError as err:
        return f"{path.name} is not JSON ({err})"
    if not isinstance(data, dict) or "cells" not in data or "nbformat" not in data:
        return f"{path.name} is JSON but not a Jupyter notebook"
    try:
        notebook = nbformat.reads(raw, as_version=4)
        nbformat.validate(notebook)
    except Exception as err:  # nbformat raises several kinds of errors for broken notebooks
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"{path.name} is not a valid Jupyter notebook ({first})"
    return None


# ----------------------------------------------------------------------------- results

@dataclass
class Result:
    student: str
    status: str
    score: float = 0.0
    max_score: float = 0.0
    seconds: float = 0.0
    detail: str = ""
    file: str = ""
    sha256: str = ""
    solution_sha256: str = ""
    startup_seconds: float | None = None
    work_seconds: float | None = None
    cells: list = field(default_factory=list)
    feedback: str = ""
    log: str = ""
    graded_at: str = ""


def _fmt(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def write_csv(path: Path, results: list[Result]) -> None:
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for r in sorted(results, key=lambda r: r.student):
            writer.writerow([r.student, _fmt(r.score), _fmt(r.max_score), r.status, f"{r.seconds:.1f}",
                             r.detail, r.file])
    tmp.replace(path)


# ----------------------------------------------------------------------------- processes

def _tagged_processes(tag: str, *, prefix: bool = False):
    """Living processes (zombies left out) whose grading tag is ``tag``, or starts with it."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            value = proc.environ().get(TAG)
            if value is not None and (value.startswith(tag) if prefix else value == tag):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return found


def kill_submission_processes(worker: subprocess.Popen | None, tag: str) -> int:
    """Kill the ``worker`` (if it still runs), everything below it and every process carrying
    ``tag`` (the kernel runs in its own session, and the JVM may outlive the kernel).
    Returns how many processes were killed."""
    import psutil

    victims = {}
    if worker is not None and worker.poll() is None:  # not reaped yet, so its pid is still its own
        try:
            root = psutil.Process(worker.pid)
            for proc in [root, *root.children(recursive=True)]:
                victims[proc.pid] = proc
        except psutil.NoSuchProcess:
            pass
    for proc in _tagged_processes(tag):
        victims.setdefault(proc.pid, proc)
    victims.pop(os.getpid(), None)
    for proc in victims.values():
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(list(victims.values()), timeout=10)
    return len(victims)


def leftover_processes(tag_prefix: str) -> list[str]:
    """Living processes whose grading tag starts with ``tag_prefix`` (used by the tests)."""
    left = []
    for proc in _tagged_processes(tag_prefix, prefix=True):
        try:
            left.append(f"{proc.pid} {proc.name()}")
        except Exception:  # gone meanwhile
            continue
    return left


# ----------------------------------------------------------------------------- grading

class Grader:
    def __init__(self, lab: str, out: Path, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 cell_timeout_s: float | None = None, force: bool = False, jobs: int = 1,
                 run_tag: str | None = None, stream=None):
        self.lab = lab
        self.out = Path(out).resolve()
        self.timeout_s = timeout_s
        self.cell_timeout_s = cell_timeout_s
        self.force = force
        self.jobs = max(1, jobs)
        # Every process of this run carries "<run tag>-<student>" in STREAMLAB_GRADE_TAG; the tests
        # choose the run tag (STREAMLAB_GRADE_RUN_TAG) to check that none is left behind.
        self.run_tag = run_tag or os.environ.get("STREAMLAB_GRADE_RUN_TAG") or f"grade-{secrets.token_hex(4)}"
        self.stream = stream or sys.stdout
        self._print_lock = threading.Lock()
        self.template = self.out / "course" / ".template"
        self.results_dir = self.out / "results"
        self.feedback_dir = self.out / "feedback"
        self.logs_dir = self.out / "logs"
        self.max_score = 0.0
        self.solution_sha256 = ""

    def say(self, text: str) -> None:
        with self._print_lock:
            print(text, file=self.stream, flush=True)

    # -- set-up
    def prepare(self) -> None:
        from nbgrader.api import Gradebook

        for folder in (self.results_dir, self.feedback_dir, self.logs_dir):
            folder.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        for path in sorted((solutions_dir() / self.lab).rglob("*")):
            if path.is_file() and ".ipynb_checkpoints" not in path.parts:
                digest.update(str(path.relative_to(solutions_dir())).encode())
                digest.update(path.read_bytes())
        digest.update((project_root() / "nbgrader_config.py").read_bytes())
        self.solution_sha256 = digest.hexdigest()
        if self.template.exists():
            shutil.rmtree(self.template)
        _generate_from_solutions(self.template, self.lab)
        with Gradebook(f"sqlite:///{self.template / 'gradebook.db'}") as gradebook:
            self.max_score = float(gradebook.find_assignment(self.lab).max_score)
        from .kafka import bootstrap_servers

        self.bootstrap = bootstrap_servers()  # resolved once: every kernel uses this Kafka

    # -- one student
    def _previous(self, submission: Submission, sha: str) -> Result | None:
        path = self.results_dir / f"{submission.student}.json"
        if self.force or not path.exists():
            return None
        try:
            previous = Result(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            return None
        if (previous.sha256 == sha and previous.solution_sha256 == self.solution_sha256
                and previous.status in FINAL_STATUSES and Path(previous.feedback).exists()):
            return previous
        return None

    def grade_one(self, submission: Submission) -> tuple[Result, bool]:
        sha = submission.sha256()
        previous = self._previous(submission, sha)
        if previous is not None:
            return previous, True
        started = time.monotonic()
        result = Result(student=submission.student, status=ERROR, max_score=self.max_score,
                        file=str(submission.origin), sha256=sha, solution_sha256=self.solution_sha256,
                        log=str(self.logs_dir / f"{submission.student}.log"),
                        graded_at=datetime.now().isoformat(timespec="seconds"))
        try:
            problems = [p for p in (check_notebook(path) for path in submission.files.values()) if p]
            if problems:
                result.status, result.detail = INVALID, "; ".join(problems)
                Path(result.log).write_text(result.detail + "\n")
            else:
                self._autograde(submission, result)
        except Exception as err:  # the grader's own failure: reported, and the run goes on
            result.status, result.detail = ERROR, f"{type(err).__name__}: {err}"
        result.seconds = round(time.monotonic() - started, 1)
        if not result.feedback:  # nbgrader wrote none: say what happened instead
            page = self.feedback_dir / f"{submission.student}.html"
            page.write_text(_status_page(result, self.lab), encoding="utf-8")
            result.feedback = str(page)
        (self.results_dir / f"{submission.student}.json").write_text(json.dumps(asdict(result), indent=1))
        return result, False

    def _autograde(self, submission: Submission, result: Result) -> None:
        student, lab = submission.student, self.lab
        course = self.out / "course" / student
        if course.exists():
            shutil.rmtree(course)
        shutil.copytree(self.template, course)
        target = course / "submitted" / student / lab
        target.mkdir(parents=True)
        for name, path in submission.files.items():
            shutil.copyfile(path, target / f"{name}.ipynb")  # copy content only: the original is untouched
        for path in submission.extra:
            shutil.copyfile(path, target / path.name)

        tag = f"{self.run_tag}-{student}"
        workdir = Path(tempfile.mkdtemp(prefix=f"streamlab-grade-{student}-"))
        env = _with_scripts_on_path(dict(os.environ))
        env.update({
            TAG: tag,
            "KAFKA_BOOTSTRAP_SERVERS": self.bootstrap,
            # topic names allow [a-zA-Z0-9._-]; student ids may hold other characters (e-mail addresses)
            "STREAMLAB_TOPIC_PREFIX": re.sub(r"[^a-z0-9.-]+", "-", f"{tag}-".lower()),
            "STREAMLAB_DATA_DIR": str(workdir / "data"),
            "STREAMLAB_CACHE_DIR": str(cache_dir()),
            "STREAMLAB_SPARK_UI": "false",
            "SPARK_LOCAL_DIRS": str(workdir / "spark"),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONUNBUFFERED": "1",
        })
        for key in ("NBGRADER_EXECUTION", "NBGRADER_VALIDATING", "JPY_PARENT_PID"):
            env.pop(key, None)
        report = workdir / "report.json"
        command = [sys.executable, "-m", "streamlab.grading", "_worker", lab, student,
                   "--course", str(course), "--report", str(report)]
        if self.cell_timeout_s:
            command += ["--cell-timeout", str(self.cell_timeout_s)]
        log_path = Path(result.log)
        proc = None
        try:
            with log_path.open("wb") as log:
                proc = subprocess.Popen(command, env=env, cwd=str(course), stdout=log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
                try:
                    proc.wait(timeout=self.timeout_s)
                    hit_limit = False
                except subprocess.TimeoutExpired:
                    hit_limit = True
            killed = kill_submission_processes(proc, tag)
            if hit_limit:
                result.status, result.score = TIMED_OUT, 0.0
                result.detail = (f"the submission did not finish within {self.timeout_s:g} s; "
                                 f"it was stopped (with its kernel and Spark)")
                return
            if not report.exists():
                raise GradingError(f"the grading process ended (exit status {proc.returncode}) without "
                                   f"a report; see {log_path}")
            self._read_report(json.loads(report.read_text()), result, course)
            if killed and result.status == GRADED:
                result.detail = (result.detail + "; " if result.detail else "") + \
                    f"{killed} process(es) left running were stopped"
        finally:
            if proc is not None and proc.poll() is None:
                kill_submission_processes(proc, tag)
            self._delete_topics(env["STREAMLAB_TOPIC_PREFIX"])
            shutil.rmtree(workdir, ignore_errors=True)

    def _read_report(self, report: dict, result: Result, course: Path) -> None:
        result.startup_seconds = report.get("startup_seconds")
        result.work_seconds = report.get("work_seconds")
        result.cells = report.get("cells", [])
        if report["status"] in (GRADED, TIMED_OUT) and report.get("score") is not None:
            result.status = report["status"]
            result.score = float(report["score"])
            result.max_score = float(report["max_score"])
            result.detail = report.get("detail", "")
            feedback = course / "feedback" / result.student / self.lab
            pages = sorted(feedback.glob("*.html"))
            if not pages:
                raise GradingError(f"nbgrader wrote no feedback for {result.student}; see {result.log}")
            if len(pages) == 1:
                target = self.feedback_dir / f"{result.student}.html"
                shutil.copyfile(pages[0], target)
            else:
                target = self.feedback_dir / result.student
                if target.exists():
                    shutil.rmtree(target)
                shutil.copytree(feedback, target)
            result.feedback = str(target)
            return
        result.status = report["status"]
        result.score = 0.0
        result.detail = report.get("detail", "")

    def _delete_topics(self, prefix: str) -> None:
        try:
            from .kafka import delete_topic, list_topics

            for topic in list_topics():
                if topic.startswith(prefix):
                    delete_topic(topic)
        except Exception:  # cleaning up is best effort: the broker may be gone, the topics too
            pass

    # -- all students
    def run(self, submissions: list[Submission]) -> list[Result]:
        total = len(submissions)
        results: dict[str, Result] = {}
        lock = threading.Lock()
        counter = iter(range(1, total + 1))

        def one(submission: Submission) -> None:
            result, skipped = self.grade_one(submission)
            with lock:
                results[submission.student] = result
                number = next(counter)
                write_csv(self.out / "grades.csv", list(results.values()))
            state = "skipped (already graded; --force grades again)" if skipped else f"{result.seconds:.0f} s"
            detail = f" - {result.detail}" if result.detail and result.status != GRADED else ""
            self.say(f"[{number}/{total}] {submission.student}: {result.status}, "
                     f"{_fmt(result.score)}/{_fmt(result.max_score)} ({state}){detail}")

        pool = ThreadPoolExecutor(max_workers=self.jobs)
        futures = []
        try:
            futures = [pool.submit(one, s) for s in submissions]
            for future in futures:
                future.result()
        except KeyboardInterrupt:
            # Submissions run in their own sessions, out of reach of Ctrl-C: stop them here.
            for future in futures:
                future.cancel()
            for proc in _tagged_processes(self.run_tag + "-", prefix=True):
                try:
                    proc.kill()
                except Exception:  # already gone
                    pass
            raise
        finally:
            pool.shutdown(wait=True)
        ordered = [results[s.student] for s in submissions]
        write_csv(self.out / "grades.csv", ordered)
        return ordered


# ----------------------------------------------------------------------------- the worker

def _cell_seconds(cell) -> float | None:
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not start or not end:
        return None
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def _worker(args) -> int:
    """Runs in the child process: nbgrader autograde + generate_feedback for one student."""
    import logging

    import nbformat
    from nbgrader.api import Gradebook
    from nbgrader.converters import Autograde, GenerateFeedback

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="[%(levelname)s] %(message)s")
    course, lab, student = Path(args.course), args.lab, args.student
    config = nbgrader_config(course, cell_timeout=args.cell_timeout)
    report: dict = {"status": ERROR, "score": None, "max_score": None, "detail": ""}
    started, started_at = time.monotonic(), datetime.now(timezone.utc)
    autograded = _run_converter(Autograde, config, assignment=lab, student=student,
                                force=True, create_student=True)
    report["autograde_seconds"] = round(time.monotonic() - started, 1)
    text = autograded["log"] + autograded.get("error", "")
    if not autograded["success"]:
        sys.stderr.write(autograded.get("error", ""))
        if "DeadKernelError" in text or "Kernel died" in text:
            report["status"] = CRASHED
            report["detail"] = "the notebook's kernel died while it ran"
        elif "CellTimeoutError" in text or "UnresponsiveKernelError" in text:
            report["status"] = TIMED_OUT
            report["detail"] = (f"a cell was still running after {config.Execute.timeout} s and did not "
                                f"stop when interrupted")
        elif "ValidationError" in text or "SchemaTooNew" in text or "SchemaTooOld" in text:
            report["status"] = INVALID
            report["detail"] = "nbgrader rejected the notebook's cell metadata"
        else:
            report["detail"] = "nbgrader autograde failed; see the log"
        Path(args.report).write_text(json.dumps(report))
        return 0

    notebooks = sorted((course / "autograded" / student / lab).glob("*.ipynb"))
    timeouts, code_cells = [], []
    for path in notebooks:
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            code_cells.append(cell)
            if any(o.get("ename") == "CellTimeoutError" for o in cell.get("outputs", [])):
                timeouts.append(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                                or f"cell {len(code_cells)}")
    durations = [_cell_seconds(c) for c in code_cells]
    if durations and durations[0] is not None:
        # start-up = kernel start + the first code cell (it starts Spark); work = every other cell
        first = code_cells[0]["metadata"]["execution"]["iopub.execute_input"]
        kernel_ready = datetime.fromisoformat(first.replace("Z", "+00:00"))
        report["startup_seconds"] = round((kernel_ready - started_at).total_seconds() + durations[0], 1)
        report["work_seconds"] = round(sum(d for d in durations[1:] if d), 1)

    feedback = _run_converter(GenerateFeedback, config, assignment=lab, student=student, force=True)
    if not feedback["success"]:
        sys.stderr.write(feedback.get("error", ""))
        report["detail"] = "nbgrader generate_feedback failed; see the log"
        Path(args.report).write_text(json.dumps(report))
        return 0

    with Gradebook(config.CourseDirectory.db_url) as gradebook:
        submission = gradebook.find_submission(lab, student)
        report["score"], report["max_score"] = float(submission.score), float(submission.max_score)
        report["cells"] = [{"notebook": nb.name, "grade_id": grade.name, "score": grade.score,
                            "max_score": grade.max_score}
                           for nb in submission.notebooks for grade in nb.grades]
    if timeouts:
        report["status"] = TIMED_OUT
        report["detail"] = (f"stopped after {config.Execute.timeout} s in: {', '.join(timeouts)} "
                            f"(other cells graded)")
    else:
        report["status"] = GRADED
    Path(args.report).write_text(json.dumps(report))
    return 0


# ----------------------------------------------------------------------------- commands

def cmd_grade(args) -> int:
    try:
        lab = resolve_lab(args.lab)
        submissions = find_submissions(Path(args.submissions), lab)
        out = Path(args.out or Path("grades") / lab)
        if not submissions:
            print(f"No submissions found in {args.submissions} (expected <student>.ipynb files or "
                  f"<student>/{lab}/ folders).")
            return 1
        grader = Grader(lab, out, timeout_s=args.timeout, cell_timeout_s=args.cell_timeout,
                        force=args.force, jobs=args.jobs)
        print(f"Grading {len(submissions)} submission(s) of {lab} into {grader.out} "
              f"(limits: {args.timeout:g} s per submission"
              + (f", {args.cell_timeout:g} s per cell" if args.cell_timeout else "") + ")", flush=True)
        started = time.monotonic()
        grader.prepare()
        results = grader.run(submissions)
    except GradingError as err:
        print(f"streamlab grade: {err}", file=sys.stderr)
        return 2
    counts = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    print(f"Done in {time.monotonic() - started:.0f} s: {summary}.")
    print(f"Grades: {grader.out / 'grades.csv'}   Feedback: {grader.feedback_dir}/")
    failed = [r for r in results if r.status == ERROR]
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


def add_grade_command(sub) -> None:
    grade = sub.add_parser(
        "grade", help="grade students' lab notebooks with nbgrader -> grades.csv and feedback",
        description="Grade every submission of LAB in SUBMISSIONS, each in its own process, kernel and "
                    "Spark, with time limits; write OUT/grades.csv and OUT/feedback/<student>.html. "
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
    grade.set_defaults(func=cmd_grade)

    release = sub.add_parser("release-labs", help="generate the student labs in labs/ from solutions/",
                             description="Run nbgrader generate_assignment on solutions/<lab>/ and put "
                                         "the student version in labs/<lab>/.")
    release.add_argument("labs", nargs="*", metavar="LAB", help="labs to release (default: all)")
    release.add_argument("--out", help="release into this folder instead of labs/")
    release.set_defaults(func=cmd_release_labs)


def _worker_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamlab.grading")
    sub = parser.add_subparsers(dest="command", required=True)
    worker = sub.add_parser("_worker")
    worker.add_argument("lab")
    worker.add_argument("student")
    worker.add_argument("--course", required=True)
    worker.add_argument("--report", required=True)
    worker.add_argument("--cell-timeout", type=float, default=None)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return _worker(args)


if __name__ == "__main__":
    sys.exit(_worker_main())
