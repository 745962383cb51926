"""Every lesson notebook runs top to bottom on a fresh kernel against the real broker.

Notebooks are stored without outputs; here they are executed (not saved back): a lesson that passes
is kept, with its outputs, in build/executed/ (streamlab.site.executed), where the site is built from.
Any error in any cell fails the test, and so does a cell that runs longer than CELL_TIMEOUT seconds.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import nbformat
import pytest

from streamlab.site import executed

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = executed.lessons(ROOT)
WATCHES = re.compile(r"watch=True|watch_key=|sl\.watch\(")


def draws_a_state_view(cell) -> bool:
    """A lesson cell that draws a query's state with sl.watch (not one that only reads it, show=False)."""
    return cell.cell_type == "code" and bool(WATCHES.search(cell.source)) and "show=False" not in cell.source

CELL_TIMEOUT = executed.CELL_TIMEOUT


def _client(nb, path: Path):
    """The lessons' client (``executed.lesson_client``): a fresh kernel in ``path``'s folder, over IPC files."""
    return executed.lesson_client(nb, path.parent)


def test_there_are_notebooks():
    assert [p.name for p in NOTEBOOKS][:2] == ["00_setup.ipynb", "01_stateless_vs_stateful.ipynb"]


def test_a_lessons_kernel_talks_over_ipc_and_is_gone_when_the_lesson_ends(tmp_path):
    """The lessons' client owns its kernel: a kernel left running keeps its Spark driver, and on a cluster the
    application never finishes (once, when the client was handed a kernel manager it did not own)."""
    import psutil
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(cells=[new_code_cell("import os, json\n"
                                           "print(os.getpid(), json.load(open(get_ipython().kernel.config"
                                           "['IPKernelApp']['connection_file']))['transport'])")])
    client = _client(nb, tmp_path / "lesson.ipynb")
    client.execute()
    pid, transport = nb.cells[0].outputs[0].text.split()
    assert transport == "ipc"
    assert not psutil.pid_exists(int(pid)) or psutil.Process(int(pid)).status() == psutil.STATUS_ZOMBIE


def test_lessons_sort_in_course_order_and_each_names_the_next():
    """Modules 02, 04 and 07 are two lessons each (02b state expiry, 04b crashes and sinks, 07b state as data), the
    second right after the first in every file listing, and 08 (state in Flink 2.x) closes the course; each lesson's
    last cell points to the one after it."""
    names = [p.stem for p in NOTEBOOKS]
    assert names.index("02_keyed_state") + 1 == names.index("02b_state_expiry") == names.index("03_state_backends") - 1
    assert names.index("04_checkpoints_exactly_once") + 1 == names.index("04b_crashes_and_sinks")
    assert names.index("07_savepoints_upgrades") + 1 == names.index("07b_state_as_data")
    assert names.index("07b_state_as_data") + 1 == names.index("08_state_in_flink_2") == len(names) - 1
    for lesson, following in zip(NOTEBOOKS, NOTEBOOKS[1:]):
        last = nbformat.read(lesson, as_version=4).cells[-1].source
        number = following.stem.split("_")[0]
        assert f"**Next:** {number} ·" in last or f"**Next:** [{number} ·" in last, \
            f"{lesson.name}: its recap should end with **Next:** {number} · ..."


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and (c.outputs or c.execution_count is not None)]
    assert not dirty, f"{path.name}: cells {dirty} have outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_a_lesson(path):
    """Opens with what you'll learn and how long it takes, names the Flink idea, ends with a recap."""
    nb = nbformat.read(path, as_version=4)
    first, last = nb.cells[0].source, nb.cells[-1].source
    assert "What you'll learn" in first and "Time:" in first and "Flink" in first
    assert "Recap" in last
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "```mermaid" in text or "plt." in code, "every lesson shows a picture"


LONGEST_CELL = 20  # lines: longer cells become define / run / inspect steps, their plumbing goes into streamlab


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_lesson_code_cells_are_short(path):
    nb = nbformat.read(path, as_version=4)
    long = {c.id: len(c.source.splitlines()) for c in nb.cells
            if c.cell_type == "code" and len(c.source.splitlines()) > LONGEST_CELL}
    assert not long, f"{path.name}: code cells over {LONGEST_CELL} lines (cell id: lines): {long}"


# "about 1,800": a lesson with more prose is split in two (as 02/02b, 04/04b, 07/07b) or trimmed
PROSE_WORDS = 1850


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_lesson_is_a_wall_of_prose(path):
    """Prose counted as benchmarks/lesson_time.py counts it (Markdown outside fenced blocks, a CJK character a word)."""
    words = _lesson_time().counts(path)["words"]
    assert words <= PROSE_WORDS, \
        f"{path.name}: {words} prose words (at most {PROSE_WORDS}): split the lesson or trim it"


def _lesson_time():
    """benchmarks/lesson_time.py, the script that measures the "Time:" of a lesson (not a package: loaded by path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("lesson_time", ROOT / "benchmarks" / "lesson_time.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_time_estimate_covers_at_least_the_reading(path):
    """The "Time:" line is measured (docs/contributors.md, "How long a lesson takes"): at least the reading part of the
    estimate, which needs no run, so a lesson that grows gets its time updated."""
    import re

    first = nbformat.read(path, as_version=4).cells[0].source
    stated = re.search(r"\*\*Time:\*\* about (\d+) minutes", first)
    assert stated, f"{path.name}: the first cell should say **Time:** about N minutes"
    lesson_time = _lesson_time()
    reading = lesson_time.estimate(lesson_time.counts(path))["total_min"]
    assert int(stated.group(1)) >= reading, \
        f"{path.name}: says {stated.group(1)} min, reading it alone takes {reading:.0f}: run benchmarks/lesson_time.py"


GLOSSARY = ROOT / "notebooks" / "glossary.md"
# the articles' terms a reader of them looks up (issue: a glossary for readers of the articles)
ARTICLE_TERMS = ("状态", "Keyed State", "Operator State", "状态后端", "检查点", "保存点", "障碍", "对齐", "水印",
                 "水位线", "窗口", "状态处理器 API", "可查询状态", "键组", "事件时间", "处理时间", "恰好一次",
                 "至少一次")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_lessons_flink_box_links_the_glossary(path):
    nb = nbformat.read(path, as_version=4)
    box = next(c.source for c in nb.cells if "**Flink connection.**" in c.source)
    assert "](glossary.md)" in box


def test_the_glossary_covers_the_articles_terms_and_its_links_resolve():
    import re

    text = GLOSSARY.read_text(encoding="utf-8")
    missing = [term for term in ARTICLE_TERMS if term not in text]
    assert not missing, f"the glossary lacks {missing}"
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert links and all((GLOSSARY.parent / link).exists() for link in links), links
    lessons = {Path(link).stem[:2] for link in links}
    assert lessons >= {p.stem[:2] for p in NOTEBOOKS} - {"00"}, "every lesson is some term's home"


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, kafka_bootstrap, record_property):
    started = time.monotonic()
    nb = executed.run_lesson(path)
    seconds = time.monotonic() - started
    record_property("seconds", round(seconds, 1))
    print(f"{path.name}: {seconds:.1f}s")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    noise = [o.text for o in outputs if o.output_type == "stream" and o.name == "stderr"]
    assert not noise, f"JVM or library noise in the lesson's cells: {noise}"
    watched = [c for c in nb.cells if draws_a_state_view(c)]
    for cell in watched:  # sl.watch's view stays in the notebook as a picture of the stopped query
        views = [o for o in cell.outputs if o.get("metadata", {}).get("streamlab", {}).get("view") == "state-watch"]
        assert views, f"no state view in the output of: {cell.source[:80]}"
        assert all(o.data["image/png"] and ", stopped)" in o.data["text/plain"] for o in views), cell.source[:80]
    executed.save(nb, path)  # the site is built from this copy: the lesson is not executed again


@pytest.mark.notebooks
def test_setup_notebook_runs_twice_in_one_kernel(kafka_bootstrap):
    """A learner who presses 'Run all' again gets the same results, not an error."""
    path = ROOT / "notebooks" / "00_setup.ipynb"
    nb = nbformat.read(path, as_version=4)
    client = _client(nb, path)
    with client.setup_kernel():
        for _ in range(2):
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
