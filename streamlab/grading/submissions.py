"""Finding what students handed in, and checking that it is a notebook at all.

Two layouts are understood: nbgrader's ``<student>/<lab>/<notebook>.ipynb`` (also inside a
``submitted/`` folder, i.e. an nbgrader course folder), and a flat folder of ``<student>.ipynb``
files, as downloaded from a learning platform (for labs with a single notebook).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .labs import GradingError, lab_notebooks


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


def student_id(raw: str, taken: set[str]) -> str:
    """A student id nbgrader accepts as a folder name, made from ``raw`` (a file or folder name),
    unique among ``taken`` (which it joins)."""
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
            submissions.append(Submission(student_id(student_dir.name, taken), files, lab_dir, extra))
        return submissions
    flat = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".ipynb")
    if flat and len(notebooks) != 1:
        raise GradingError(f"{lab} has {len(notebooks)} notebooks: use nbgrader's "
                           f"<student>/{lab}/<notebook>.ipynb layout for it")
    return [Submission(student_id(p.stem, taken), {notebooks[0]: p}, p) for p in flat]


MAX_NOTEBOOK_BYTES = 64 * 2**20  # far above any lab with its outputs


def check_notebook(path: Path) -> str | None:
    """Why ``path`` is not a readable Jupyter notebook, or None if it is one."""
    import nbformat

    if not path.is_file():
        return f"{path.name} is missing"
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        return f"{path.name} cannot be read as text ({type(err).__name__})"
    if len(raw) > MAX_NOTEBOOK_BYTES:
        return f"{path.name} is {len(raw) // 2**20} MB; a lab notebook is at most {MAX_NOTEBOOK_BYTES // 2**20} MB"
    try:
        data = json.loads(raw)
    except RecursionError:
        return f"{path.name} is JSON nested too deeply to be a notebook"
    except ValueError as err:
        return f"{path.name} is not JSON ({err})"
    if not isinstance(data, dict) or "cells" not in data or "nbformat" not in data:
        return f"{path.name} is JSON but not a Jupyter notebook"
    try:
        notebook = nbformat.reads(raw, as_version=4)
        nbformat.validate(notebook)
    except RecursionError:
        return f"{path.name} is nested too deeply to be a notebook"
    except Exception as err:  # nbformat raises several kinds of errors for broken notebooks
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"{path.name} is not a valid Jupyter notebook ({first})"
    return None
