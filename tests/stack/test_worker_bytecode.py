"""streamlab.stack.worker_bytecode: Spark's Python workers load PySpark compiled, not compiled again each time."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from streamlab.stack import worker_bytecode


def _zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def _import_from(archive: Path, module: str) -> str:
    """What ``module`` from ``archive`` says, and the file it was loaded from, in a new Python that has only the
    archive on its path (as a Spark worker has pyspark.zip)."""
    code = (f"import sys; sys.path.insert(0, {str(archive)!r}); import {module} as m; "
            f"print(m.ANSWER, m.__file__.rsplit('/', 1)[-1])")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_a_compiled_zip_is_loaded_from_its_bytecode(tmp_path):
    archive = _zip(tmp_path / "pkg.zip", {"pkg/__init__.py": "ANSWER = 1\n", "pkg/mod.py": "ANSWER = 2\n",
                                          "pkg/tests/test_mod.py": "ANSWER = 3\n", "pkg/broken.py": "def (:\n"})
    assert not worker_bytecode.is_compiled(archive)
    assert _import_from(archive, "pkg.mod") == "2 mod.py", "before: compiled from source"

    assert worker_bytecode.compile_zip(archive) == 2, "two modules compiled; the tests and what does not compile not"
    assert worker_bytecode.is_compiled(archive)
    assert _import_from(archive, "pkg.mod") == "2 mod.pyc"
    assert _import_from(archive, "pkg") == "1 __init__.pyc"
    with zipfile.ZipFile(archive) as compiled:
        names = set(compiled.namelist())
    assert {"pkg/tests/test_mod.py", "pkg/broken.py"} <= names
    assert not {"pkg/tests/test_mod.pyc", "pkg/broken.pyc"} & names
    assert worker_bytecode.compile_zip(archive) == 0, "a second time adds nothing"


def test_bytecode_that_no_longer_matches_its_source_is_not_used(tmp_path):
    archive = _zip(tmp_path / "pkg.zip", {"pkg/__init__.py": "", "pkg/mod.py": "ANSWER = 2\n"})
    worker_bytecode.compile_zip(archive)
    with zipfile.ZipFile(archive) as old:
        entries = {name: old.read(name) for name in old.namelist()}
    entries["pkg/mod.py"] = b"ANSWER = 5\n"  # the source changed; its old bytecode stayed
    rewritten = tmp_path / "rewritten.zip"
    with zipfile.ZipFile(rewritten, "w") as archive_file:
        for name, data in entries.items():
            archive_file.writestr(name, data)
    assert _import_from(rewritten, "pkg.mod") == "5 mod.py", "the source, compiled again: its bytecode is stale"


def test_a_zip_that_cannot_be_written_is_left_as_it_is(tmp_path, monkeypatch):
    archive = _zip(tmp_path / "pyspark.zip", {"pyspark/__init__.py": "ANSWER = 1\n"})
    monkeypatch.setattr(worker_bytecode, "workers_zips", lambda: [archive])

    def read_only_folder(*args, **kwargs):  # what making the new zip beside it raises in a read-only install
        raise PermissionError(13, "Permission denied", str(tmp_path))

    monkeypatch.setattr(worker_bytecode.tempfile, "mkstemp", read_only_folder)
    monkeypatch.setattr(worker_bytecode, "workers_running", lambda: [])  # (other tests' Spark may run beside this)
    said = worker_bytecode.compile_workers_zips()
    assert len(said) == 1 and "left as it is (PermissionError" in said[0], said
    assert _import_from(archive, "pyspark") == "1 __init__.py", "the zip still works, from source"


def test_no_zip_is_replaced_while_a_spark_worker_runs(tmp_path, monkeypatch):
    archive = _zip(tmp_path / "pyspark.zip", {"pyspark/__init__.py": "ANSWER = 1\n"})
    monkeypatch.setattr(worker_bytecode, "workers_zips", lambda: [archive])
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-m", "pyspark.daemon"])
    try:  # a process with Spark's worker's command line: `python ... -m pyspark.daemon`
        assert worker.pid in worker_bytecode.workers_running()
        said = worker_bytecode.compile_workers_zips()
    finally:
        worker.kill()
        worker.wait()
    assert len(said) == 1 and "left as it is for now" in said[0], said
    assert not worker_bytecode.is_compiled(archive)
    monkeypatch.setattr(worker_bytecode, "workers_running", lambda: [])  # (other tests' Spark may run beside this)
    assert worker_bytecode.compile_workers_zips() == ["pyspark.zip: 1 modules compiled"], "once none runs"
    assert worker_bytecode.is_compiled(archive)


def test_spark_workers_load_pyspark_compiled(spark):
    """After the course's set-up (``streamlab fetch``), a Python worker of Spark's imports PySpark's bytecode."""
    def loaded_from(_):
        import pyspark
        return pyspark.__file__

    [where] = spark.sparkContext.parallelize([0], 1).map(loaded_from).collect()
    assert "pyspark.zip" in where and where.endswith(".pyc"), \
        (f"Spark's workers import PySpark from source ({where}): `.venv/bin/streamlab fetch --archives` compiles it, "
         f"when no Spark session runs")
