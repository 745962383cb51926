"""Finding what students handed in, and checking that it is a notebook at all (and the lab's notebook).

Two layouts are understood: nbgrader's ``<student>/<lab>/<notebook>.ipynb`` (also inside a
``submitted/`` folder, i.e. an nbgrader course folder), and a flat folder of ``<student>.ipynb``
files, as downloaded from a learning platform (for labs with a single notebook).

Who a submission belongs to is its exact name: the file's name without ``.ipynb`` (flat layout), or the
student's folder (nbgrader's layout). That name is the student's id everywhere (grades.csv, the results,
the roster's match, the exports), so it is never rewritten: a name that is not a *plain name* (ASCII
letters, digits and ``_ . @ + -``, 1 to 100 characters, not starting with ``.`` or ``-``, no ``..``) is
refused instead, and so is anything in the folder that is not a regular file or folder (a symbolic link,
a FIFO, a socket, a device). A refused submission is still listed, with an id no plain name can take and
the reason (``Submission.refused``): the grader reports it as an invalid notebook without running or
even opening it.

Nothing here follows a link or opens anything but a regular file, and no file is read beyond
``bounds.NOTEBOOK_BYTES``: sizes are checked with ``lstat`` before a file is opened, and again on the
open file.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .. import bounds
from ..labs import FLAGS, GradingError, lab_notebooks, solutions_dir

SUFFIX = ".ipynb"
PLAIN_CHARS = re.compile(r"[A-Za-z0-9_.@+ -]+")
RULE = (f"a student's id is the exact file or folder name, so it may use only ASCII letters, digits, single "
        f"spaces and _ . @ + - (1 to {bounds.STUDENT_ID_CHARS} characters, not starting with . or - or a space, not "
        f"ending with a space, no ..): rename it and grade again")
# A refused name's id: '~' is not a plain name's character, so no student's own name can ever equal it.
REFUSED_PREFIX = "invalid~"


@dataclass
class Submission:
    student: str
    files: dict[str, Path]      # notebook name (without .ipynb) -> submitted file
    origin: Path                # what grades.csv names: the file or the student's folder
    extra: list[Path] = field(default_factory=list)   # e.g. nbgrader's timestamp.txt
    refused: str | None = None  # why this is no submission to run (its name, a link, ...): invalid from the start

    def sha256(self) -> str:
        """A hash of what was handed in, to know a submission graded before. Links are not followed and no
        file is read past ``bounds.NOTEBOOK_BYTES``: what cannot be read is hashed by what ``lstat`` says."""
        digest = hashlib.sha256()
        if self.refused:
            digest.update(b"refused: " + os.fsencode(self.refused))
        for name, path in sorted(self.files.items()):
            digest.update(name.encode())
            try:
                digest.update(read_submitted_file(path))
            except SubmissionRefused as refusal:
                digest.update(b"<" + os.fsencode(refusal.describe_for_hash) + b">")
        return digest.hexdigest()


# ----------------------------------------------------------------------------- names and kinds of files

def name_problem(raw: str) -> str | None:
    """Why ``raw`` (a file's name without ``.ipynb``, or a folder's name) is not a plain name, or None."""
    if not raw:
        return "it is empty"
    if len(raw) > bounds.STUDENT_ID_CHARS:
        return f"it is {len(raw)} characters long"
    odd = sorted({c for c in raw if not PLAIN_CHARS.fullmatch(c)})
    if odd:
        return "it contains " + ", ".join(f"{c!r} (U+{ord(c):04X})" for c in odd[:5])
    if raw[0] in ".- ":
        return f"it starts with {raw[0]!r}"
    if raw[-1] == " ":
        return "it ends with a space"
    if ".." in raw:
        return "it contains '..'"
    if "  " in raw:
        return "it contains two spaces in a row"
    return None


def refused_id(raw: str, taken: set[str]) -> str:
    """The id of a submission refused for its name ``raw``: ``invalid~`` and a hash of the name, unique among
    ``taken`` (which it joins). Never a plain name, so it cannot be, or become, another student's id."""
    digest = hashlib.sha256(os.fsencode(raw)).hexdigest()
    size = 12
    while REFUSED_PREFIX + digest[:size] in taken:
        size += 4
    taken.add(REFUSED_PREFIX + digest[:size])
    return REFUSED_PREFIX + digest[:size]


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is: ``file``, ``folder``, or a description of anything else."""
    for test, kind in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "folder"), (stat.S_ISLNK, "a symbolic link"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return kind
    return "a special file"


def _kind(path: Path) -> str | None:
    """What is at ``path`` (see ``kind_of``), without following a link; None when nothing is."""
    info = _lstat(path)
    return None if info is None else kind_of(info.st_mode)


def _not_a_submission(shown: str, kind: str) -> str:
    kind = "a folder" if kind == "folder" else kind
    return f"{shown!r} is {kind}: {kind} is not a submission (it is never followed or opened)"


class SubmissionRefused(ValueError):
    """A submitted file that is not read: missing, not a regular file, or too large. ``str()`` says why."""

    def __init__(self, reason: str, describe_for_hash: str):
        super().__init__(reason)
        self.describe_for_hash = describe_for_hash


def read_submitted_file(path: Path, limit: int | None = None) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` (default ``bounds.NOTEBOOK_BYTES``).

    ``lstat`` first: a missing file, a link, a FIFO, a device or a file over the limit raises
    SubmissionRefused without being opened. The file is then opened without following a link and without
    blocking, checked again on the open file (it may have been swapped meanwhile), and read no further than
    the limit."""
    limit = bounds.NOTEBOOK_BYTES if limit is None else limit
    info = _lstat(path)
    if info is None:
        raise SubmissionRefused(f"{path.name} is missing", "missing")
    kind = kind_of(info.st_mode)
    if kind != "file":
        raise SubmissionRefused(_not_a_submission(path.name, kind), kind)
    if info.st_size > limit:
        raise SubmissionRefused(_too_large(path.name, info.st_size, limit),
                                f"{info.st_size} bytes, {info.st_mtime_ns} ns")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise SubmissionRefused(f"{path.name} cannot be opened ({err.strerror})", "unopened") from err
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or opened.st_size > limit:
            raise SubmissionRefused(f"{path.name} changed while it was read", "changed")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, bounds.MB))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as err:
        raise SubmissionRefused(f"{path.name} cannot be read ({err.strerror})", "unreadable") from err
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise SubmissionRefused(_too_large(path.name, len(data), limit), f"more than {limit} bytes")
    return data


def _too_large(name: str, size: int, limit: int) -> str:
    def amount(n: int) -> str:
        return f"{n // bounds.MB} MB" if n >= bounds.MB else f"{n} bytes"

    return f"{name} is {amount(size)}; a lab notebook is at most {amount(limit)}"


# ----------------------------------------------------------------------------- finding submissions

def _identity(raw: str, taken: set[str]) -> tuple[str, str | None]:
    """(the student's id, why the name is refused or None) for the file or folder name ``raw``."""
    problem = name_problem(raw)
    if problem is None:
        taken.add(raw)
        return raw, None
    return refused_id(raw, taken), f"the name {raw!r} is not a plain name ({problem}): {RULE}"


def _entries(folder: Path) -> list[Path]:
    return sorted(folder / name for name in os.listdir(folder))


def _nested_folder(folder: Path, lab: str) -> Path | None:
    """Where nbgrader's ``<student>/<lab>/`` folders are: ``folder``, its ``submitted/`` folder (an nbgrader
    course folder), or None. Only real folders count: a link is never followed to find them."""
    def has_students(where: Path) -> bool:
        return any(_kind(entry) == "folder" and _kind(entry / lab) is not None for entry in _entries(where))

    submitted = folder / "submitted"
    if _kind(submitted) == "folder" and _kind(submitted / lab) is None and has_students(submitted):
        return submitted
    return folder if has_students(folder) else None


def _lab_folder(lab_dir: Path, shown: str, notebooks: list[str]) -> tuple[dict[str, Path], list[Path], list[str]]:
    """A student's ``<lab>/`` folder: (its notebooks, its timestamp.txt if any, why it is refused)."""
    files = {name: lab_dir / f"{name}{SUFFIX}" for name in notebooks}
    if len(notebooks) == 1 and _kind(files[notebooks[0]]) is None:
        others = [p for p in _entries(lab_dir) if p.name.endswith(SUFFIX)]
        if len(others) == 1:  # renamed by the student: graded anyway (the student is the folder's name)
            files = {notebooks[0]: others[0]}
    problems = []
    for path in files.values():
        kind = _kind(path)
        if kind not in (None, "file"):
            problems.append(_not_a_submission(f"{shown}/{path.name}", kind))
    timestamp = lab_dir / "timestamp.txt"
    kind = _kind(timestamp)
    if kind not in (None, "file"):
        problems.append(_not_a_submission(f"{shown}/{timestamp.name}", kind))
    return files, [timestamp] if kind == "file" else [], problems


def _nested(folder: Path, lab: str, notebooks: list[str]) -> list[Submission]:
    taken: set[str] = set()
    submissions = []
    for entry in _entries(folder):
        kind = _kind(entry)
        if kind is None or kind == "file":
            continue  # gone meanwhile, or a file beside the students' folders (a README)
        lab_kind = _kind(entry / lab) if kind == "folder" else None
        if kind == "folder" and lab_kind is None:
            continue  # another lab's, or nothing handed in
        student, name_refused = _identity(entry.name, taken)
        lab_dir = entry / lab
        files = {name: lab_dir / f"{name}{SUFFIX}" for name in notebooks}
        extra: list[Path] = []
        if kind != "folder":  # a link or a FIFO where a student's folder would be
            problems = [_not_a_submission(entry.name, kind)]
        elif lab_kind != "folder":
            problems = [_not_a_submission(f"{entry.name}/{lab}", lab_kind)]
        else:
            files, extra, problems = _lab_folder(lab_dir, f"{entry.name}/{lab}", notebooks)
        reasons = [r for r in [name_refused, *problems] if r]
        submissions.append(Submission(student, files, lab_dir, extra, "; ".join(reasons) or None))
    return submissions


def _flat(folder: Path, lab: str, notebooks: list[str]) -> list[Submission]:
    """Every ``<name>.ipynb`` in ``folder``, whatever it is (a link or a FIFO is refused, never opened);
    other names are not submissions and are left alone."""
    candidates = [p for p in _entries(folder) if p.name.endswith(SUFFIX) and p.name != SUFFIX]
    if candidates and len(notebooks) != 1:
        raise GradingError(f"{lab} has {len(notebooks)} notebooks: use nbgrader's "
                           f"<student>/{lab}/<notebook>.ipynb layout for it")
    taken: set[str] = set()
    submissions = []
    for path in candidates:
        kind = _kind(path)
        if kind is None:
            continue  # gone meanwhile
        student, name_refused = _identity(path.name[:-len(SUFFIX)], taken)
        problems = [] if kind == "file" else [_not_a_submission(path.name, kind)]
        reasons = [r for r in [name_refused, *problems] if r]
        submissions.append(Submission(student, {notebooks[0]: path}, path, [], "; ".join(reasons) or None))
    return submissions


def find_submissions(folder: Path, lab: str) -> list[Submission]:
    """Submissions in ``folder``: nbgrader's ``<student>/<lab>/`` layout (also inside a ``submitted/``
    subfolder), or a flat folder of ``<student>.ipynb`` files. Ids are exact names (never renamed: an odd
    name is refused, see the module's doc), so no two submissions share one."""
    folder = Path(folder)
    if not folder.is_dir():  # the folder itself is the instructor's choice: it may be a link
        raise GradingError(f"{folder} is not a folder")
    notebooks = lab_notebooks(lab)
    try:
        nested = _nested_folder(folder, lab)
        if nested is not None:
            return _nested(nested, lab, notebooks)
        return _flat(folder, lab, notebooks)
    except OSError as err:  # a folder the grader may not read: the instructor's to fix, not a student's
        raise GradingError(f"cannot read the submissions in {folder}: {err}") from err


# ----------------------------------------------------------------------------- checking a notebook

def check_notebook(path: Path, lab: str | None = None, name: str | None = None) -> str | None:
    """Why ``path`` is not a readable Jupyter notebook, or None if it is one.

    With ``lab`` (and ``name``, the lab's notebook, needed only when the lab has several), also why its
    nbgrader cells do not match the lab's (``check_grade_cells``)."""
    path = Path(path)
    try:
        data = read_submitted_file(path)
    except SubmissionRefused as refusal:
        return str(refusal)
    return check_notebook_bytes(data, path.name, source=lab_source(lab, name) if lab is not None else None)


def check_notebook_bytes(data: bytes, shown: str, *, source: Path | None = None) -> str | None:
    """``check_notebook`` for a file already read (``read_submitted_file``): ``shown`` is its name in the
    reasons; with ``source`` (the lab's notebook the grader's template is made from), its grade cells too. The
    grader reads each submitted file once and checks those bytes."""
    import nbformat

    try:
        raw = data.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"{shown} cannot be read as text ({type(err).__name__})"
    if (containers := bounds.json_containers(data)) > bounds.NOTEBOOK_CONTAINERS:
        return (f"{shown} holds {containers} JSON objects and arrays; a lab's notebook holds a few thousand "
                f"(at most {bounds.NOTEBOOK_CONTAINERS} are read)")
    try:
        parsed = json.loads(raw)
    except RecursionError:
        return f"{shown} is JSON nested too deeply to be a notebook"
    except ValueError as err:
        return f"{shown} is not JSON ({err})"
    if isinstance(parsed, dict) and "worksheets" in parsed and type(parsed.get("nbformat")) is int:
        return (f"{shown} is a Jupyter notebook in the old format {_cut(str(parsed['nbformat']))} (before 2015), which "
                f"the grader does not read: open it in JupyterLab and save it (JupyterLab saves format 4), or copy "
                f"your answers into a fresh copy of the lab")
    if not isinstance(parsed, dict) or "cells" not in parsed or "nbformat" not in parsed:
        return f"{shown} is JSON but not a Jupyter notebook"
    try:
        notebook = nbformat.reads(raw, as_version=4)
        nbformat.validate(notebook)
    except RecursionError:
        return f"{shown} is nested too deeply to be a notebook"
    except Exception as err:  # nbformat raises several kinds of errors for broken notebooks
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"{shown} is not a valid Jupyter notebook ({first})"
    if source is not None:
        problem = check_grade_cells(notebook, nbformat.read(source, as_version=4))
        if problem:
            return f"{shown}: {problem}"
    return None


def lab_source(lab: str, name: str | None = None) -> Path:
    """The lab's source notebook, ``solutions/<lab>/<name>.ipynb``: nbgrader's gradebook is made from it, and
    the released notebook students work in carries the same nbgrader cells."""
    if name is None:
        names = lab_notebooks(lab)
        if len(names) != 1:
            raise ValueError(f"{lab} has {len(names)} notebooks: say which one")
        name = names[0]
    return solutions_dir() / lab / f"{name}{SUFFIX}"


def _nbgrader(cell):
    """A cell's nbgrader metadata as it is (a dict, None, or whatever a student wrote there)."""
    return cell.get("metadata", {}).get("nbgrader")


def _role(meta: dict) -> str:
    return "test" if meta.get("grade") else "answer" if meta.get("solution") else "locked"


def _same_flag(value, lab_value: bool) -> bool:
    """A flag as nbgrader's schema has it, a JSON boolean, and the lab's (``"yes"``, ``1`` or ``null`` are not:
    nbgrader's checksum of a locked cell then differs from the lab's, and autograde fails)."""
    return isinstance(value, bool) and value == lab_value


def _cut(text: str) -> str:
    """Something a student wrote in a notebook's or a cell's metadata, cut to ``bounds.METADATA_SHOWN_CHARS`` for a
    reason's words."""
    return text if len(text) <= bounds.METADATA_SHOWN_CHARS else text[:bounds.METADATA_SHOWN_CHARS] + "..."


def _shown(value) -> str:
    """A value from a student's metadata, as JSON, cut."""
    return _cut(json.dumps(value, ensure_ascii=False, default=str))


@functools.cache
def _metadata_validator():
    """nbgrader's ``MetadataValidator``, made once: making one reads nbgrader's three schema files."""
    from nbgrader.nbgraderformat import MetadataValidator

    return MetadataValidator()


def nbgrader_refuses(meta: dict, lab_meta: dict, cell_type: str) -> str | None:
    """Why nbgrader would refuse (or fail on) one of the lab's cells with the nbgrader metadata ``meta``, or None.

    As nbgrader's autograde does: its ``OverwriteCells`` reads a test cell's points as a number and puts the
    lab's back when they differ, and puts the lab's checksum on every cell; then its ``CheckCellMetadata``
    validates the cell (``MetadataValidator``: nbgrader's JSON Schema, its schema version, its rules)."""
    import nbformat
    from nbgrader.nbgraderformat import SchemaTooNewError, SchemaTooOldError, ValidationError

    meta = dict(meta)
    if lab_meta.get("grade"):
        if "points" not in meta:
            return "it has no points"
        try:
            points = float(meta["points"])
        except (TypeError, ValueError, OverflowError):
            return f"its points are {_shown(meta['points'])}, not a number"
        if points != float(lab_meta["points"]):
            meta["points"] = float(lab_meta["points"])
    meta["checksum"] = lab_meta.get("checksum") or "0" * 32  # nbgrader's own, from its gradebook
    cell = nbformat.from_dict({"cell_type": cell_type, "source": "", "metadata": {"nbgrader": meta}})
    try:
        _metadata_validator().validate_cell(cell)
    except ValidationError as err:
        if err.path:   # jsonschema's words quote the value but not its key ("5 is not of type 'string'")
            return (f"nbgrader refuses its metadata (its {'.'.join(map(str, err.path))} is {_shown(err.instance)}; "
                    f"nbgrader's schema wants {err.validator} {_cut(json.dumps(err.validator_value, default=str))})")
        return _refusal(err)
    except (SchemaTooOldError, SchemaTooNewError, TypeError, KeyError) as err:
        return _refusal(err)   # nbgrader's own words, or a value of a type it cannot compare
    return None


def _refusal(err: Exception) -> str:
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return f"nbgrader refuses its metadata ({first[:bounds.METADATA_SHOWN_CHARS * 3]})"


def check_grade_cells(notebook, source_notebook) -> str | None:
    """Why ``notebook``'s nbgrader cells do not match the lab's ``source_notebook``, or None when they do: every
    notebook this lets through, nbgrader grades; every one it stops, nbgrader would refuse or fail on (a grader
    error, graded again by every run) or grade by the student's own "test".

    Each of the lab's test and locked cells (by ``grade_id``) must be there exactly once, with its flags
    (``grade``, ``solution``, ``locked``, ``task``), each the lab's JSON ``true`` or ``false``. A
    cell that claims a flag must carry one of the lab's grade ids, as text. And each of the lab's cells must
    be metadata nbgrader's own check accepts once nbgrader has put the lab's points and checksum back
    (``nbgrader_refuses``): a test cell's points a number, nbgrader's schema version, no key of its own.

    What nbgrader itself puts right is let through: a test cell's points, a locked cell's source and any lab
    cell's type (nbgrader grades with the lab's: an answer cell a stray keystroke made markdown runs as code); an
    answer cell (``solution`` only) missing (its tests then fail) or copied (the
    grader's ``DropUngradedMetadata`` keeps the last copy's metadata); a cell claiming no flag, whatever its
    metadata (the same step takes it off)."""
    lab_cells = {}
    for cell in source_notebook.cells:
        meta = _nbgrader(cell)
        if isinstance(meta, dict) and meta.get("grade_id") and any(meta.get(flag) for flag in FLAGS):
            lab_cells[meta["grade_id"]] = (cell.cell_type, meta)
    problems: list[str] = []
    seen: dict[str, int] = {}
    for index, cell in enumerate(notebook.cells, start=1):
        meta = _nbgrader(cell)
        if meta is None:
            continue
        if not isinstance(meta, dict):
            problems.append(f"cell {index}'s nbgrader metadata is not an object")
            continue
        grade_id = meta.get("grade_id")
        claims = [flag for flag in FLAGS if meta.get(flag)]
        if not (isinstance(grade_id, str) and grade_id in lab_cells):
            if claims:
                problems.append(f"cell {index} is marked {'/'.join(claims)} with "
                                + (f"the grade id {_cut(repr(grade_id))}, which the lab does not have"
                                   if isinstance(grade_id, str) and grade_id
                                   else f"a grade id that is not text ({_shown(grade_id)})" if grade_id is not None
                                   else "no grade id"))
            continue
        seen[grade_id] = seen.get(grade_id, 0) + 1
        lab_type, lab_meta = lab_cells[grade_id]
        role = _role(lab_meta)
        if seen[grade_id] == 2 and (lab_meta.get("grade") or lab_meta.get("locked")):
            problems.append(f"the lab's {role} cell {grade_id!r} appears more than once")
        flags = [flag for flag in FLAGS if not _same_flag(meta.get(flag, False), bool(lab_meta.get(flag)))]
        for flag in flags:
            problems.append(f"the lab's {role} cell {grade_id!r} has {flag}: {_shown(meta.get(flag, False))} "
                            f"(the lab's: {json.dumps(bool(lab_meta.get(flag)))})")
        if not flags and (refused := nbgrader_refuses(meta, lab_meta, lab_type)):
            problems.append(f"the lab's {role} cell {grade_id!r}: {refused}")
    for grade_id, (_, lab_meta) in lab_cells.items():
        if grade_id not in seen and (lab_meta.get("grade") or lab_meta.get("locked")):
            problems.append(f"the lab's {_role(lab_meta)} cell {grade_id!r} is missing")
    if not problems:
        return None
    more = f" (and {len(problems) - bounds.PROBLEMS_NAMED} more)" if len(problems) > bounds.PROBLEMS_NAMED else ""
    return ("its nbgrader cells differ from the lab's: " + "; ".join(problems[:bounds.PROBLEMS_NAMED]) + more
            + ". " + GRADE_CELLS_FIX)


GRADE_CELLS_FIX = ("The grader needs the lab's test and locked cells as the lab has them: undo the change to the "
                   "cell (or its metadata), or copy your answers into a fresh copy of the lab")

