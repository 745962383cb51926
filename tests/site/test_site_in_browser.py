"""The built site (build/site/, `make site`), read in headless Chromium as a reader would: every page
loads without a console error and fetches nothing from elsewhere, every figure is drawn, every mermaid
diagram became an SVG, every link inside the site and its anchor resolves, the search box finds, and no
page shows solution code, hidden tests or a path of the machine that built it. All of it in both languages: the
Chinese pages (zh/) are looked at as the English are, and each page's switch leads to its twin.

`make test` runs these after the notebook tests and `streamlab site` (the late tier: `-m browser`).
A screenshot of one lesson page is kept in build/screenshots/.
"""
from __future__ import annotations

import functools
import html
import http.server
import os
import re
import threading
from pathlib import Path

import nbformat
import pytest
from browser import INSTALL, Chromium, chromium_path
from test_notebooks import draws_a_state_view

from streamlab.site import executed
from streamlab.site.build import site_dir
from streamlab.site.executed import build_dir
from streamlab.stack.paths import project_root

pytestmark = pytest.mark.browser

ROOT = project_root()
SITE = site_dir()
SCREENSHOT_OF = "03_state_backends.html"  # a lesson with plots and tables: its first plot, on screen
PAGES = sorted(p.relative_to(SITE).as_posix() for p in [*SITE.glob("*.html"), *SITE.glob("zh/*.html")]) \
    if SITE.is_dir() else []


def _serve(folder: Path):
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


LOOK = """(async () => {
  const svgReady = () => [...document.querySelectorAll('pre.mermaid')].every(p => p.querySelector('svg'));
  for (let i = 0; i < 100 && !svgReady(); i++) await new Promise(r => setTimeout(r, 100));
  await Promise.all([...document.images].map(
      img => img.complete ? null : new Promise(r => { img.onload = img.onerror = r; })));
  return {
    title: document.title,
    images: [...document.images].map(img => ({src: img.src.slice(0, 60), alt: img.alt,
                                              loaded: img.complete && img.naturalWidth > 0,
                                              width: img.getBoundingClientRect().width,
                                              height: img.getBoundingClientRect().height})),
    mermaid: [...document.querySelectorAll('pre.mermaid')].map(p => {
      const svg = p.querySelector('svg');
      return svg ? {svg: true, width: svg.getBoundingClientRect().width, error: !!p.querySelector('.error-icon')}
                 : {svg: false};
    }),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    lang: document.documentElement.lang,
    switch: (document.querySelector('a.language-switch') || {}).href || null,
    ids: [...document.querySelectorAll('[id]')].map(e => e.id),
    cells: [...document.querySelectorAll('.input_area, .output_area')].map(e => e.innerText).join('\\n'),
    text: document.body.innerText,
    html: document.documentElement.outerHTML,
  };
})()"""


@pytest.fixture(scope="module")
def seen():
    """Every page of the site as Chromium showed it: {page: what the page held}, with its errors and
    the URLs it asked for."""
    if chromium_path() is None:
        pytest.skip(f"no Chromium to look at the site with: {INSTALL}")
    assert PAGES, f"no site in {SITE}: `make site` builds it (`make test` does, after the notebook tests)"
    server = _serve(SITE)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    found = {"base": base, "pages": {}}
    try:
        with Chromium() as browser:
            page = browser.new_page()
            for name in PAGES:
                page.goto(base + name)
                view = page.evaluate(LOOK, timeout=60)
                view.update(errors=list(page.errors), requests=list(page.requests))
                found["pages"][name] = view
                if name == SCREENSHOT_OF:
                    page.evaluate("document.images.length && document.images[0].scrollIntoView({block: 'center'})")
                    found["screenshot"] = page.screenshot(build_dir() / "screenshots" / "lesson-03.png")
            page.goto(base + "index.html")
            page.evaluate("(() => { const box = document.getElementById('search'); box.value = 'watermark';"
                          " box.dispatchEvent(new Event('input')); })()")
            found["search"] = page.evaluate("[...document.querySelectorAll('#search-results a')].map(a => a.href)")
            found["search_shown"] = page.evaluate("!document.getElementById('search-results').hidden")
            page.goto(base + "zh/index.html")
            page.evaluate("(() => { const box = document.getElementById('search'); box.value = '水位线';"
                          " box.dispatchEvent(new Event('input')); })()")
            found["search_zh"] = page.evaluate("[...document.querySelectorAll('#search-results a')].map(a => a.href)")
    finally:
        server.shutdown()
    return found


@pytest.mark.parametrize("name", PAGES)
def test_page_loads_without_errors_and_fetches_nothing_from_elsewhere(seen, name):
    view = seen["pages"][name]
    assert not view["errors"], view["errors"]
    foreign = [url for url in view["requests"] if not url.startswith((seen["base"], "data:"))]
    assert not foreign, f"{name} fetches from elsewhere: {foreign}"


@pytest.mark.parametrize("name", PAGES)
def test_every_figure_is_drawn(seen, name):
    bad = [img for img in seen["pages"][name]["images"] if not (img["loaded"] and img["width"] and img["height"])]
    assert not bad, bad


@pytest.mark.parametrize("name", PAGES)
def test_every_mermaid_diagram_became_an_svg(seen, name):
    diagrams = seen["pages"][name]["mermaid"]
    assert all(d["svg"] and d["width"] > 0 and not d["error"] for d in diagrams), diagrams


def test_no_diagram_was_lost_on_the_way():
    """Each lesson's page, in each language, has as many diagrams as its notebook has mermaid blocks."""
    for notebook in executed.lessons(ROOT):
        for source, site in ((notebook, SITE), (ROOT / "zh" / "notebooks" / notebook.name, SITE / "zh")):
            nb = nbformat.read(source, as_version=4)
            blocks = sum(c.source.count("```mermaid") for c in nb.cells if c.cell_type == "markdown")
            page = (site / f"{notebook.stem}.html").read_text(encoding="utf-8")
            assert page.count('<pre class="mermaid">') == blocks, source


@pytest.mark.parametrize("name", PAGES)
def test_every_link_inside_the_site_and_its_anchor_resolve(seen, name):
    pages, base = seen["pages"], seen["base"]
    broken = []
    for url in seen["pages"][name]["links"]:
        if not url.startswith(base):
            continue
        target, _, anchor = url[len(base):].partition("#")
        target = target or "index.html"
        if target not in pages:
            broken.append(url)
        elif anchor and anchor not in pages[target]["ids"]:
            broken.append(url)
    assert not broken, broken


def test_the_lessons_show_their_outputs(seen):
    """The executed lessons, in both languages: tables of state and figures are on the pages, not only code."""
    lessons = {n: v for n, v in seen["pages"].items() if re.match(r"(zh/)?\d\d[a-z]?_", n)}
    assert len(lessons) == 2 * len(executed.lessons(ROOT))
    assert sum(len(v["images"]) for v in lessons.values()) >= 3, "the lessons' plots"
    assert all("dataframe" in v["html"] or "<table" in v["html"] for n, v in lessons.items()
               if not n.endswith("00_setup.html"))


def test_the_lessons_that_watch_a_query_show_its_state_view(seen):
    """A lesson that draws a query with sl.watch keeps the view on its page, as a picture that is drawn."""
    watching = [p for p in executed.lessons(ROOT)
                if any(draws_a_state_view(c) for c in nbformat.read(p, as_version=4).cells)]
    assert watching, "no lesson uses sl.watch"
    for notebook in watching:
        for name in (f"{notebook.stem}.html", f"zh/{notebook.stem}.html"):
            views = [img for img in seen["pages"][name]["images"] if img["alt"].startswith("state watch")]
            assert views and all(img["loaded"] and img["width"] > 100 for img in views), name


def _hidden_and_solution_lines() -> list[str]:
    """Lines of the solutions and hidden tests (solutions/) that neither the student labs nor the lessons have."""
    public = [*(ROOT / "labs").glob("*/*.ipynb"), *(ROOT / "notebooks").glob("*.ipynb")]
    student = "\n".join(c.source for p in public for c in nbformat.read(p, as_version=4).cells)
    lines = []
    for path in (ROOT / "solutions").glob("*/*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            for block in re.findall(r"### BEGIN (?:SOLUTION|HIDDEN TESTS)\n(.*?)### END", cell.source, re.S):
                lines += [line.strip() for line in block.splitlines()
                          if len(line.strip()) > 30 and line.strip() not in student]
    return lines


def test_no_page_shows_solutions_hidden_tests_or_this_machines_paths(seen):
    secret = _hidden_and_solution_lines()
    assert secret, "the solutions have lines the labs do not"
    machine = [str(ROOT), str(Path.home()), os.environ.get("STREAMLAB_DATA_DIR") or str(ROOT / ".streamlab")]
    for name, view in seen["pages"].items():
        # the instructors' and contributors' guides explain the markers in their prose; no page has them in a cell
        text = view["cells"] if name in ("instructors.html", "contributors.html") else view["text"]
        for marker in ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"):
            assert marker not in text, f"{name} shows {marker}"
        shown = html.unescape(re.sub(r"<[^>]+>", "", view["html"]))
        assert not [line for line in secret if line in shown], f"{name} shows a line of a solution or hidden test"
        assert not [p for p in machine if p and p != "/" and p in view["html"]], f"{name} shows a path of this machine"
    for path in SITE.rglob("*"):
        assert "hidden_checks" not in path.name and "solutions" not in path.parts


def test_the_search_box_finds(seen):
    assert seen["search_shown"]
    assert any("06_event_time_watermarks.html" in url for url in seen["search"]), seen["search"]


def test_a_screenshot_of_a_lesson_is_kept(seen):
    shot = seen["screenshot"]
    assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_every_lesson_and_lab_links_its_notebook_and_binder(seen):
    for name, view in seen["pages"].items():
        if re.match(r"(\d\d_|lab\d\d_)", name):
            notebook = name.replace(".html", ".ipynb")
            assert any(u.startswith("https://mybinder.org/v2/gh/") and notebook in u for u in view["links"]), name
            assert any(u.startswith("https://github.com/") and u.endswith(notebook) for u in view["links"]), name


def test_each_page_switches_to_its_twin_in_the_other_language(seen):
    """Every page says its language, and its switch leads to the same page in the other (its home when there is no
    such page: the instructors' and contributors' guides are in English only)."""
    pages, base = seen["pages"], seen["base"]
    chinese = {name for name in pages if name.startswith("zh/")}
    assert len(chinese) >= len(executed.lessons(ROOT)) + 7 + 2   # the lessons, the labs, the home and the glossary
    for name, view in pages.items():
        assert view["lang"] == ("zh-Hans" if name in chinese else "en"), name
        twin = name.removeprefix("zh/") if name in chinese else f"zh/{name}"
        expected = twin if twin in pages else ("index.html" if name in chinese else "zh/index.html")
        assert view["switch"] == base + expected, name


def test_a_chinese_lesson_shows_chinese_text_and_the_english_runs_outputs(seen):
    english, chinese = seen["pages"]["03_state_backends.html"], seen["pages"]["zh/03_state_backends.html"]
    assert "状态后端" in chinese["text"] and len(re.findall(r"[\u4e00-\u9fff]", chinese["text"])) > 1000
    assert len(chinese["images"]) == len(english["images"]) > 0
    assert chinese["html"].count('class="dataframe"') == english["html"].count('class="dataframe"') > 0


def test_the_chinese_search_box_finds_chinese_words(seen):
    assert any(url.endswith("zh/06_event_time_watermarks.html") or "zh/06_event_time_watermarks.html#" in url
               for url in seen["search_zh"]), seen["search_zh"]
