"""What students get: the course without its answer key (``streamlab release OUT``).

An instructor keeps this repository private (it holds ``solutions/``, every lab's ``hidden_checks.py``,
and ``tests/``, whose submissions include alternative solutions) and publishes what ``release`` writes:
the lessons, the student labs (generated afresh from ``solutions/`` by nbgrader), the ``streamlab``
package, the set-up files (Makefile, requirements, Docker, Binder) and the guides. Before it returns, it
reads every file it wrote and refuses the release (deleting it) if one holds a solution region of a lab,
a hidden test or a line of a hidden check.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from ..stack.paths import project_root
from .labs import GradingError, find_labs, release_labs, solutions_dir

# What students get, from the repository's top level (folders whole, less what IGNORED names).
RELEASED = ["notebooks", "zh", "streamlab", "docs", "docker", "binder", "Makefile", "requirements.txt",
            "environment.yml", "pyproject.toml", "nbgrader_config.py", "README.md", "CONTRIBUTING.md", "LICENSE",
            "LICENSE-CONTENT", ".dockerignore", ".gitignore", ".github/workflows/pages.yml"]
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info")
# Never in a release, wherever they are (the package's own grading/hidden_checks.py is the checks' runner,
# not a lab's checks: a lab's are found by their contents below).
FORBIDDEN_NAMES = {"solutions", "tests", "gradebook.db"}
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")  # in a notebook's cells
SOLUTION_REGION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
MIN_KEY_LINE = 24  # a hidden check's line this long or longer is distinctive enough to look for


class ReleaseError(GradingError):
    """The release would hand out part of the answer key; the message says which file and what."""


def release(out: Path, *, force: bool = False) -> list[Path]:
    """Write what students get into ``out`` (new, or replaced with ``force``); returns the files written."""
    out, course = Path(out), project_root().resolve()
    where = out.resolve()
    if where == course or course in where.parents and where.relative_to(course).parts[0] != "build":
        raise ReleaseError(f"{out} is inside the course: write the release elsewhere (or under build/)")
    if out.exists():
        if not force:
            raise ReleaseError(f"{out} exists: choose a new folder, or --force to replace it")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    try:  # a release that fails half-way leaves nothing behind
        for name in RELEASED:
            source = course / name
            if source.is_dir():
                shutil.copytree(source, out / name, ignore=IGNORED)
            elif source.is_file():
                (out / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, out / name)
        release_labs(target=out / "labs")  # the student versions, generated now from solutions/
        problems = answer_key_in(out)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    if problems:
        shutil.rmtree(out, ignore_errors=True)
        raise ReleaseError("the release would hand out the answer key, so it was not written:\n  "
                           + "\n  ".join(problems[:20]))
    return sorted(p for p in out.rglob("*") if p.is_file())


def answer_key(public: Path) -> tuple[list[str], list[str]]:
    """(each lab's solution regions, whitespace-normalised; the lines of the labs' hidden checks that are in
    no student lab, lesson or module of the package of ``public``, the release: those are public by
    definition, so a line shared with them is no secret)."""
    import nbformat

    regions, lines = [], []
    for lab in find_labs():
        for notebook in sorted((solutions_dir() / lab).glob("*.ipynb")):
            for cell in nbformat.read(notebook, as_version=4).cells:
                regions += [_normal(r) for r in SOLUTION_REGION.findall(cell.source) if len(_normal(r)) > 40]
        checks = solutions_dir() / lab / "hidden_checks.py"
        if checks.is_file():
            lines += [line.strip() for line in checks.read_text().splitlines()
                      if len(line.strip()) >= MIN_KEY_LINE and not line.strip().startswith(("#", "from ", "import "))]
    shown = "\n".join([*(_cells(p) for folder in ("labs", "notebooks") for p in (public / folder).rglob("*.ipynb")),
                       *(p.read_text() for p in (public / "streamlab").rglob("*.py"))])
    return regions, [line for line in dict.fromkeys(lines) if line not in shown]


def answer_key_in(folder: Path) -> list[str]:
    """Where ``folder`` holds part of the answer key: a forbidden name; nbgrader's markers in a notebook; a
    lab's solution region anywhere but the lessons (a lesson is public, whatever it shows); a line of a
    lab's hidden checks that nothing public shows (a checks file copied anywhere)."""
    regions, lines = answer_key(folder)
    found = []
    for path in sorted(folder.rglob("*")):
        where = path.relative_to(folder)
        if FORBIDDEN_NAMES & set(where.parts):
            found.append(f"{where}: never released")
            continue
        if not path.is_file():
            continue
        try:
            text = _cells(path) if path.suffix == ".ipynb" else path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError, ValueError):
            continue
        if path.suffix == ".ipynb":
            found += [f"{where}: nbgrader's marker {m!r}" for m in MARKERS if m in text]
        if where.parts[0] != "notebooks":
            normal = _normal(text)
            found += [f"{where}: a lab's solution" for region in regions if region in normal]
        found += [f"{where}: a hidden check's line {line[:60]!r}" for line in lines if line in text]
    return found


def _cells(path: Path) -> str:
    """A notebook's cells' sources, as text (its JSON escapes the newlines)."""
    import nbformat

    return "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)


def _normal(text: str) -> str:
    return " ".join(text.split())
