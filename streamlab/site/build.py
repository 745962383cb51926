"""Builds the course's site: each page converted with nbconvert (its plain "basic" template: the cells
with their outputs, no scripts), put into one layout with the course's navigation, previous/next, a
search box and links to the repository and Binder, and written with everything it needs under
``assets/``, so that it reads offline, from a web server or straight from the folder.

    python -m streamlab site          (make site) the lessons executed once, then the site in build/site/

The site is in two languages: English in build/site/, Simplified Chinese in build/site/zh/ (``pages.chinese_pages``),
each page with a switch to the same page in the other language. The Chinese lessons show the English run's outputs:
the code is the same, so nothing is executed twice.
"""
from __future__ import annotations

import html
import json
import os
import posixpath
import re
import shutil
from pathlib import Path

from ..stack import broker
from ..stack.paths import project_root
from . import executed, mermaid
from .executed import build_dir
from .pages import Page, binder_url, chinese_pages, course_pages, repo_url, repository
from .search import search_entries

ASSETS = Path(__file__).resolve().parent / "assets"  # site.css, site.js: the layout's own files
COURSE = "Stateful Stream Processing with Spark and Kafka"
# What the layout itself says, in each language the site is built in.
WORDS = {
    "en": {"lang": "en", "course": COURSE, "search": "Search the course", "nothing": "Nothing found for",
           "order": "The course, in order", "prevnext": "Previous and next", "lab": "Lab {number}: {title}",
           "notebook": "the notebook in the repository", "its_lab": "its lab", "lab_repo": "the lab in the repository",
           "its_lesson": "its lesson", "binder": "launch on Binder", "repository": "the repository",
           "course_binder": "launch the course on Binder", "switch": "中文", "switch_lang": "zh-Hans",
           "switch_label": "这一页的中文版"},
    "zh": {"lang": "zh-Hans", "course": "用 Spark 和 Kafka 学有状态流处理", "search": "搜索课程", "nothing": "没有找到",
           "order": "课程目录", "prevnext": "上一页与下一页", "lab": "实验 {number}：{title}",
           "notebook": "仓库中的 notebook", "its_lab": "本课的实验", "lab_repo": "仓库中的实验",
           "its_lesson": "本实验的课程", "binder": "在 Binder 上运行", "repository": "课程仓库",
           "course_binder": "在 Binder 上运行课程", "switch": "English", "switch_lang": "en",
           "switch_label": "This page in English"},
}
MERMAID_START = '<script src="assets/mermaid.min.js"></script>\n' \
                '<script>mermaid.initialize({startOnLoad: true, securityLevel: "strict"});</script>'


def render(page: Page, exporter=None) -> str:
    """The page's content as HTML (nbconvert's basic template: no head, no scripts)."""
    import nbformat
    from nbconvert import HTMLExporter

    if page.source is not None:
        nb = nbformat.read(page.source, as_version=4)
    else:
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(page.markdown or "")])
    body, _ = (exporter or HTMLExporter(template_name="basic")).from_notebook_node(nb)
    return body


HEADING = re.compile(r'<h([1-6]) id="([^"]+)">(.*?)<a class="anchor-link"', re.S)
HREF = re.compile(r'(<a\b[^>]*?\shref=")([^"]*)(")')


def github_slug(text: str) -> str:
    """The anchor GitHub gives a heading ("Running on a Spark cluster" -> running-on-a-spark-cluster)."""
    text = re.sub(r"<[^>]+>", "", html.unescape(text)).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(body: str) -> dict[str, str]:
    """{anchor a link may use: the id it means}: each heading's id, and its GitHub-style name."""
    found = {}
    for _, ident, text in HEADING.findall(body):
        found.setdefault(github_slug(text), ident)
        found[ident] = ident
    for ident in re.findall(r'\sid="([^"]+)"', body):
        found.setdefault(ident, ident)
    return found


def rewrite_links(body: str, page: Page, pages: list[Page], ids: dict[str, dict[str, str]], repo: str,
                  elsewhere: dict[str, str] | None = None) -> str:
    """Links between the repository's files become links between pages where the file has a page, and
    links to the repository (on GitHub) where it has none; anchors follow the heading ids of the page.
    ``elsewhere``: {a file's path: its page in the other language's site}, for a file this site has no page of
    (a Chinese page's link to a text that is only in English goes to its English page)."""
    elsewhere = elsewhere or {}
    by_path = {p.repo_path: p for p in pages}
    by_path.update({posixpath.dirname(p.repo_path) + "/": p for p in pages if p.kind == "lab"})
    here = posixpath.dirname(page.repo_path)

    def target(href: str) -> str:
        if re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I) or href.startswith("//"):
            return href  # https:, mailto:, data: ...
        path, _, anchor = href.partition("#")
        if not path:  # an anchor of this page
            if anchor in ids[page.slug]:
                return f"#{ids[page.slug][anchor]}"
            return repo_url(repo, page.repo_path) + href
        resolved = posixpath.normpath(posixpath.join(here, path)) + ("/" if path.endswith("/") else "")
        other = by_path.get(resolved) or by_path.get(resolved.rstrip("/") + "/")
        if other is None:
            candidates = [resolved, resolved.removeprefix("zh/")]
            there = next((elsewhere[name] for base in candidates for name in (base, base.rstrip("/") + "/")
                          if name in elsewhere), None)
            if there is not None:
                return there
            return repo_url(repo, resolved) + (f"#{anchor}" if anchor else "")
        if anchor and anchor in ids[other.slug]:
            return f"{other.file}#{ids[other.slug][anchor]}"
        return other.file

    return HREF.sub(lambda m: m.group(1) + html.escape(target(html.unescape(m.group(2)))) + m.group(3), body)


def machine_paths(root: Path) -> list[tuple[str, str]]:
    """(path of this machine, what a reader sees instead), longest first: the data folder a test run
    used (.streamlab/test-runs/<run>), the repository, the home folder."""
    pairs = []
    data = os.environ.get("STREAMLAB_DATA_DIR")
    if data:
        pairs.append((str(Path(data)), ".streamlab"))
    pairs.append((str(root), "."))
    home = str(Path.home())
    if home not in ("/", ""):
        pairs.append((home, "~"))
    return sorted(set(pairs), key=lambda pair: -len(pair[0]))


def scrub(text: str, root: Path) -> str:
    """The pages show paths as a learner's own clone would: relative to the course, not this machine's.
    (A test run's checkpoints live in .streamlab/test-runs/<run>/, a learner's in .streamlab/.)"""
    text = re.sub(re.escape(str(root)) + r"/\.streamlab/test-runs/[^/\s\"'<]+", ".streamlab", text)
    for path, shown in machine_paths(root):
        text = text.replace(path, shown)
    return text


def nav_html(pages: list[Page], current: Page, words: dict = WORDS["en"]) -> str:
    items = []
    for page in pages:
        label = html.escape(page.title)
        if page.kind == "lab" and not page.title.lower().startswith(("lab", "实验")):
            label = words["lab"].format(number=page.slug[3:5], title=label)
        mark = ' aria-current="page"' if page is current else ""
        items.append(f'<li class="nav-{page.kind}"><a href="{page.file}"{mark}>{label}</a></li>')
    return "\n".join(items)


def page_links(page: Page, pages: list[Page], repo: str, words: dict = WORDS["en"]) -> str:
    """Under the title: the file in the repository, the lab of a lesson, and Binder for notebooks."""
    links = []
    if page.kind in ("lesson", "lab"):
        links.append(f'<a class="repo-link" href="{repo_url(repo, page.repo_path)}">{words["notebook"]}</a>')
    lab = next((p for p in pages if p.slug == page.lab), None) if page.lab else None
    if lab is not None:
        links.append(f'<a class="lab-link" href="{lab.file}">{words["its_lab"]}: {html.escape(lab.title)}</a>')
        links.append(f'<a class="repo-link" href="{repo_url(repo, posixpath.dirname(lab.repo_path) + "/")}">'
                     f'{words["lab_repo"]}</a>')
    lesson = next((p for p in pages if p.lab == page.slug), None) if page.kind == "lab" else None
    if lesson is not None:
        links.append(f'<a class="lesson-link" href="{lesson.file}">{words["its_lesson"]}: '
                     f'{html.escape(lesson.title)}</a>')
    if page.kind in ("lesson", "lab"):
        links.append(f'<a class="binder-link" href="{html.escape(binder_url(repo, page.repo_path))}">'
                     f'{words["binder"]}</a>')
    if page.kind == "home":
        start = "zh/notebooks/00_setup.ipynb" if page.repo_path.startswith("zh/") else "notebooks/00_setup.ipynb"
        links.append(f'<a class="repo-link" href="{repo_url(repo, "")}">{words["repository"]}</a>')
        links.append(f'<a class="binder-link" href="{html.escape(binder_url(repo, start))}">'
                     f'{words["course_binder"]}</a>')
    return " · ".join(links)


def switch_html(page: Page, other: dict[str, str] | None, words: dict) -> str:
    """The link to this page in the other language (``other``: {slug: its href there}; that site's home when it has
    no such page); nothing when the site has one language."""
    if not other:
        return ""
    href = other.get(page.slug) or other["index"]
    return (f'<a class="language-switch" href="{html.escape(href)}" hreflang="{words["switch_lang"]}" '
            f'lang="{words["switch_lang"]}" title="{words["switch_label"]}">{words["switch"]}</a>')


def layout(page: Page, pages: list[Page], body: str, repo: str, language: str = "en",
           other: dict[str, str] | None = None) -> str:
    words = WORDS[language]
    index = pages.index(page)
    before = pages[index - 1] if index > 0 else None
    after = pages[index + 1] if index + 1 < len(pages) else None
    prev_link = (f'<a class="prev" rel="prev" href="{before.file}">← {html.escape(before.title)}</a>'
                 if before else '<span class="prev"></span>')
    next_link = (f'<a class="next" rel="next" href="{after.file}">{html.escape(after.title)} →</a>'
                 if after else '<span class="next"></span>')
    mermaid = MERMAID_START if 'class="mermaid"' in body else ""
    return f"""<!DOCTYPE html>
<html lang="{words["lang"]}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(page.title)} · {words["course"]}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="assets/site.css">
<link rel="stylesheet" href="assets/pygments.css">
</head>
<body class="page-{page.kind}">
<header class="top">
<a class="brand" href="index.html">{words["course"]}</a>
<div class="search" role="search">
<input id="search" type="search" placeholder="{words["search"]}" aria-label="{words["search"]}" autocomplete="off"
 data-nothing="{words["nothing"]}">
<ol id="search-results" hidden></ol>
</div>
{switch_html(page, other, words)}
</header>
<div class="layout">
<nav class="toc" aria-label="{words["order"]}"><ol>
{nav_html(pages, page, words)}
</ol></nav>
<main>
<nav class="prevnext top-prevnext" aria-label="{words["prevnext"]}">{prev_link}{next_link}</nav>
<p class="page-links">{page_links(page, pages, repo, words)}</p>
<article>
{body}
</article>
<nav class="prevnext" aria-label="{words["prevnext"]}">{prev_link}{next_link}</nav>
</main>
</div>
<script src="assets/search-index.js"></script>
<script src="assets/site.js"></script>
{mermaid}
</body>
</html>
"""


def pygments_css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="default").get_style_defs(".highlight")


def build_site(out: Path, pages: list[Page], repo: str, root: Path, mermaid_js: Path | None, *,
               language: str = "en", other: list[Page] | None = None, other_dir: str = "") -> list[Path]:
    """Write the site into ``out`` (emptied first): one HTML file per page, and assets/. Returns the pages'
    files. ``mermaid_js``: the mermaid.min.js to ship, needed when a page has a diagram. ``language``: the words of
    the layout (``WORDS``); ``other``: the pages of the site in the other language, at ``other_dir`` from this one
    ("zh/", "../"), for each page's switch and for links to a text this site has no page of."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="basic")
    bodies = {page.slug: scrub(render(page, exporter), root) for page in pages}
    ids = {slug: anchors(body) for slug, body in bodies.items()}
    if out.exists():
        shutil.rmtree(out)
    (out / "assets").mkdir(parents=True)
    written, index = [], []
    there = {p.slug: other_dir + p.file for p in other or []}
    elsewhere = {p.repo_path: other_dir + p.file for p in other or []}
    for page in pages:
        body = rewrite_links(bodies[page.slug], page, pages, ids, repo, elsewhere)
        index += search_entries(page, body)
        path = out / page.file
        path.write_text(layout(page, pages, body, repo, language, there), encoding="utf-8")
        written.append(path)
    for name in ("site.css", "site.js"):
        shutil.copyfile(ASSETS / name, out / "assets" / name)
    (out / "assets" / "pygments.css").write_text(pygments_css(), encoding="utf-8")
    (out / "assets" / "search-index.js").write_text(
        "window.SITE_SEARCH = " + json.dumps(index, ensure_ascii=False) + ";\n", encoding="utf-8")
    if any('class="mermaid"' in body for body in bodies.values()):
        if mermaid_js is None:
            raise ValueError("a page has a mermaid diagram, and no mermaid.min.js was given")
        shutil.copyfile(mermaid_js, out / "assets" / "mermaid.min.js")
    (out / ".nojekyll").write_text("")  # GitHub Pages: serve assets/ as it is
    return written


def site_dir() -> Path:
    return build_dir() / "site"


def build_course(out: Path | None = None, repo: str | None = None, say=print) -> Path:
    """``make site``: the lessons executed once (only those without a current copy in build/executed/),
    then the site in ``out`` (build/site/). ``repo``: the GitHub repository its links point to."""
    root = project_root()
    to_run = [source for source in executed.lessons(root) if not executed.is_current(source)]
    # lessons run against a running Kafka, as after `make lab` (lesson 00 checks it): the course's
    # broker, started here if no other Kafka is named, and stopped again afterwards
    own_broker = bool(to_run) and not os.environ.get("KAFKA_BOOTSTRAP_SERVERS") and not broker.status().running
    if own_broker:
        say(f"starting the course's Kafka broker for {len(to_run)} lesson(s) ...")
        broker.start(quiet=True)
    try:
        copies = executed.ensure_executed(say=say)
    finally:
        if own_broker:
            broker.stop(quiet=True)
    pages = course_pages(root, copies)
    chinese = chinese_pages(root, copies, build_dir() / "executed" / "zh")
    out = out or site_dir()
    repo = repository(root, repo or os.environ.get("STREAMLAB_SITE_REPOSITORY"))
    build_both(out, pages, chinese, repo, root, mermaid.mermaid_js())
    return out


def build_both(out: Path, pages: list[Page], chinese: list[Page], repo: str, root: Path,
               mermaid_js: Path | None) -> list[Path]:
    """The English site in ``out`` and, when there are ``chinese`` pages, the Chinese one in ``out``/zh/, each page
    switching to its twin. Returns every page written."""
    written = build_site(out, pages, repo, root, mermaid_js, other=chinese, other_dir="zh/")
    if chinese:
        written += build_site(out / "zh", chinese, repo, root, mermaid_js, language="zh", other=pages,
                              other_dir="../")
    return written
