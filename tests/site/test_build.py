"""streamlab.site: the site built from a small synthetic course (two lessons, one lab, a glossary, a
README), in milliseconds, without a kernel: pages in course order, links between them, what the
pages must never show, and the lessons executed only when no current copy exists."""
from __future__ import annotations

import base64
import json
import re

import nbformat
import pytest

from streamlab.site import build, executed, mermaid, pages

PNG = base64.b64encode(bytes.fromhex(  # a 1x1 PNG: a figure, as matplotlib leaves one in a cell
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201"
    "e2210bc30000000049454e44ae426082")).decode()

README = """# A small course

Read [lesson 01](notebooks/01_b.ipynb), do [its lab](labs/lab01_b/), see [Docker](docker/README.md),
[the cluster](docs/learners.md#running-on-a-cluster) and [the guides](#which-guide).

## Which guide

[Start here](docs/learners.md), [teach](docs/instructors.md), [contribute](docs/contributors.md#no-such-part).
"""

GUIDES = {
    "learners": "# Start here\n\nRun [lesson 01](../notebooks/01_b.ipynb) first.\n\n## Running on a cluster\n\nSet.\n",
    "instructors": "# Teaching this course\n\nGrade with `streamlab grade`; see [the README](../README.md).\n",
    "contributors": "# Working on it\n\nAnswer cells hold `### BEGIN SOLUTION`.\n\n## Writing a lab\n\nWrite one.\n",
}


def lesson(title: str, cells: list) -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {title}\n\nWhat you'll learn."), *cells])


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A course folder, its executed lessons in build/executed/, and the site built from them."""
    root = tmp_path / "course"
    (root / "notebooks").mkdir(parents=True)
    (root / "labs" / "lab01_b").mkdir(parents=True)
    (root / "solutions" / "lab01_b").mkdir(parents=True)
    (root / "README.md").write_text(README)
    (root / "docs").mkdir()
    for name, text in GUIDES.items():
        (root / "docs" / f"{name}.md").write_text(text)
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n[project.urls]\n'
                                         'Repository = "https://github.com/someone/course"\n')
    (root / "notebooks" / "glossary.md").write_text("# Glossary\n\n| term | lesson |\n|---|---|\n"
                                                    "| state | [01](01_b.ipynb) |\n")
    output = nbformat.v4.new_output
    first = lesson("00 · Setup", [nbformat.v4.new_markdown_cell("## Start here\n\nNext: [01](01_b.ipynb#Keyed-state)")])
    second = lesson("01 · Stateless vs stateful", [
        nbformat.v4.new_markdown_cell("## Keyed state\n\nSee [the glossary](glossary.md).\n\n"
                                      "```mermaid\nflowchart LR\n  a --> b\n```"),
        nbformat.v4.new_code_cell("counts.head()", execution_count=1, outputs=[
            output("execute_result", execution_count=1, data={
                "text/html": '<table class="dataframe"><tr><th>path</th><td>3</td></tr></table>',
                "text/plain": "path 3"})]),
        nbformat.v4.new_code_cell("print(ckpt.path); plot()", execution_count=2, outputs=[
            output("stream", name="stdout",
                   text=f"{root}/.streamlab/test-runs/20260101-1-42/checkpoints/counts-1\n{root}/notebooks\n"),
            output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"})]),
    ])
    lab = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Lab 01 — Stateless vs stateful"),
                                          nbformat.v4.new_code_cell("# YOUR CODE HERE\nraise NotImplementedError()")])
    for name, nb in (("00_a.ipynb", first), ("01_b.ipynb", second)):
        nbformat.write(nb, root / "notebooks" / name)
    nbformat.write(lab, root / "labs" / "lab01_b" / "lab01_b.ipynb")
    (root / "solutions" / "lab01_b" / "hidden_checks.py").write_text("SECRET = 1\n")
    monkeypatch.setenv("STREAMLAB_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.delenv("STREAMLAB_DATA_DIR", raising=False)
    for source in executed.lessons(root):  # as the notebook tests leave them: executed, with the hash
        nb = nbformat.read(source, as_version=4)
        nb.metadata["streamlab"] = {executed.SOURCE_KEY: executed.source_hash(source)}
        executed.save(nb, source)
    _in_chinese(root)
    js = tmp_path / "mermaid.min.js"
    js.write_text("window.mermaid = {initialize: function () {}};\n")
    out = tmp_path / "build" / "site"
    copies = [executed.executed_copy(s) for s in executed.lessons(root)]
    course_pages = pages.course_pages(root, copies)
    chinese = pages.chinese_pages(root, copies, tmp_path / "build" / "executed" / "zh")
    build.build_both(out, course_pages, chinese, "someone/course", root, js)
    return root, out, course_pages


def _in_chinese(root):
    """zh/ as `streamlab translate` leaves it: each notebook the English one with its markdown in Chinese (the same
    cell ids, the lesson's code unexecuted), and the learners' guide; its links point to Chinese texts, or English."""
    (root / "zh" / "docs").mkdir(parents=True)
    (root / "zh" / "docs" / "learners.md").write_text(
        "# 从这里开始\n\n先运行[第 01 课](../notebooks/01_b.ipynb)。另见[教师指南](../../docs/instructors.md)。\n")
    words = {"00_a": ["# 00 · 准备", "## 从这里开始\n\n下一课：[01](01_b.ipynb#Keyed-state)"],
             "01_b": ["# 01 · 无状态与有状态",
                      "## 键控状态\n\n见[术语表](glossary.md)，[指南](../../docs/contributors.md)。\n\n"
                      "```mermaid\nflowchart LR\n  a --> b\n```"],
             "lab01_b": ["# 实验 01 — 无状态与有状态"]}
    for source in [*(root / "notebooks").glob("*.ipynb"), root / "labs" / "lab01_b" / "lab01_b.ipynb"]:
        nb = nbformat.read(source, as_version=4)
        for cell, text in zip([c for c in nb.cells if c.cell_type == "markdown"], words[source.stem], strict=True):
            cell.source = text
        target = root / "zh" / source.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)


def html_of(out, name: str) -> str:
    return (out / name).read_text(encoding="utf-8")


def test_pages_come_in_course_order_each_lesson_before_its_lab(course):
    _, out, course_pages = course
    assert [p.file for p in course_pages] == ["index.html", "learners.html", "00_a.html", "01_b.html", "lab01_b.html",
                                              "glossary.html", "instructors.html", "contributors.html"]
    assert sorted(p.name for p in out.glob("*.html")) == sorted(p.file for p in course_pages)
    assert [p.kind for p in course_pages] == ["home", "guide", "lesson", "lesson", "lab", "glossary", "guide", "guide"]
    assert course_pages[4].source.parent.parent.name == "labs", "the student version, never solutions/"


def test_every_page_has_the_whole_course_in_its_navigation_and_previous_next(course):
    _, out, course_pages = course
    files = [p.file for p in course_pages]
    for i, page in enumerate(course_pages):
        text = html_of(out, page.file)
        nav = text.split('<nav class="toc"', 1)[1].split("</nav>", 1)[0]
        assert re.findall(r'href="([^"]+)"', nav) == files
        assert f'href="{page.file}" aria-current="page"' in nav
        prev = re.findall(r'rel="prev" href="([^"]+)"', text)
        after = re.findall(r'rel="next" href="([^"]+)"', text)
        assert prev == ([files[i - 1]] * 2 if i else [])
        assert after == ([files[i + 1]] * 2 if i + 1 < len(files) else [])
        assert 'id="search"' in text and "assets/search-index.js" in text


def test_links_between_files_become_links_between_pages(course):
    _, out, _ = course
    home = html_of(out, "index.html")
    assert 'href="01_b.html"' in home and 'href="lab01_b.html"' in home
    assert 'href="https://github.com/someone/course/blob/HEAD/docker/README.md"' in home
    # GitHub's anchors follow the pages' heading ids; one a page does not have leads to the page
    assert 'href="learners.html#Running-on-a-cluster"' in home and 'href="#Which-guide"' in home
    assert 'href="instructors.html"' in home and 'href="contributors.html"' in home
    assert 'href="01_b.html"' in html_of(out, "learners.html"), "a guide's links are relative to docs/"
    assert 'href="index.html"' in html_of(out, "instructors.html")
    lesson01 = html_of(out, "01_b.html")
    assert 'href="glossary.html"' in lesson01
    assert 'href="01_b.html#Keyed-state"' in html_of(out, "00_a.html"), "anchors follow the page's heading ids"
    assert 'href="01_b.html"' in html_of(out, "glossary.html")


def test_a_lesson_page_links_its_notebook_its_lab_and_binder(course):
    _, out, _ = course
    text = html_of(out, "01_b.html")
    assert 'href="https://github.com/someone/course/blob/HEAD/notebooks/01_b.ipynb"' in text
    assert 'class="lab-link" href="lab01_b.html"' in text
    assert 'href="https://github.com/someone/course/tree/HEAD/labs/lab01_b"' in text
    assert 'href="https://mybinder.org/v2/gh/someone/course/HEAD?labpath=notebooks%2F01_b.ipynb"' in text
    lab = html_of(out, "lab01_b.html")
    assert "labpath=labs%2Flab01_b%2Flab01_b.ipynb" in lab and "NotImplementedError" in lab
    assert 'class="lesson-link" href="01_b.html"' in lab


def test_outputs_are_shown_tables_figures_and_diagrams(course):
    _, out, _ = course
    text = html_of(out, "01_b.html")
    assert '<table class="dataframe">' in text
    assert 'src="data:image/png;base64,' in text
    assert '<pre class="mermaid">' in text and "a --&gt; b" in text
    assert 'src="assets/mermaid.min.js"' in text and (out / "assets" / "mermaid.min.js").exists()
    assert "assets/mermaid.min.js" not in html_of(out, "00_a.html"), "only pages with a diagram load mermaid"


def test_nothing_is_fetched_from_elsewhere(course):
    _, out, _ = course
    for page in out.glob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert not re.findall(r'<(?:script|link|img|iframe)[^>]+(?:src|href)="(?:https?:)?//', text), page.name
    for css in (out / "assets").glob("*.css"):
        assert "url(http" not in css.read_text() and "@import" not in css.read_text()


def test_pages_show_no_path_of_the_machine_that_built_them(course):
    root, out, _ = course
    text = html_of(out, "01_b.html")
    assert str(root) not in text and str(root.parent) not in text
    assert ".streamlab/checkpoints/counts-1" in text and "./notebooks" in text


def test_each_reader_has_a_guide_page_made_from_its_file(course):
    _, out, course_pages = course
    guides = [(p.slug, p.title, p.repo_path) for p in course_pages if p.kind == "guide"]
    assert guides == [("learners", "Start here", "docs/learners.md"),
                      ("instructors", "Teaching this course", "docs/instructors.md"),
                      ("contributors", "Working on it", "docs/contributors.md")]
    assert "streamlab grade" in html_of(out, "instructors.html")
    assert "Writing a lab" in html_of(out, "contributors.html")
    assert "Which guide" in html_of(out, "index.html"), "the landing page is the whole README"
    assert not any("solutions" in (p.repo_path or "") for p in course_pages)


def test_a_guide_that_is_not_there_has_no_page(course):
    root, _, _ = course
    (root / "docs" / "contributors.md").unlink()
    assert [p.slug for p in pages.course_pages(root, []) if p.kind == "guide"] == ["learners", "instructors"]


def test_the_search_index_holds_every_section_without_outputs(course):
    _, out, _ = course
    raw = (out / "assets" / "search-index.js").read_text(encoding="utf-8")
    entries = json.loads(raw.split("=", 1)[1].rstrip().rstrip(";"))
    keyed = next(e for e in entries if e["heading"] == "Keyed state")
    assert keyed["url"] == "01_b.html#Keyed-state" and "glossary" in keyed["text"]
    assert "counts.head()" in keyed["text"], "code is searchable"
    assert not [e for e in entries if "checkpoints/counts-1" in e["text"]], "outputs are not indexed"


def test_the_repository_comes_from_pyproject_or_the_workflow(course):
    root, _, _ = course
    assert pages.repository(root) == "someone/course"
    assert pages.repository(root, "org/other") == "org/other"
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n')
    with pytest.raises(ValueError, match="Repository"):
        pages.repository(root)


# --- executing once -----------------------------------------------------------------------------

def test_only_lessons_without_a_current_copy_are_executed(course, monkeypatch):
    root, _, _ = course
    sources = executed.lessons(root)
    assert all(executed.is_current(s) for s in sources)
    ran = []

    def fake_run(source, timeout=executed.CELL_TIMEOUT):
        ran.append(source.name)
        nb = nbformat.read(source, as_version=4)
        nb.metadata["streamlab"] = {executed.SOURCE_KEY: executed.source_hash(source)}
        return nb

    monkeypatch.setattr(executed, "run_lesson", fake_run)
    assert executed.ensure_executed(sources, say=lambda _: None) == [executed.executed_copy(s) for s in sources]
    assert ran == [], "a run of the notebook tests left current copies: nothing runs again"
    changed = sources[1]
    nb = nbformat.read(changed, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("## Recap"))
    nbformat.write(nb, changed)
    executed.executed_copy(sources[0]).unlink()
    executed.ensure_executed(sources, say=lambda _: None)
    assert ran == ["00_a.ipynb", "01_b.ipynb"], "a missing copy and a copy of an older notebook"
    assert all(executed.is_current(s) for s in sources)


def test_a_damaged_copy_counts_as_missing(course):
    root, _, _ = course
    source = executed.lessons(root)[0]
    executed.executed_copy(source).write_text("{not json")
    assert not executed.is_current(source)


def test_the_notebook_tests_keep_what_they_executed_through_the_same_functions():
    """tests/test_notebooks.py runs each lesson with executed.run_lesson and keeps it with executed.save."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "test_notebooks.py").read_text()
    runs = text.split("def test_notebook_runs", 1)[1].split("\ndef ", 1)[0]
    assert "executed.run_lesson(path)" in runs and "executed.save(nb, path)" in runs


# --- mermaid --------------------------------------------------------------------------------------

def test_mermaid_is_fetched_once_and_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMLAB_CACHE_DIR", str(tmp_path))
    target = mermaid.cached()
    target.parent.mkdir(parents=True)
    target.write_text("not mermaid")
    monkeypatch.setattr(mermaid.shutil, "which", lambda name: None)
    with pytest.raises(mermaid.MermaidError, match="npm"):
        mermaid.mermaid_js()  # a file with the wrong hash is not used: it is fetched again
    monkeypatch.setattr(mermaid, "SHA256", mermaid._sha256(target))
    assert mermaid.mermaid_js() == target


def test_the_site_has_both_languages_each_page_switching_to_its_twin(course):
    _, out, course_pages = course
    chinese = sorted(p.name for p in (out / "zh").glob("*.html"))
    assert chinese == ["00_a.html", "01_b.html", "glossary.html", "index.html", "lab01_b.html"]
    for name in chinese:
        page = html_of(out / "zh", name)
        assert '<html lang="zh-Hans">' in page and "搜索课程" in page
        assert re.search(rf'<a class="language-switch" href="\.\./{re.escape(name)}" hreflang="en"', page), name
        assert f'<a class="language-switch" href="zh/{name}" hreflang="zh-Hans"' in html_of(out, name)
    # an English page with no Chinese twin switches to the Chinese home
    assert '<a class="language-switch" href="zh/index.html"' in html_of(out, "instructors.html")
    assert (out / "zh" / "assets" / "search-index.js").read_text(encoding="utf-8").count("键控状态") >= 1


def test_a_chinese_lesson_is_the_english_run_with_chinese_text(course):
    _, out, _ = course
    english, chinese = html_of(out, "01_b.html"), html_of(out / "zh", "01_b.html")
    assert "<title>01 · 无状态与有状态 · 用 Spark 和 Kafka 学有状态流处理</title>" in chinese
    assert "Keyed state" not in chinese.split("<article>")[1] and "键控状态" in chinese
    for shown, times in (('<table class="dataframe">', 1), ("data:image/png;base64,", 1), ('<pre class="mermaid">', 1),
                         ('class="highlight', 2)):
        assert english.count(shown) == chinese.count(shown) == times, shown  # executed once, shown in both
    assert "实验 01 — 无状态与有状态" in chinese   # its lab, by its Chinese title


def test_a_chinese_link_goes_to_a_chinese_page_or_else_to_the_english_one(course):
    _, out, _ = course
    home = html_of(out / "zh", "index.html")
    assert 'href="01_b.html"' in home and 'href="../instructors.html"' in home
    lesson = html_of(out / "zh", "01_b.html")
    assert 'href="glossary.html"' in lesson and 'href="../contributors.html"' in lesson
    assert 'href="01_b.html"' in html_of(out / "zh", "00_a.html")   # its anchor is an English heading's: dropped
