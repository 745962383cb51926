"""Grading a folder of submissions: each in its own sandbox, kernel and time limit; a result for each.

The submitted files are never touched: each is copied into a private nbgrader course folder
(``OUT/course/<student>/``, a copy of the lab's template with its gradebook, deleted once the feedback
is out), and a warm worker process (``warm``: one per ``--jobs`` slot, serving students in turn) runs
nbgrader there, outside the sandbox; the student's kernel runs inside one (``sandbox``), with a work
folder ``OUT/work/<student>-*`` and a wall-clock limit: when it runs out, the worker and everything
the submission started are killed.

    OUT/grades.csv                  one row per student (see ``results``)
    OUT/summary.html                the class at a glance: scores, statuses, pass rate per test (``summary``)
    OUT/feedback/<student>.html     nbgrader's feedback, or a page saying why there is none
    OUT/results/<student>.json      the full Result: a submission already graded is skipped next time
    OUT/logs/<student>.log          what the worker logged while grading the student, and the end of what the
                                    student's kernel and the hidden checks wrote to their own output files
    OUT/grader/worker<N>.log        the warm workers' own output: the grader's only, in a folder no student's
                                    id names (a student called ``worker1`` has logs/worker1.log, never this)
    OUT/run.json                    what this run was: lab, shard, versions, settings, machine (``runinfo``)

A kernel's stdout and stderr (its JVM's logs, whatever the student's code writes to file descriptors 1 and 2) go
to a file in the submission's own work folder, within the sandbox's disk limit (``box.kernel_output``): a flood of
it is that submission's disk limit, never a full log that the next student's kernel dies writing to.
"""
from __future__ import annotations

import os
import queue
import re
import secrets
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

from ...stack.kafka import bootstrap_servers
from .. import bounds
from ..labs import GradingError, solutions_dir
from ..outputs.feedback import inert_feedback_pages, make_inert, status_page
from ..outputs.languages import language_of_bytes
from ..outputs.results import Result, Status, WorkerReport, format_points, write_csv
from ..outputs.summary import write_summary
from ..sandbox.box import unavailable_reason
from ..sandbox.isolation import broker_problem, delete_prefixed, kill_tagged, submission_environment
from ..sandbox.limits import Limits, remove_control_groups, unmount
from ..sandbox.tenancy import sandbox_servers
from ..workers.context import SubmissionContext
from ..workers.hidden import checks_file, checks_work, file_sha256
from ..workers.warm import WarmWorker
from .course import course_for, make_chinese_template, make_template
from .progress import Progress
from .runinfo import RunRecord, folder_digest, grader_version, grading_settings, lab_fingerprint, now
from .shards import WHOLE, Shard, shard_key
from .submissions import Submission, SubmissionRefused, check_notebook_bytes, read_submitted_file

DEFAULT_LIMITS = Limits()


class Grader:
    """One lab's grader, built whole: the constructor does, once, everything each submission's grading needs (the
    sandbox's check, the lab's template and fingerprint, its hidden checks and their hash, the broker and the
    sandbox's listener, the output folders); ``grade`` grades one submission into one ``Result`` that holds the
    worker's report; ``run`` grades a folder's shard of them with ``jobs`` warm workers and writes the run's files.

    ``source``: the folder the lab's template is made from, ``solutions/<lab>/`` (the grader's) or a released lab or
    a notebook's own folder (``streamlab check``); ``hidden_checks``: run the lab's ``hidden_checks.py`` after the
    notebook. ``limits=None`` grades without the sandbox. ``progress``: each kernel saves the notebook after every
    cell in ``OUT/progress/<student>.ipynb`` (the self-check reads it); ``keep``: a submission's data folder and
    topics are left after it (``kept``, for benchmarks). ``bootstrap``: the Kafka to use, found when not given.
    """

    def __init__(self, lab: str, out: Path, *, source: Path | None = None, hidden_checks: bool = True,
                 timeout_s: float = bounds.SUBMISSION_TIMEOUT_S, cell_timeout_s: float | None = None,
                 force: bool = False, jobs: int = 1, run_tag: str | None = None, stream=None,
                 limits: Limits | None = DEFAULT_LIMITS, shard: Shard = WHOLE, roster=None,
                 bootstrap: str | None = None, progress: bool = False, keep: bool = False):
        self.lab = lab
        self.shard = shard
        self.roster = roster  # roster.Matched: its columns in grades.csv, its gaps on the summary page
        self.limits = limits  # the sandbox's; None: --no-sandbox (each submission runs with the grader's own powers)
        self.out = Path(out).resolve()
        self.timeout_s = timeout_s
        self.cell_timeout_s = cell_timeout_s
        self.force = force
        self.jobs = max(1, jobs)
        self.progress_notebooks = progress
        self.keep = keep
        self.kept: dict[str, dict[str, str]] = {}  # keep=True: {student: {"data_dir", "topic_prefix"}}
        # Every process of this run carries "<run tag>-<student>" in STREAMLAB_GRADE_TAG; the tests
        # choose the run tag (STREAMLAB_GRADE_RUN_TAG) to check that none is left behind.
        self.run_tag = run_tag or os.environ.get("STREAMLAB_GRADE_RUN_TAG") or f"grade-{secrets.token_hex(4)}"
        self.stream = stream or sys.stdout
        self._print_lock = threading.Lock()
        self.template = self.out / "course" / ".template"
        self.results_dir = self.out / "results"
        self.feedback_dir = self.out / "feedback"
        self.logs_dir = self.out / "logs"
        self.grader_dir = self.out / "grader"  # the grader's own files: no student's id names one
        self.progress: Progress | None = None
        self._fresh_seconds: list[float] = []   # how long each submission graded in this run took
        self._workers: queue.Queue[WarmWorker] | None = None
        if limits is not None:
            reason = unavailable_reason()
            if reason:
                raise GradingError(f"cannot make the grading sandbox on this machine: {reason}. Grading "
                                   f"without it (--no-sandbox) runs every submission with your own powers: "
                                   f"do that only for code you trust")
        for folder in (self.results_dir, self.feedback_dir, self.logs_dir, self.grader_dir):
            folder.mkdir(parents=True, exist_ok=True)
        self.source = Path(source) if source is not None else solutions_dir() / lab
        self.grader = grader_version()  # a result graded by other code is graded again
        self.solution_sha256, _ = lab_fingerprint(self.source)
        # The lab's hidden checks run in each worker; its hash makes a rewritten file refuse to run.
        self.checks = checks_file(solutions_dir(), lab) if hidden_checks else None
        self.checks_sha256 = file_sha256(self.checks) if self.checks else None
        self.max_score = make_template(self.template, lab, self.source)
        self._templates = {"en": self.template}  # by the notebook's language; the Chinese made on first use
        self._templates_lock = threading.Lock()
        self.bootstrap = bootstrap or bootstrap_servers()  # resolved once: every kernel uses this Kafka
        # the broker's SANDBOX listener: each sandbox's Kafka connections are then a principal's of its own
        self.sandbox_listener = sandbox_servers(self.bootstrap) if limits is not None else None
        if limits is not None:
            self.say(f"Kafka: each submission's own topics only, enforced by Kafka's ACLs ({self.sandbox_listener})"
                     if self.sandbox_listener else
                     f"Kafka: the broker at {self.bootstrap} advertises no SANDBOX listener that answers from here "
                     f"(streamlab's brokers have one; name another Kafka's in STREAMLAB_KAFKA_SANDBOX_SERVERS), so "
                     f"submissions are kept apart by topic prefix only, not by Kafka")

    def say(self, text: str) -> None:
        with self._print_lock:
            print(text, file=self.stream, flush=True)

    # -- one student
    def graded_before(self, submission: Submission) -> Result | None:
        """The result an earlier run wrote for these very bytes with this lab, grader and sandbox, if it is final
        and its feedback is there (``force``: never)."""
        path = self.results_dir / f"{submission.student}.json"
        if self.force or not path.exists():
            return None
        try:
            previous = Result.from_json(path.read_text())
        except Exception as err:  # noqa: BLE001 - a damaged or foreign file: graded again
            self.say(f"{submission.student}: {path} is not a result this grader wrote "
                     f"({type(err).__name__}); grading again")
            return None
        if (previous.sha256 == submission.sha256() and previous.solution_sha256 == self.solution_sha256
                and previous.grader == self.grader and previous.sandboxed == (self.limits is not None)
                and previous.status.is_final and Path(previous.feedback).exists()):
            return previous
        return None

    def grade(self, submission: Submission) -> Result:
        """Grade one submission: read it, make its course, run it in its box, clean up; its result is written to
        ``OUT/results/<student>.json`` and holds the worker's report."""
        started = time.monotonic()
        result = Result(student=submission.student, status=Status.ERROR, max_score=self.max_score,
                        file=str(submission.origin), sha256=submission.sha256(),
                        solution_sha256=self.solution_sha256, grader=self.grader,
                        log=str(self.logs_dir / f"{submission.student}.log"),
                        graded_at=datetime.now().isoformat(timespec="seconds"), sandboxed=self.limits is not None)
        language = "en"  # of its words: the notebook's, once read
        try:
            problems, contents = ([submission.refused], {}) if submission.refused else self._read(submission)
            language = next((language_of_bytes(data) for data in contents.values()), "en")
            course = None
            if not problems:
                try:  # the grader's own copy of the bytes it checked
                    course = course_for(self.template_for(language), self.out / "course" / submission.student,
                                        lab=self.lab,
                                        student=submission.student, contents=contents, extra=submission.extra)
                except SubmissionRefused as refusal:
                    problems = [str(refusal)]
            if problems:
                result.status, result.detail = Status.INVALID, "; ".join(problems)
                Path(result.log).write_text(result.detail + "\n")
            else:
                self._autograde(submission, result, course, language)
        except Exception as err:  # the grader's own failure: reported, and the run goes on
            result.status, result.detail = Status.ERROR, f"{type(err).__name__}: {err}"
        result.seconds = round(time.monotonic() - started, 1)
        if not result.feedback:  # nbgrader wrote none: say what happened instead
            page = self.feedback_dir / f"{submission.student}.html"
            page.write_text(status_page(result, self.lab, language), encoding="utf-8")
            result.feedback = str(page)
        (self.results_dir / f"{submission.student}.json").write_text(result.to_json())
        return result

    def template_for(self, language: str) -> Path:
        """The lab's template for a notebook in ``language``: English, or the Chinese one (made once, on first use;
        English when the lab has no translation). The two differ only in their markdown."""
        with self._templates_lock:
            if language not in self._templates:
                chinese = self.out / "course" / f".template-{language}"
                made = language == "zh" and make_chinese_template(chinese, self.lab, self.source)
                self._templates[language] = chinese if made else self.template
            return self._templates[language]

    def progress_notebook(self, student: str) -> Path:
        """Where the kernel saves ``student``'s notebook after every cell (``progress=True``)."""
        return self.out / "progress" / f"{student}.ipynb"

    def _read(self, submission: Submission) -> tuple[list[str], dict[str, bytes]]:
        """Each submitted notebook read once (bounded, never through a link) and checked against the lab's source
        notebook: (why not, for each that fails; {notebook name: its bytes} for the others)."""
        problems, contents = [], {}
        for name, path in submission.files.items():
            try:
                data = read_submitted_file(path)
            except SubmissionRefused as refusal:
                problems.append(str(refusal))
                continue
            problem = check_notebook_bytes(data, path.name, source=self.source / f"{name}.ipynb")
            if problem:
                problems.append(problem)
            contents[name] = data
        return problems, contents

    def _autograde(self, submission: Submission, result: Result, course: Path, language: str = "en") -> None:
        student, lab = submission.student, self.lab
        tag = f"{self.run_tag}-{student}"
        # not under /tmp: the sandbox's own /tmp is a folder inside it; named by a slug of the id (paths
        # with spaces and such are the student's id's business, not Spark's)
        (self.out / "work").mkdir(exist_ok=True)
        slug = re.sub(r"[^A-Za-z0-9_.@+-]", "_", student)[:40]
        workdir = Path(tempfile.mkdtemp(prefix=f"{slug}-", dir=self.out / "work"))
        progress = None
        if self.progress_notebooks:
            progress = self.progress_notebook(student)
            progress.parent.mkdir(exist_ok=True)
        context = SubmissionContext(lab=lab, student=student, course=str(course), log=result.log,
                                    env=submission_environment(tag, bootstrap=self.bootstrap, workdir=workdir),
                                    cell_timeout=self.cell_timeout_s,
                                    limits=asdict(self.limits) if self.limits is not None else None,
                                    sandbox_listener=self.sandbox_listener,
                                    progress=str(progress) if progress else None, language=language)
        Path(result.log).write_text("")
        worker = self._worker_pool().get()
        try:
            report, killed = worker.report(context, timeout_s=self.timeout_s)
            broken = broker_problem(self.bootstrap)  # the grader's own probe, never words the submission wrote
            if broken:
                report = WorkerReport.no_result(
                    Status.ERROR, f"the Kafka broker stopped answering while this submission was graded ({broken}): "
                                  f"not the student's doing; it is graded again by the next run", usage=report.usage)
            result.take(report)
            if report.scored:
                result.feedback = str(self._keep_feedback(course, result))
                if killed and result.status == Status.GRADED:
                    result.detail = (result.detail + "; " if result.detail else "") + \
                        f"{killed} process(es) left running were stopped"
        finally:
            self._workers.put(worker)
            if self.keep:
                self.kept[student] = {"data_dir": context.env["STREAMLAB_DATA_DIR"],
                                      "topic_prefix": context.topic_prefix}
            else:
                delete_prefixed(context.topic_prefix)
                for folder in (workdir, checks_work(workdir / "data")):  # the submission's, the hidden checks'
                    remove_control_groups(folder)  # the worker removes them; a worker that was killed could not
                    unmount(folder)
                    shutil.rmtree(folder, ignore_errors=True)
            shutil.rmtree(course, ignore_errors=True)  # its feedback was copied out

    def _worker_pool(self) -> queue.Queue[WarmWorker]:
        """One warm worker per job slot (see ``warm``), made when the first submission needs one."""
        with self._print_lock:
            if self._workers is None:
                self._start_workers()
        return self._workers

    def _start_workers(self) -> None:
        self._workers = queue.Queue()
        for number in range(1, self.jobs + 1):
            tag = f"{self.run_tag}-worker{number}"
            workdir = Path(tempfile.mkdtemp(prefix=f"streamlab-grade-worker{number}-"))
            env = submission_environment(tag, bootstrap=self.bootstrap, workdir=workdir)
            self._workers.put(WarmWorker(tag, env=env, cwd=workdir, log_path=self.grader_dir / f"worker{number}.log",
                                         checks=self.checks, checks_sha256=self.checks_sha256,
                                         memory_mb=bounds.WORKER_MEMORY_MB if self.limits is not None else None))

    def close(self) -> None:
        """Stop the warm workers (``run`` does, when it ends; a caller of ``grade`` does, when done)."""
        if self._workers is None:
            return
        while not self._workers.empty():
            worker = self._workers.get()
            worker.close()
            shutil.rmtree(worker.cwd, ignore_errors=True)  # the worker's own data and Spark folders
        self._workers = None

    def _keep_feedback(self, course: Path, result: Result) -> Path:
        """Copy nbgrader's feedback out of the course folder: one page, or a folder of them."""
        feedback = course / "feedback" / result.student / self.lab
        pages = sorted(feedback.glob("*.html"))
        if not pages:
            raise GradingError(f"nbgrader wrote no feedback for {result.student}; see {result.log}")
        # made inert again here: this process does not trust what the worker (where the student's code ran) wrote
        if len(pages) == 1:
            target = self.feedback_dir / f"{result.student}.html"
            target.write_text(make_inert(pages[0].read_text(encoding="utf-8", errors="replace")), encoding="utf-8")
        else:
            target = self.feedback_dir / result.student
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(feedback, target)
            inert_feedback_pages(target)
        return target

    # -- all students
    def _new_record(self, folder: list[Submission], submissions: list[Submission]) -> RunRecord:
        """The run record (OUT/run.json) of grading ``submissions``, this run's shard of ``folder``."""
        settings = grading_settings(sandbox=asdict(self.limits) if self.limits is not None else None,
                                    timeout_s=self.timeout_s, cell_timeout_s=self.cell_timeout_s)
        return RunRecord(lab=self.lab, shard=str(self.shard), students={s.student: shard_key(s) for s in submissions},
                         folder_total=len(folder), folder_sha256=folder_digest([shard_key(s) for s in folder]),
                         solution_sha256=self.solution_sha256, checks_sha256=self.checks_sha256, grader=self.grader,
                         settings=settings)

    def run(self, submissions: list[Submission], *, folder: list[Submission] | None = None) -> list[Result]:
        """Grade ``submissions`` (this run's shard of ``folder``, the whole of it by default), ``jobs`` at a time;
        a submission graded before (``graded_before``) is skipped. Writes grades.csv, run.json and summary.html."""
        total = len(submissions)
        results: dict[str, Result] = {}
        lock = threading.Lock()
        counter = iter(range(1, total + 1))
        record = self._new_record(submissions if folder is None else folder, submissions)
        record.write(self.out)  # not finished yet: a merge refuses this output until the run ends
        self.progress = Progress(total, "progress" if self.shard == WHOLE else f"shard {self.shard}")

        def one(submission: Submission) -> None:
            previous = self.graded_before(submission)
            result = previous or self.grade(submission)
            skipped = previous is not None
            with lock:
                results[submission.student] = result
                number = next(counter)
                write_csv(self.out / "grades.csv", list(results.values()))
                record.graded += 0 if skipped else 1
                record.skipped += 1 if skipped else 0
                if not skipped:
                    self._fresh_seconds.append(result.seconds)
                progress = self.progress.step(skipped)
            state = "skipped (already graded; --force grades again)" if skipped else f"{result.seconds:.0f} s"
            detail = f" - {result.detail}" if result.detail and result.status != Status.GRADED else ""
            self.say(f"[{number}/{total}] {submission.student}: {result.status}, "
                     f"{format_points(result.score)}/{format_points(result.max_score)} ({state}){detail}\n"
                     f"  {progress}")

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
            kill_tagged(self.run_tag + "-")
            raise
        finally:
            pool.shutdown(wait=True)
            self.close()
        ordered = [results[s.student] for s in submissions]
        write_csv(self.out / "grades.csv", ordered, roster=self.roster)
        record.finished_at = now()
        record.wall_seconds = round(self.progress.clock() - self.progress.started, 1)
        record.write(self.out)
        # OUT/summary.html, for the instructor
        write_summary(self.out, self.lab, [r.student for r in ordered], runs=[record], roster=self.roster)
        return ordered

    def final_line(self, results: list[Result]) -> str:
        """The run's last line: wall time, time per submission, statuses."""
        return self.progress.final(self._fresh_seconds, [r.status_text for r in results], self.jobs)
