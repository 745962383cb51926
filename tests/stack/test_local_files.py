"""streamlab.stack.local_files: Hadoop's local file system without a chmod process per file, compiled once."""
from __future__ import annotations

import os
import subprocess
import zipfile

import pytest

from streamlab.stack import local_files


@pytest.mark.slow
def test_the_jar_is_compiled_once_into_the_cache_for_every_jvm_to_read(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMLAB_CACHE_DIR", str(tmp_path / "cache"))
    assert local_files.local_files_jar(make=False) is None, "nothing is made unless asked"

    jar = local_files.local_files_jar()
    assert jar is not None and jar.parent.parent == tmp_path / "cache" / "jars"
    with zipfile.ZipFile(jar) as made:
        assert set(made.namelist()) == {"streamlab/CourseLocalFileSystem.class",
                                        "streamlab/CourseLocalFileSystem$Raw.class"}
    assert oct(jar.parent.stat().st_mode & 0o777) == "0o755", "readable by a sandboxed kernel's user"
    assert oct(jar.stat().st_mode & 0o777) == "0o644"
    assert not list(jar.parent.parent.glob(".local-files-*")), "no work folder left behind"

    made_at = jar.stat().st_mtime_ns
    monkeypatch.setattr(subprocess, "run", _no_process)
    assert local_files.local_files_jar() == jar == local_files.local_files_jar(make=False)
    assert jar.stat().st_mtime_ns == made_at, "made once"


def test_a_java_runtime_without_javac_leaves_spark_with_hadoops_own(tmp_path, monkeypatch):
    runtime = tmp_path / "jre" / "bin"
    runtime.mkdir(parents=True)
    (runtime / "java").write_text("#!/bin/sh\n")
    (runtime / "java").chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jre"))
    monkeypatch.setenv("STREAMLAB_CACHE_DIR", str(tmp_path / "cache"))
    assert local_files.local_files_jar() is None
    assert not (tmp_path / "cache" / "jars").exists() or not os.listdir(tmp_path / "cache" / "jars"), "nothing made"


@pytest.mark.slow
def test_a_source_that_does_not_compile_is_tried_once_and_its_error_kept(tmp_path, monkeypatch):
    broken = tmp_path / "CourseLocalFileSystem.java"
    broken.write_text("package streamlab; public class CourseLocalFileSystem extends Nothing {}\n")
    monkeypatch.setattr(local_files, "SOURCE", broken)
    monkeypatch.setenv("STREAMLAB_CACHE_DIR", str(tmp_path / "cache"))
    assert local_files.local_files_jar() is None
    (failed,) = (tmp_path / "cache" / "jars").glob("local-files-*.failed")
    assert "Nothing" in failed.read_text(), "javac's own words are kept"
    assert not list((tmp_path / "cache" / "jars").glob(".local-files-*")), "no work folder left behind"
    monkeypatch.setattr(subprocess, "run", _no_process)
    assert local_files.local_files_jar() is None, "not tried again at every start"


def test_without_a_writable_cache_spark_keeps_hadoops_own(tmp_path, monkeypatch):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "jars").write_text("a file where the folder would go")  # fails even for root
    monkeypatch.setenv("STREAMLAB_CACHE_DIR", str(tmp_path / "cache"))
    assert local_files.local_files_jar() is None


def _no_process(*args, **kwargs):
    raise AssertionError(f"no process expected: {args[0] if args else kwargs}")
