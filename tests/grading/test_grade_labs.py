"""Grade the grader: `streamlab grade` on real submissions (marker `labs`).

**Every lab** gets one grader run over the submissions that show its grades are earned (built from
its notebooks and ``tests/submissions/<lab>/``):

    e_reference         the reference answers -> full marks
    f_blank             the released notebook as students get it -> 0
    d_alternative_...   a correct solution written differently (alternative.py), its functions returning numpy
                        numbers and booleans where the reference returns Python ones -> full marks
    k_partial           some parts solved (partial.py) -> its EXPECTED_SCORE
    l_fake              solves nothing, fakes every result from inside the kernel (fake.py) -> 0
    n_rewired           where a lab has one (rewired.py): a wrong answer made to look right by changing the
                        lab's own input from inside the kernel -> 0
    c_swollen           where a lab has one (swollen.py): the reference answers, then a checkpoint swollen
                        past what a check copies -> that part's points lost, with why; nothing else changes
    e_reference_zh,     lab 05 (CHINESE_LAB) in Chinese: the reference answers in zh/labs/'s notebook, and that
    f_blank_zh          notebook blank -> full marks and 0, each cell and hidden check as its English twin

**Lab 01** also carries every kind of submission the grader must survive (the robustness run):

    a_hang              the reference answers, plus cells that wait on an endless streaming query,
                        each within the per-cell limit, all together longer than the whole-submission
                        limit -> stopped at that limit (kernel and JVM killed)
    b_stuck             a cell that ignores interrupts and loops forever -> nbgrader gives up on it
    c_crash             kills its own kernel (SIGKILL) right after Spark started
    d_alternative_leaky the alternative solution, leaving a streaming query and a detached process running
    g_tampered          the blank notebook with every test cell edited to pass (and worth 100 points)
    h_slow_cell         the reference answers, with awaitTermination() (no timeout) of an endless query
                        on top of the last answer cell -> the per-cell limit interrupts it, the other
                        parts still count
    i_not_json          a file that is not JSON
    j_not_a_notebook    JSON, but not a notebook

Then the assertions are about real outcomes: scores, statuses, files, feedback without the answer
key, submitted files byte-identical, no process (kernel, JVM, anything) left behind, no topics left.
"""
from __future__ import annotations

import csv
import hashlib
import html
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from streamlab import grading
from streamlab.grading.sandbox.isolation import TAG
from streamlab.lessons import mistakes
from streamlab.stack import translations

ROOT = Path(__file__).resolve().parents[2]
LABS = grading.find_labs()
SUBMISSIONS_DIR = ROOT / "tests" / "submissions"
ROBUSTNESS_LAB = LABS[0]  # lab01: the one the robustness submissions are built from
CHINESE_LAB = "lab05_offset_replay"  # also graded in Chinese: its reference and its blank as zh/labs/ gives them
TIMEOUT_S = 420       # per submission in the robustness run: the hanging one costs this much; the slow
                      # one needs its 120-s stuck cell + the lab (~80 s idle, 200+ s on a loaded machine)
CELL_TIMEOUT_S = 120  # per cell: well above a Spark start (~10 s idle, 60 s on a loaded 2-core machine)
JOBS = 3      # the hanging submissions mostly wait: let them overlap with the others
LAB_TIMEOUT_S, LAB_CELL_TIMEOUT_S, LAB_JOBS = 900, 300, 2   # the other labs: only real work to do

pytestmark = [pytest.mark.labs, pytest.mark.timeout(1200)]


# ----------------------------------------------------------------------------- building submissions

def _notebook_name(lab: str) -> str:
    names = grading.lab_notebooks(lab)
    assert len(names) == 1, f"{lab}: these tests expect one notebook per lab, found {names}"
    return names[0]


def _released(lab: str):
    return grading.released_notebook(lab, _notebook_name(lab))


def _reference(lab: str):
    """The released notebook with the reference answers typed into its answer cells."""
    return grading.reference_notebook(lab, _notebook_name(lab))


def _alternative(lab: str):
    path = SUBMISSIONS_DIR / lab / "alternative.py"
    assert path.exists(), (f"{lab} needs an alternative correct solution in {path.relative_to(ROOT)} "
                           f"(ANSWERS = {{grade_id: code}}), written differently from the reference")
    spec = importlib.util.spec_from_file_location(f"alternative_{lab}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    nb = _released(lab)
    cells = grading.answer_cells(nb)
    missing = {c.metadata.nbgrader.grade_id for c in cells} - set(module.ANSWERS)
    assert not missing, f"{path.name} has no answer for {sorted(missing)}"
    for cell in cells:
        cell.source = module.ANSWERS[cell.metadata.nbgrader.grade_id].strip("\n")
    return nb


def _first_code_index(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")


def _student_cell(source: str):
    return nbformat.v4.new_code_cell(source.strip("\n"))


HANG_WAIT_S = CELL_TIMEOUT_S - 20
# The endless queries below fire a micro-batch every few seconds, not back to back: a hang costs the grader
# its time limit, without also taking a core from the work the suite runs beside it.
IDLE_TRIGGER = 'trigger(processingTime="5 seconds")'
HANG_START = f'''
endless = spark.readStream.format("rate").load().writeStream.format("noop").{IDLE_TRIGGER}.start()
'''
HANG_WAIT = f'''
endless.awaitTermination({HANG_WAIT_S})  # each wait is within the per-cell limit; together they are not
'''
STUCK = '''
import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # the grader's interrupt no longer stops this kernel
while True:
    time.sleep(1)
'''
CRASH = '''
import os, signal
os.kill(os.getpid(), signal.SIGKILL)
'''
LEAK = f'''
import subprocess
left_running = spark.readStream.format("rate").load().writeStream.format("noop").{IDLE_TRIGGER}.start()
detached = subprocess.Popen(["sleep", "900"], start_new_session=True)  # outlives the kernel unless the grader kills it
'''
LOOP = f'''
stuck = spark.readStream.format("rate").load().writeStream.format("noop").{IDLE_TRIGGER}.start()
stuck.awaitTermination()  # no timeout: the per-cell limit interrupts it
'''


def _variant(lab: str, name: str):
    """tests/submissions/<lab>/<name>.py as a module (ANSWERS, maybe EXPECTED_SCORE)."""
    path = SUBMISSIONS_DIR / lab / f"{name}.py"
    assert path.exists(), f"{lab} needs {path.relative_to(ROOT)} (ANSWERS = {{grade_id: code}})"
    spec = importlib.util.spec_from_file_location(f"{name}_{lab}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _answered(lab: str, answers: dict):
    """The released notebook with ``answers`` typed into their answer cells (others left blank)."""
    nb = _released(lab)
    for cell in grading.answer_cells(nb):
        if cell.metadata.nbgrader.grade_id in answers:
            cell.source = answers[cell.metadata.nbgrader.grade_id].strip("\n")
    return nb


# Appended to each answer cell of the alternative that defines functions: every number, boolean and key they
# return comes back as numpy's (np.int64(8), not 8), as a learner's pandas code hands them back
# (`files["version"].max()`, `files["partition"].nunique()`, a groupby's keys).
AS_NUMPY = """

def _as_numpy(function):
    import functools
    import numpy as np

    def convert(value):
        if isinstance(value, bool):
            return np.bool_(value)
        if isinstance(value, int):
            return np.int64(value)
        if isinstance(value, float):
            return np.float64(value)
        if isinstance(value, dict):
            return {convert(k): convert(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(convert(v) for v in value)
        return value

    @functools.wraps(function)
    def wrapped(*args, **kwargs):
        return convert(function(*args, **kwargs))
    return wrapped
"""


def _numpy_alternative(lab: str):
    """The alternative solution, its functions returning numpy numbers and booleans (issue: a correct answer
    computed with pandas lost points when its numbers reached the grader as text). One submission shows both: an
    answer written differently, and answers as numpy values, get full marks (the reference shows Python values)."""
    nb = _alternative(lab)
    for cell in grading.answer_cells(nb):
        names = re.findall(r"^def (\w+)\(", cell.source, flags=re.M)
        if names:
            cell.source += AS_NUMPY + "".join(f"{name} = _as_numpy({name})\n" for name in names)
    return nb


def _forgers(lab: str) -> list[str]:
    """The submissions of ``lab`` that must get nothing for what they forged: the fake, and a rewired input."""
    return ["l_fake"] + (["n_rewired"] if (SUBMISSIONS_DIR / lab / "rewired.py").exists() else [])


def build_outcome_submissions(lab: str) -> dict:
    """The five submissions every lab is graded on, and its rewired and swollen ones where it has them."""
    notebooks = {"e_reference": _reference(lab), "f_blank": _released(lab), "d_alternative": _numpy_alternative(lab),
                 "k_partial": _answered(lab, _variant(lab, "partial").ANSWERS),
                 "l_fake": _answered(lab, _variant(lab, "fake").ANSWERS)}
    if "n_rewired" in _forgers(lab):
        notebooks["n_rewired"] = _answered(lab, _variant(lab, "rewired").ANSWERS)
    if (SUBMISSIONS_DIR / lab / "swollen.py").exists():
        notebooks["c_swollen"] = _reference(lab)
        notebooks["c_swollen"].cells.append(_student_cell(_variant(lab, "swollen").APPEND))
    if lab == CHINESE_LAB:
        name = _notebook_name(lab)
        notebooks["f_blank_zh"] = nbformat.read(ROOT / "zh" / "labs" / lab / f"{name}.ipynb", as_version=4)
        in_chinese = translations.in_chinese(json.loads(nbformat.writes(_reference(lab))),
                                             ROOT / "solutions" / lab / f"{name}.ipynb")
        notebooks["e_reference_zh"] = nbformat.from_dict(in_chinese)
    return notebooks


def build_submissions(lab: str, folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    notebooks = build_outcome_submissions(lab)
    if lab != ROBUSTNESS_LAB:
        paths = {}
        for name, nb in notebooks.items():
            paths[name] = folder / f"{name}.ipynb"
            nbformat.write(nb, paths[name])
        return paths
    del notebooks["d_alternative"]  # the robustness run's alternative is the leaky one

    nb = _reference(lab)
    waits = [_student_cell(HANG_START)] + [_student_cell(HANG_WAIT) for _ in range(TIMEOUT_S // HANG_WAIT_S + 1)]
    nb.cells[_first_code_index(nb) + 1:_first_code_index(nb) + 1] = waits
    notebooks["a_hang"] = nb

    nb = _reference(lab)
    nb.cells.insert(_first_code_index(nb) + 1, _student_cell(STUCK))
    notebooks["b_stuck"] = nb

    nb = _reference(lab)
    nb.cells.insert(_first_code_index(nb) + 1, _student_cell(CRASH))
    notebooks["c_crash"] = nb

    nb = _numpy_alternative(lab)
    nb.cells.append(_student_cell(LEAK))
    notebooks["d_alternative_leaky"] = nb

    notebooks["e_reference"] = _reference(lab)
    notebooks["f_blank"] = _released(lab)

    nb = _released(lab)
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and cell.cell_type == "code":
            cell.source = "print('all tests pass')"
            meta["points"] = 100
    notebooks["g_tampered"] = nb

    nb = _reference(lab)
    last = grading.answer_cells(nb)[-1]
    last.source = LOOP.strip("\n") + "\n\n" + last.source
    notebooks["h_slow_cell"] = nb

    paths = {}
    for name, nb in notebooks.items():
        paths[name] = folder / f"{name}.ipynb"
        nbformat.write(nb, paths[name])
    paths["i_not_json"] = folder / "i_not_json.ipynb"
    paths["i_not_json"].write_text("{ this is not JSON, just a broken download\n")
    paths["j_not_a_notebook"] = folder / "j_not_a_notebook.ipynb"
    paths["j_not_a_notebook"].write_text(json.dumps({"student": "i", "answer": 42}))
    return paths


# ----------------------------------------------------------------------------- running the grader

def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


class ProcessWatch:
    """Samples, while the grader runs, which processes carry this run's grading tag."""

    def __init__(self, tag: str):
        self.tag, self.names, self._stop = tag, set(), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        import psutil

        while not self._stop.wait(2):
            for proc in psutil.process_iter(["name"]):
                try:
                    if proc.environ().get(TAG, "").startswith(self.tag):
                        self.names.add(proc.info["name"])
                except (psutil.Error, OSError):
                    continue

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def run_grade(lab: str, submissions: Path, out: Path, tag: str,
              *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, STREAMLAB_GRADE_RUN_TAG=tag)
    if lab == ROBUSTNESS_LAB:
        limits = (TIMEOUT_S, CELL_TIMEOUT_S, JOBS)
    else:
        limits = (LAB_TIMEOUT_S, LAB_CELL_TIMEOUT_S, LAB_JOBS)
    command = [sys.executable, "-m", "streamlab", "grade", lab, str(submissions), "--out", str(out),
               "--timeout", str(limits[0]), "--cell-timeout", str(limits[1]), "--jobs", str(limits[2]), *extra]
    started = time.monotonic()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1700, cwd=ROOT)
    return proc, time.monotonic() - started


_RUNS: dict[str, dict] = {}


@pytest.fixture(scope="module", params=LABS)
def graded(request, kafka_bootstrap, tmp_path_factory):
    """One grader run per lab (lab01's is the robustness run)."""
    return _graded(request.param, kafka_bootstrap, tmp_path_factory)


@pytest.fixture(scope="module")
def robust(kafka_bootstrap, tmp_path_factory):
    """The robustness run: lab01 with every kind of hostile or broken submission."""
    return _graded(ROBUSTNESS_LAB, kafka_bootstrap, tmp_path_factory)


def _graded(lab, kafka_bootstrap, tmp_path_factory):
    if lab in _RUNS:
        return _RUNS[lab]
    # In the run's data folder, which a failed run keeps: the grader's output, logs and feedback stay readable
    base = Path(os.environ.get("STREAMLAB_DATA_DIR") or tmp_path_factory.mktemp("grading")) / "grading" / lab
    submissions, out = base / "submissions", base / "out"
    paths = build_submissions(lab, submissions)
    before = _snapshot(submissions)
    tag = f"t{os.getpid()}-{lab[:5]}".lower().replace("_", "-")
    with ProcessWatch(tag) as watch:
        proc, seconds = run_grade(lab, submissions, out, tag)
    print(proc.stdout)
    print(proc.stderr[-3000:], file=sys.stderr)
    with (out / "grades.csv").open(newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    _RUNS[lab] = {"lab": lab, "proc": proc, "seconds": seconds, "out": out, "rows": rows, "paths": paths,
                  "submissions": submissions, "before": before, "tag": tag, "seen": watch.names,
                  "max_score": _max_score(lab)}
    return _RUNS[lab]


def _max_score(lab: str) -> float:
    nb = nbformat.read(ROOT / "solutions" / lab / f"{_notebook_name(lab)}.ipynb", as_version=4)
    return float(sum(c.metadata.nbgrader.get("points", 0) for c in nb.cells
                     if c.get("metadata", {}).get("nbgrader", {}).get("grade")))


def _row(graded, student):
    assert student in graded["rows"], f"{student} missing from grades.csv: {sorted(graded['rows'])}"
    return graded["rows"][student]


def _page_text(page: Path) -> str:
    """A feedback page's text, as a reader sees it (no styles, scripts or tags)."""
    text = re.sub(r"<(style|script)\b.*?</\1>", "", page.read_text(), flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def _errors_on_page(graded, student) -> list[str]:
    """The last line of every traceback on ``student``'s feedback page ("TimeoutError: ..."): what a failed
    assertion about a full-marks submission needs to say, since the run's folder may be on another machine."""
    page = graded["out"] / "feedback" / f"{student}.html"
    if not page.exists():
        return [f"(no feedback page for {student})"]
    text = re.sub(r"\x1b\[[0-9;]*m", "", _page_text(page))
    return [line.strip()[:300] for line in text.splitlines()
            if re.match(r"\s*[A-Za-z_.]*(Error|Exception|Exit|Interrupt):", line)][:8]


def _full_marks(graded, student):
    row = _row(graded, student)
    assert (row["status"], float(row["score"])) == ("graded", graded["max_score"]), \
        f"{row}\nerrors on the feedback page: {_errors_on_page(graded, student)}"


# ----------------------------------------------------------------------------- the outcomes

def test_the_grader_succeeds_and_reports_every_student(graded):
    proc = graded["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(graded["rows"]) == set(graded["paths"])
    progress = [line for line in proc.stdout.splitlines() if re.match(r"\[\d+/\d+\] ", line)]
    assert len(progress) == len(graded["paths"]), proc.stdout
    header = (graded["out"] / "grades.csv").read_text().splitlines()[0]
    assert header.split(",")[:5] == ["student", "score", "max_score", "status", "seconds"]
    for row in graded["rows"].values():
        assert float(row["max_score"]) == graded["max_score"]


def test_reference_solution_gets_full_marks(graded):
    _full_marks(graded, "e_reference")


def test_blank_lab_gets_zero(graded):
    row = _row(graded, "f_blank")
    assert (row["status"], float(row["score"])) == ("graded", 0.0), row


def test_alternative_solution_with_numpy_answers_gets_full_marks(graded):
    """Written differently from the reference, and returning numpy numbers and booleans where it returns Python
    ones: still correct."""
    name = "d_alternative_leaky" if graded["lab"] == ROBUSTNESS_LAB else "d_alternative"
    _full_marks(graded, name)
    source = "".join(c.source for c in nbformat.read(graded["paths"][name], as_version=4).cells)
    assert "_as_numpy(" in source, "the alternative's functions return numpy values"


def test_partial_solution_gets_partial_marks(graded):
    expected = float(_variant(graded["lab"], "partial").EXPECTED_SCORE)
    assert 0 < expected < graded["max_score"], "partial.py must solve some parts, not all"
    row = _row(graded, "k_partial")
    assert (row["status"], float(row["score"])) == ("graded", expected), row


def _result(graded, student) -> grading.Result:
    """The student's result file, as the grader wrote it."""
    return grading.Result.from_json((graded["out"] / "results" / f"{student}.json").read_text())


def _traces(graded, student) -> dict[str, dict]:
    return {trace["title"]: trace for check in _result(graded, student).checks for trace in check.traces}


def test_feedback_draws_the_state_per_batch_beside_the_reference(graded):
    """Where a lab's checks trace a part's state, the grader reads it from the checkpoint as of each batch: the
    reference's matches in every batch, and a partial.py whose state goes wrong (its ``DIVERGES_AT``) is told, on
    its feedback page, the batch where it diverged."""
    reference = _traces(graded, "e_reference")
    page = (graded["out"] / "feedback" / "e_reference.html").read_text()
    for title, trace in reference.items():
        assert trace["diverged_at"] is None and trace["rows"], (title, trace)
        assert all(r["yours"] == r["reference"] and r["differ"] == 0 for r in trace["rows"]), (title, trace)
    assert page.count("Your state matched the reference's after every batch.") == len(reference)
    assert page.count("<svg") >= len(reference), "each trace is drawn"
    diverges = getattr(_variant(graded["lab"], "partial"), "DIVERGES_AT", {})
    partial = _traces(graded, "k_partial")
    text = (graded["out"] / "feedback" / "k_partial.html").read_text()
    for title, batch in diverges.items():
        assert partial[title]["diverged_at"] == batch, partial[title]
        assert f"Your state diverged from the reference's at batch {batch}" in text
    assert reference, "every lab draws the state of its stateful parts, batch by batch"
    assert graded["lab"] != "lab02_keyed_state" or diverges, "lab02's partial diverges in a traced part"


# The labs with a swollen.py. Parametrized by lab, so the test runs in its lab's group of tests (tests/conftest.py):
# on the worker that grades that lab once for all of them, never a second time on another.
SWOLLEN_LABS = [lab for lab in LABS if (SUBMISSIONS_DIR / lab / "swollen.py").exists()]


def test_a_catalogued_mistake_is_explained_first_on_the_feedback_page(graded):
    """partial.py's ``MISTAKE`` (lab 02: a handleExpiredTimer that returns nothing): its feedback page shows the
    course's paragraph about it before Spark's error, which still follows."""
    mistake = getattr(_variant(graded["lab"], "partial"), "MISTAKE", None)
    assert mistake or graded["lab"] != "lab02_keyed_state", "lab02's partial makes a catalogued mistake"
    if mistake is None:
        return
    text = _page_text(graded["out"] / "feedback" / "k_partial.html")
    assert mistakes.HEADER in text, "no learner's paragraph on the feedback page"
    assert f"docs/mistakes.md#{mistake.replace('_', '-')}" in text
    assert text.index(mistakes.HEADER) < text.index("FOREACH_BATCH_USER_FUNCTION_ERROR"), \
        "the learner's paragraph comes first, Spark's error after it"



@pytest.mark.parametrize("lab", [CHINESE_LAB])
def test_the_chinese_lab_is_graded_as_the_english_one(lab, kafka_bootstrap, tmp_path_factory):
    """The lab in Chinese (zh/labs/) carries the English lab's cells: its reference gets full marks, its blank 0, each
    test cell the points its English twin gets, and the hidden checks say the same of both."""
    graded = _graded(lab, kafka_bootstrap, tmp_path_factory)
    _full_marks(graded, "e_reference_zh")
    assert (_row(graded, "f_blank_zh")["status"], float(_row(graded, "f_blank_zh")["score"])) == ("graded", 0.0)
    for english in ("e_reference", "f_blank"):
        results = [_result(graded, student) for student in (english, f"{english}_zh")]
        cells = [{c.grade_id: c.score for c in result.cells} for result in results]
        checks = [{c.name: c.passed for c in result.checks} for result in results]
        assert cells[0] == cells[1] and checks[0] == checks[1], (english, cells, checks)
    # its feedback shows the lab's text (nbgrader puts the locked cells back from a Chinese template), nbgrader's words
    # and the grader's own in Chinese; the English twin's stay English
    title = translations.read_blocks(translations.translation_of(ROOT / "solutions" / lab / f"{lab}.ipynb"))
    title = next(iter(title.values())).text.splitlines()[0].lstrip("# ").strip()   # "实验 05 — ..."
    for student, said, not_said in (("f_blank_zh", ["评分器的检查", title, "得分："], "Checked by the grader"),
                                    ("f_blank", ["Checked by the grader", "Score:"], title)):
        page = html.unescape(Path(_result(graded, student).feedback).read_text(encoding="utf-8"))
        assert all(words in page for words in said) and not_said not in page, (student, said)


@pytest.mark.parametrize("lab", SWOLLEN_LABS)
def test_a_swollen_checkpoint_costs_its_own_student_only(lab, kafka_bootstrap, tmp_path_factory):
    """Lab 03's Part B check copies the checkpoint; a student who swells it (a sparse 500 MB file) loses that part,
    told why, before anything is copied; the students after it are graded as before."""
    graded = _graded(lab, kafka_bootstrap, tmp_path_factory)
    row, reference = _row(graded, "c_swollen"), _row(graded, "e_reference")
    assert row["status"] == "graded" and 0 < float(row["score"]) < graded["max_score"], row
    assert "far larger than the lab's query makes" in row["detail"], row
    assert (reference["status"], float(reference["score"])) == ("graded", graded["max_score"]), reference


def test_faked_results_get_zero(graded):
    """The fake solves nothing and fakes results inside its kernel; a rewired input (where a lab has one) makes a
    wrong answer look right by changing what its locked cells send: the grader's own checks say no to both."""
    for name in _forgers(graded["lab"]):
        row = _row(graded, name)
        assert (row["status"], float(row["score"])) == ("graded", 0.0), row
        assert "not confirmed by the grader's checks" in row["detail"], row


def test_tampered_tests_are_graded_by_the_original_tests(robust):
    graded = robust
    row = _row(graded, "g_tampered")
    assert (row["status"], float(row["score"]), float(row["max_score"])) == ("graded", 0.0, graded["max_score"]), row


def test_hanging_submission_is_stopped_at_the_limit(robust):
    graded = robust
    row = _row(graded, "a_hang")
    assert (row["status"], float(row["score"])) == ("timed out", 0.0), row
    assert f"did not finish within {TIMEOUT_S} s" in row["detail"], row   # the whole-submission limit, not a cell's


def test_a_stuck_cell_costs_only_its_own_part(robust):
    graded = robust
    row = _row(graded, "h_slow_cell")
    assert row["status"] == "timed out", row
    assert 0 < float(row["score"]) < graded["max_score"], row
    stuck = grading.answer_cells(_released(graded["lab"]))[-1].metadata.nbgrader.grade_id
    assert stuck in row["detail"], row
    assert f"stopped after {CELL_TIMEOUT_S} s in" in row["detail"], row   # the cell's limit, not the whole one


def test_uninterruptible_cell_is_reported_as_timed_out(robust):
    graded = robust
    row = _row(graded, "b_stuck")
    assert (row["status"], float(row["score"])) == ("timed out", 0.0), row
    assert "did not stop when interrupted" in row["detail"], row
    assert "did not finish within" not in row["detail"], row   # nbgrader gave up on the cell: no whole-limit stop


def test_crashing_submission_is_reported_as_crashed(robust):
    graded = robust
    row = _row(graded, "c_crash")
    assert (row["status"], float(row["score"])) == ("crashed", 0.0), row


def test_malformed_files_are_invalid(robust):
    graded = robust
    for student in ("i_not_json", "j_not_a_notebook"):
        row = _row(graded, student)
        assert (row["status"], float(row["score"])) == ("invalid notebook", 0.0), row
    assert "not JSON" in _row(graded, "i_not_json")["detail"]
    assert "not a Jupyter notebook" in _row(graded, "j_not_a_notebook")["detail"]


def test_submitted_files_are_untouched(graded):
    assert _snapshot(graded["submissions"]) == graded["before"]


def test_nothing_is_left_running(graded):
    # the tag reached the workers and the sandboxes' launchers (bubblewrap) while they ran: the kernels, their
    # JVMs and the hidden checks' process run inside sandboxes with environments of their own ...
    assert {"python", "bwrap"} <= graded["seen"], f"the grading tag did not reach the sandboxes: {graded['seen']}"
    # ... and no process carrying it (the workers, the sandboxes) survived the run
    assert grading.leftover_processes(graded["tag"]) == []
    # nor anything of the sandboxes (kernel, JVM, the leaky student's `sleep`): they carry no tag, and
    # ran in the run's work folders
    assert _running_in(graded["out"]) == []


def _running_in(folder: Path) -> list[str]:
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "name"]):
        try:
            if proc.cwd().startswith(str(folder)):
                found.append(f"{proc.info['pid']} {proc.info['name']}")
        except (psutil.Error, OSError):
            continue
    return found


def test_students_topics_are_deleted(graded):
    import streamlab as sl

    # the grader waits until each student's deleted topics are no longer listed (kafka.delete_topics)
    assert [t for t in sl.list_topics() if t.startswith(graded["tag"])] == []


def _answer_key_lines(lab: str) -> list[str]:
    """The lines of the lab's answer key (its ``hidden_checks.py``) that no student sees: not in the solution
    notebook (its released cells and reference answers), the submissions' own code, or the ``streamlab``
    package (a traceback quotes its lines)."""
    seen = [cell.source for cell in nbformat.read(ROOT / "solutions" / lab / f"{_notebook_name(lab)}.ipynb",
                                                 as_version=4).cells]
    seen += [path.read_text() for path in (SUBMISSIONS_DIR / lab).glob("*.py")]
    seen += [path.read_text() for path in (ROOT / "streamlab").rglob("*.py")]
    seen = " ".join(" ".join(text.split()) for text in seen)
    checks = (ROOT / "solutions" / lab / "hidden_checks.py").read_text()
    lines = [" ".join(line.split()) for line in checks.splitlines()]
    lines = [line for line in lines if len(line) > 30 and line not in seen]
    assert lines, f"{lab}'s hidden_checks.py has no line of its own"
    return lines


def test_no_hidden_test_reaches_the_kernel(graded):
    """The lab has no hidden tests: what its test cells assert runs in the kernel for quick feedback, and the
    grade's facts are checked by hidden_checks.py outside it, so nothing secret enters the student's kernel."""
    nb = nbformat.read(ROOT / "solutions" / graded["lab"] / f"{_notebook_name(graded['lab'])}.ipynb", as_version=4)
    assert not [c for c in nb.cells if "HIDDEN TESTS" in c.source], "a hidden test would run in the student's kernel"


def test_everyone_gets_feedback_without_the_answer_key(graded):
    secret = _answer_key_lines(graded["lab"])
    for student in graded["paths"]:
        page = graded["out"] / "feedback" / f"{student}.html"
        assert page.exists(), f"no feedback for {student}"
        text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", page.read_text())).split())
        assert "HIDDEN TESTS" not in text, student
        leaked = [line for line in secret if line in text]
        assert not leaked, f"{student}'s feedback shows the lab's hidden checks: {leaked[:2]}"
    reference = (graded["out"] / "feedback" / "e_reference.html").read_text()
    assert "Checked by the grader" in reference, "the feedback shows the grader's own checks"
    if graded["lab"] == ROBUSTNESS_LAB:
        assert "crashed" in (graded["out"] / "feedback" / "c_crash.html").read_text()


def test_grading_again_skips_what_is_graded(robust):
    graded = robust
    before = {s: dict(r) for s, r in graded["rows"].items()}
    logs = _snapshot(graded["out"] / "logs"), _snapshot(graded["out"] / "grader")
    proc, _ = run_grade(graded["lab"], graded["submissions"], graded["out"], graded["tag"] + "-again")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("skipped") == len(graded["paths"]), proc.stdout
    # nothing ran: no worker started (it would write grader/worker<N>.log), no student's kernel (logs/<student>.log)
    assert (_snapshot(graded["out"] / "logs"), _snapshot(graded["out"] / "grader")) == logs
    with (graded["out"] / "grades.csv").open(newline="") as handle:
        after = {row["student"]: row for row in csv.DictReader(handle)}
    assert after == before
    assert _snapshot(graded["submissions"]) == graded["before"]


# ----------------------------------------------------------------------------- the class summary

def test_class_summary_agrees_with_grades_csv(graded):
    """OUT/summary.html (written by the grader from results/*.json) says what grades.csv says."""
    page = (graded["out"] / "summary.html").read_text(encoding="utf-8")
    rows = list(graded["rows"].values())
    scores = [float(row["score"]) for row in rows]
    assert f'<span id="students">{len(rows)}</span>' in page
    mean = sum(scores) / len(scores)
    assert f'<span id="mean">{mean:.2f}</span>' in page, page[:2000]
    statuses = {s: int(c) for s, c in re.findall(r'data-status="([^"]+)" data-count="(\d+)"', page)}
    assert statuses == {str(s): sum(row["status"] == s for row in rows) for s in grading.Status}
    cells = [(gid, float(points), int(passed), int(students)) for gid, points, passed, students in
             re.findall(r'data-cell="([^"]+)" data-points="([\d.]+)" data-passed="(\d+)" data-students="(\d+)"', page)]
    nb = nbformat.read(ROOT / "solutions" / graded["lab"] / f"{_notebook_name(graded['lab'])}.ipynb", as_version=4)
    tests = {c.metadata.nbgrader.grade_id for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade")}
    assert {gid for gid, *_ in cells} == tests, "one row per graded test cell"
    assert all(students == len(rows) for *_, students in cells)
    assert sum(points for _, points, *_ in cells) == graded["max_score"]
    # the labs' tests give all their points or none, so the passed cells add up to the class's scores
    assert sum(points * passed for _, points, passed, _ in cells) == pytest.approx(sum(scores))
    full = sum(score == graded["max_score"] for score in scores)
    some = sum(score > 0 for score in scores)
    assert all(full <= passed <= some for _, _, passed, _ in cells), (full, some, cells)
    # the fake passed its own tests in its kernel; the points the grader's checks took back are counted
    withdrawn = dict(re.findall(r'data-cell="([^"]+)"[^>]*data-withdrawn="(\d+)"', page))
    fake = _result(graded, "l_fake")
    taken = {c.grade_id for c in fake.cells if c.auto_score and c.auto_score > (c.score or 0)}
    assert taken, f"the fake's own tests should pass somewhere: {fake.cells}"
    assert all(int(withdrawn[gid]) >= 1 for gid in taken), (withdrawn, taken)
    blank = _result(graded, "f_blank")
    assert all(not c.auto_score for c in blank.cells), "a blank lab's tests give nothing to withdraw"
    assert "<svg" in page, "the score distribution is drawn in the page"
    links = re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)""", page)
    assert not [link for link in links if re.match(r"(https?:)?//", link)], "the page reads offline"
