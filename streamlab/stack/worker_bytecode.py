"""Compiled PySpark for Spark's Python workers.

The processes Spark starts for Python code that runs inside a query (``transformWithState``, a Python UDF, the
``pyspark.daemon`` they are forked from) put ``$SPARK_HOME/python/lib/pyspark.zip`` first on their path, ahead of
the installed ``pyspark`` (``PythonWorkerFactory``; with pip's pyspark, ``SPARK_HOME`` is the package itself). The
zip holds source only, and Python never writes bytecode into a zip: every worker compiled each PySpark module it
imported, again and again (lab 06's reference, graded: 12 s of CPU in Python processes, Spark's workers and the
grader's own, before; 9 s after).

``compile_workers_zips()`` (``streamlab fetch``, so ``make setup``, the Docker image, and ``streamlab lab``) adds the
compiled module next to each source file in those zips, once. The bytecode is hash-checked: Python loads it only while
it matches the source beside it, and compiles the source as before otherwise (a newer pyspark writes new zips,
compiled again by the next ``streamlab fetch``). Where the zips cannot be written (a read-only install), nothing
changes but the speed.
"""
from __future__ import annotations

import importlib.util
import os
import tempfile
import warnings
import zipfile
from pathlib import Path

COMPILED = b"streamlab: the compiled modules beside their sources"  # the comment of a zip compiled here


def workers_zips() -> list[Path]:
    """The zips Spark puts first on its Python workers' path: pyspark's own, and py4j's."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return []
    lib = Path(next(iter(spec.submodule_search_locations))) / "python" / "lib"
    return sorted(lib.glob("pyspark.zip")) + sorted(lib.glob("py4j-*-src.zip"))


def is_compiled(path: Path) -> bool:
    """The zip at ``path`` was compiled here (its comment says so)."""
    with zipfile.ZipFile(path) as archive:
        return archive.comment == COMPILED


def _pyc(source: bytes, filename: str) -> bytes:
    """The bytecode of ``source`` as zipimport reads it: a hash-checked .pyc (PEP 552), valid while the source
    beside it in the zip is unchanged."""
    import _imp
    from importlib._bootstrap_external import _RAW_MAGIC_NUMBER, _code_to_hash_pyc

    code = compile(source, filename, "exec", dont_inherit=True)
    return bytes(_code_to_hash_pyc(code, _imp.source_hash(_RAW_MAGIC_NUMBER, source), checked=True))


def compile_zip(path: Path) -> int:
    """Write ``path`` again with the compiled module beside each of its source files (a file that does not compile,
    and the package's own tests, are left as source); returns how many were added. The new zip replaces the old
    one in one step."""
    path = Path(path)
    added = 0
    handle, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(handle)
    try:
        with zipfile.ZipFile(path) as old, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as new:
            names = set(old.namelist())
            new.comment = COMPILED
            for info in old.infolist():
                data = old.read(info)
                new.writestr(info, data)
                compiled = info.filename[:-3] + ".pyc"
                if not info.filename.endswith(".py") or compiled in names or "/tests/" in info.filename:
                    continue
                try:
                    with warnings.catch_warnings():  # a module's own SyntaxWarnings are the worker's to show
                        warnings.simplefilter("ignore")
                        pyc = _pyc(data, str(path / info.filename))
                except (SyntaxError, ValueError):
                    continue
                entry = zipfile.ZipInfo(compiled, date_time=info.date_time)
                entry.external_attr = info.external_attr
                new.writestr(entry, pyc, zipfile.ZIP_DEFLATED)
                added += 1
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return added


def workers_running() -> list[int]:
    """The process ids of Spark's Python workers running now (``python -m pyspark.daemon`` and the like)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        command = proc.info["cmdline"] or []
        if any(a == "-m" and b.startswith("pyspark.") for a, b in zip(command, command[1:])):
            found.append(proc.info["pid"])
    return found


def compile_workers_zips() -> list[str]:
    """Compile the workers' zips that are not compiled yet; returns what was done or why not, one line each.

    Not while a worker of Spark's runs: Python keeps a zip's table of contents from when it first read it, and a
    worker (or one forked from it) importing a module after the zip was replaced would read the new file where the
    old one had the module. The next ``streamlab fetch`` or ``streamlab lab`` compiles them."""
    done = []
    for path in workers_zips():
        try:
            if is_compiled(path):
                continue
            running = workers_running()
            if running:
                done.append(f"{path.name}: left as it is for now ({len(running)} of Spark's Python workers running)")
                continue
            done.append(f"{path.name}: {compile_zip(path)} modules compiled")
        except (OSError, zipfile.BadZipFile) as err:
            done.append(f"{path.name}: left as it is ({type(err).__name__}: {err})")
    return done
