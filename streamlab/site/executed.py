"""The lessons, executed once: the notebook tests keep every lesson they run, and the site is built
from those copies.

    build/executed/NN_<name>.ipynb    a lesson with its outputs, and the hash of the notebook it ran from

``run_lesson`` is the one way a lesson is executed (a fresh kernel, top to bottom, in the notebook's
folder); ``tests/test_notebooks.py`` uses it and ``save``s what passed; ``streamlab site`` executes only
the lessons with no current copy (never run, or changed since), through the same two functions.
"""
from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from ..stack.paths import project_root

CELL_TIMEOUT = 300  # seconds a cell may run before the lesson counts as failed
SOURCE_KEY = "executed_from_sha256"  # in the copy's metadata["streamlab"]: the hash of the notebook it ran from


def build_dir() -> Path:
    """Where the course's build outputs go (ignored by git): ``build/``, or ``STREAMLAB_BUILD_DIR``."""
    return Path(os.environ.get("STREAMLAB_BUILD_DIR") or project_root() / "build")


def executed_dir() -> Path:
    return build_dir() / "executed"


def lessons(root: Path | None = None) -> list[Path]:
    """The course's lessons, in course order: notebooks/NN_<name>.ipynb (NNb_<name>: a second lesson)."""
    return sorted(((root or project_root()) / "notebooks").glob("[0-9][0-9]*_*.ipynb"))


def source_hash(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def executed_copy(source: Path) -> Path:
    return executed_dir() / Path(source).name


def is_current(source: Path) -> bool:
    """A copy exists and was executed from the notebook as it is now."""
    import nbformat

    copy = executed_copy(source)
    if not copy.exists():
        return False
    try:
        nb = nbformat.read(copy, as_version=4)
    except Exception:  # noqa: BLE001 - a damaged copy is as good as none
        return False
    return nb.metadata.get("streamlab", {}).get(SOURCE_KEY) == source_hash(source)


def run_lesson(source: Path, timeout: int = CELL_TIMEOUT):
    """Execute a lesson top to bottom on a fresh kernel, in its own folder; returns the notebook with
    its outputs. A cell that raises (or runs longer than ``timeout`` s) raises here."""
    import nbformat

    nb = nbformat.read(source, as_version=4)
    lesson_client(nb, Path(source).parent, timeout).execute()
    nb.metadata.setdefault("streamlab", {})[SOURCE_KEY] = source_hash(source)
    return nb


def lesson_client(nb, folder: Path, timeout: int = CELL_TIMEOUT):
    """An nbclient ``NotebookClient`` for ``nb`` on a fresh ``python3`` kernel in ``folder``; ``execute()`` starts the
    kernel and shuts it down. The kernel talks over IPC files in a folder of its own, not TCP ports: jupyter_client
    picks free ports and the kernel binds them later, and on a busy machine another process took one in between
    (the kernel died before it replied, "ZMQError: Address already in use")."""
    import shutil
    import tempfile
    import weakref

    from nbclient import NotebookClient
    from traitlets.config import Config

    sockets = tempfile.mkdtemp(prefix="streamlab-kernel-")  # short: an IPC path has at most 107 bytes
    # Configured, not handed a KernelManager: a client given one does not own it, and leaves the kernel (and its
    # Spark driver) running after execute().
    ipc = Config({"KernelManager": {"transport": "ipc", "ip": str(Path(sockets) / "kernel")}})
    client = NotebookClient(nb, config=ipc, kernel_name="python3", timeout=timeout, allow_errors=False,
                            resources={"metadata": {"path": str(folder)}})
    weakref.finalize(client, shutil.rmtree, sockets, True)
    return client


def save(nb, source: Path) -> Path:
    """Keep an executed lesson for the site (written whole, then renamed: a reader never sees half)."""
    import nbformat

    target = executed_copy(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    nbformat.write(nb, partial)
    partial.replace(target)
    return target


def ensure_executed(sources: list[Path] | None = None, say: Callable[[str], None] = print) -> list[Path]:
    """Execute the lessons that have no current copy (in course order) and keep them; returns every copy."""
    sources = lessons() if sources is None else sources
    for source in sources:
        if is_current(source):
            continue
        say(f"executing {source.name} (no current copy in {executed_dir()}) ...")
        started = time.monotonic()
        save(run_lesson(source), source)
        say(f"  {source.name}: {time.monotonic() - started:.0f} s")
    return [executed_copy(source) for source in sources]
