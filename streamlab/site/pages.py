"""Which pages the course's site has, in course order, and what each is made from.

    index.html                 the README: the course's front door
    learners.html              docs/learners.md, a learner's start
    00_setup.html              lesson 00, then for each module: the lesson (executed), then its lab
    01_<name>.html             (the student version from labs/, never solutions/)
    lab01_<name>.html
    ...
    glossary.html              notebooks/glossary.md
    instructors.html           docs/instructors.md, the instructor's guide
    contributors.html          docs/contributors.md, the contributor's guide

    zh/                        the course in Simplified Chinese (``chinese_pages``), from zh/: the same file names
    zh/index.html              zh/docs/learners.md, the learners' guide, as the Chinese home
    zh/00_setup.html ...       each lesson: its English executed copy with the Chinese markdown (the code and its
                               outputs are the English run's: executed once), each lab from zh/labs/, the glossary

A guide that is not there has no page (a link to it goes to the repository); a Chinese page links a text with no
Chinese version to its English page.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

# The guides by reader: (page, file, title if the file has no heading). The learners' comes before the
# lessons, the others after the glossary.
LEARNERS_GUIDE = ("learners", "docs/learners.md", "Start here")
LATER_GUIDES = (("instructors", "docs/instructors.md", "For instructors"),
                ("contributors", "docs/contributors.md", "For contributors"))


@dataclass(frozen=True)
class Page:
    slug: str  # the page's file name without .html
    title: str
    kind: str  # home, lesson, lab, glossary, guide
    repo_path: str  # the file of the repository it shows ("notebooks/01_x.ipynb"), for links to it
    source: Path | None = None  # a notebook to convert (an executed lesson, a student lab)
    markdown: str | None = None  # or markdown text (the README, a guide, the glossary)
    lab: str | None = None  # a lesson's lab (its slug), when it has one

    @property
    def file(self) -> str:
        return f"{self.slug}.html"


def first_heading(text: str, fallback: str) -> str:
    match = re.search(r"^#\s+(.+)$", text, re.M)
    return match.group(1).strip() if match else fallback


def notebook_title(path: Path) -> str:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return first_heading(markdown, path.stem)


def course_pages(root: Path, executed: list[Path]) -> list[Page]:
    """Every page of the site, in course order. ``executed``: the executed lessons (their names are
    the lessons' names)."""
    readme = (root / "README.md").read_text(encoding="utf-8")
    pages = [Page("index", first_heading(readme, "The course"), "home", "README.md", markdown=readme)]
    pages += _guides(root, [LEARNERS_GUIDE])
    labs = {p.name[3:5]: p for p in sorted((root / "labs").glob("lab[0-9][0-9]_*")) if p.is_dir()}
    for index, copy in enumerate(executed):
        number = copy.name[:2]                     # 02 and 02b are one module, with one lab after both
        lab_dir = labs.get(number)
        lab_slug = lab_dir.name if lab_dir else None
        pages.append(Page(copy.stem, notebook_title(copy), "lesson", f"notebooks/{copy.name}", source=copy,
                          lab=lab_slug))
        last_of_module = index + 1 == len(executed) or executed[index + 1].name[:2] != number
        if lab_dir and last_of_module:
            notebook = lab_dir / f"{lab_dir.name}.ipynb"
            pages.append(Page(lab_dir.name, notebook_title(notebook), "lab",
                              f"labs/{lab_dir.name}/{notebook.name}", source=notebook))
    glossary = root / "notebooks" / "glossary.md"
    if glossary.exists():
        text = glossary.read_text(encoding="utf-8")
        pages.append(Page("glossary", first_heading(text, "Glossary"), "glossary", "notebooks/glossary.md",
                          markdown=text))
    pages += _guides(root, LATER_GUIDES)
    return pages


def chinese_pages(root: Path, executed: list[Path], copies: Path) -> list[Page]:
    """The Chinese site's pages, in course order, from ``root``/zh/ (what ``streamlab translate`` builds): the learners'
    guide as the home page, then each lesson and lab, then the glossary. ``executed``: the English executed lessons;
    each is written to ``copies`` with its markdown cells replaced by the Chinese lesson's (the same cell ids), so the
    Chinese page shows the English run's outputs. Empty when there is no zh/."""
    import nbformat

    zh = root / "zh"
    if not (zh / "docs" / "learners.md").is_file():
        return []
    text = (zh / "docs" / "learners.md").read_text(encoding="utf-8")
    pages = [Page("index", first_heading(text, "从这里开始"), "home", "zh/docs/learners.md", markdown=text)]
    for page in course_pages(root, executed):
        if page.kind == "lesson" and (zh / page.repo_path).is_file():
            chinese = {cell.get("id"): cell.source for cell in nbformat.read(zh / page.repo_path, as_version=4).cells
                       if cell.cell_type == "markdown"}
            nb = nbformat.read(page.source, as_version=4)
            for cell in nb.cells:
                if cell.cell_type == "markdown" and cell.get("id") in chinese:
                    cell.source = chinese[cell.get("id")]
            copies.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, copies / page.source.name)
            pages.append(Page(page.slug, notebook_title(copies / page.source.name), "lesson", f"zh/{page.repo_path}",
                              source=copies / page.source.name, lab=page.lab))
        elif page.kind == "lab" and (zh / page.repo_path).is_file():
            pages.append(Page(page.slug, notebook_title(zh / page.repo_path), "lab", f"zh/{page.repo_path}",
                              source=zh / page.repo_path))
        elif page.kind == "glossary":  # one glossary, the articles' terms beside the English: its links to Chinese
            pages.append(Page(page.slug, page.title, "glossary", f"zh/{page.repo_path}", markdown=page.markdown))
    return pages


def _guides(root: Path, guides) -> list[Page]:
    found = []
    for slug, name, fallback in guides:
        if (root / name).is_file():
            text = (root / name).read_text(encoding="utf-8")
            found.append(Page(slug, first_heading(text, fallback), "guide", name, markdown=text))
    return found


def repository(root: Path, override: str | None = None) -> str:
    """The course's GitHub repository as ``owner/name``: ``override`` (the Pages workflow passes the
    repository it runs in), else pyproject.toml's ``[project.urls] Repository``."""
    if override:
        return override.strip().strip("/")
    urls = tomllib.loads((root / "pyproject.toml").read_text())["project"].get("urls", {})
    url = urls.get("Repository", "")
    match = re.match(r"https://github\.com/([^/]+/[^/]+?)/?$", url)
    if not match:
        raise ValueError("pyproject.toml's [project.urls] Repository is not a https://github.com/OWNER/NAME address")
    return match.group(1)


def repo_url(repo: str, path: str, ref: str = "HEAD") -> str:
    """The file (or folder, ending in /) ``path`` of the repository on GitHub."""
    kind = "tree" if path.endswith("/") or not path else "blob"
    return f"https://github.com/{repo}/{kind}/{ref}/{path.rstrip('/')}"


def binder_url(repo: str, path: str, ref: str = "HEAD") -> str:
    """Opens ``path`` of the repository in JupyterLab on Binder (built from binder/)."""
    from urllib.parse import quote

    return f"https://mybinder.org/v2/gh/{repo}/{ref}?labpath={quote(path, safe='')}"
