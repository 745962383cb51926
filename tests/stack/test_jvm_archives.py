"""streamlab.stack.jvm_archives: the JVMs' start-up archives are made, found, remade when the JDK or the
jars change, and never print a word.

The real-JVM tests run Kafka's storage tool (``kafka.tools.StorageTool random-uuid``: a second's JVM
that prints one line) on the broker's jars, with an archive folder of their own.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from streamlab.stack import jars, jvm_archives
from streamlab.stack.java import find_java, java_version
from streamlab.stack.jvm_archives import DYNAMIC_MAGIC, jvm_options
from streamlab.stack.paths import cache_dir

MAIN = ["kafka.tools.StorageTool", "random-uuid"]


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """An empty cache folder, with the real jars in it (a link): the archives start from nothing."""
    jars.fetch("kafka", quiet=True)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "jars").symlink_to(cache_dir() / "jars")
    monkeypatch.setenv("STREAMLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STREAMLAB_JVM_ARCHIVES", raising=False)
    return tmp_path / "cache"


def kafka_classpath() -> list[Path]:
    found = jars.fetch("kafka", quiet=True)
    assert found, "the broker's jars are fetched by `make setup`"
    return found


def run(java: str, options: list[str], classpath: list[Path]) -> subprocess.CompletedProcess:
    cp = os.pathsep.join(str(p) for p in classpath)
    return subprocess.run([java, *options, "-cp", cp, *MAIN], capture_output=True, text=True, timeout=120)


def assert_only_the_programs_output(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == "", proc.stderr
    assert len(proc.stdout.split()) == 1, f"only the uuid, not a JVM notice: {proc.stdout!r}"


@pytest.mark.slow
def test_an_archive_is_made_at_exit_then_mapped(own_cache):
    java, classpath = find_java(), kafka_classpath()
    if java_version(java) >= 19:
        pytest.skip("this JDK makes its archive itself (-XX:+AutoCreateSharedArchive): see the next test")
    first = jvm_options("kafka-tools", classpath, java=java)
    assert any(o.startswith("-XX:ArchiveClassesAtExit=") for o in first), first
    assert_only_the_programs_output(run(java, first, classpath))
    target = jvm_archives.archive_file("kafka-tools", classpath, java)
    assert not target.exists(), "the JVM writes a .part; the next start checks it and renames it"

    second = jvm_options("kafka-tools", classpath, java=java)
    assert f"-XX:SharedArchiveFile={target}" in second and target.exists()
    assert not list(target.parent.glob("*.part"))
    # -Xshare:on makes a JVM refuse to start unless it maps the archive: it does, and says nothing
    assert_only_the_programs_output(run(java, [*second, "-Xshare:on"], classpath))
    assert_only_the_programs_output(run(java, second, classpath))


@pytest.mark.slow
def test_new_jars_get_a_new_archive_and_the_old_one_is_ignored_silently(own_cache, tmp_path):
    java, classpath = find_java(), kafka_classpath()
    if java_version(java) >= 19:
        pytest.skip("covered on Java 17, the course's JDK; 19+ checks its archive itself")
    run(java, jvm_options("kafka-tools", classpath, java=java), classpath)
    old = jvm_options("kafka-tools", classpath, java=java)
    old_archive = jvm_archives.archive_file("kafka-tools", classpath, java)
    assert old_archive.exists()

    # a new version of one jar (here: the same bytes, a new file): the JVM would refuse the old archive
    changed = tmp_path / "new-jars" / classpath[0].name
    changed.parent.mkdir()
    shutil.copy2(classpath[0], changed)
    os.utime(changed, (1_600_000_000, 1_600_000_000))
    new_classpath = [changed, *classpath[1:]]
    assert jvm_archives.archive_file("kafka-tools", new_classpath, java) != old_archive
    # ... and does, without a word (the old archive's options on the new classpath)
    assert_only_the_programs_output(run(java, old, new_classpath))
    # the new classpath's JVM makes its own archive, which replaces the old one
    remake = jvm_options("kafka-tools", new_classpath, java=java)
    assert any(o.startswith("-XX:ArchiveClassesAtExit=") for o in remake)
    assert_only_the_programs_output(run(java, remake, new_classpath))
    assert "-Xshare:auto" in jvm_options("kafka-tools", new_classpath, java=java)
    assert not old_archive.exists(), "an archive made for other jars is removed when its successor arrives"


def test_a_part_cut_short_is_never_used(own_cache):
    """A JVM writes its archive's header last: a .part without one (a JVM killed while writing) is not
    renamed; a complete one is."""
    java, classpath = find_java(), kafka_classpath()
    target = jvm_archives.archive_file("kafka-broker", classpath, java)
    target.parent.mkdir(parents=True)
    cut_short = target.with_name(target.stem + ".1-aaaaaa.part")
    cut_short.write_bytes(b"\0" * 4096)
    assert not jvm_archives.promote(target) and cut_short.exists(), "still being written, maybe"
    os.utime(cut_short, (0, 0))
    assert not jvm_archives.promote(target) and not cut_short.exists(), "abandoned long ago: removed"

    complete = target.with_name(target.stem + ".2-bbbbbb.part")
    complete.write_bytes(DYNAMIC_MAGIC + b"\0" * 4092)
    assert jvm_archives.promote(target) and target.exists() and not complete.exists()


def test_jvms_that_must_not_make_one_do_not(own_cache, monkeypatch):
    java, classpath = find_java(), kafka_classpath()
    assert jvm_options("kafka-broker", classpath, java=java, make=False) == [], "nothing to map, nothing made"
    monkeypatch.setenv("STREAMLAB_JVM_ARCHIVES", "off")
    assert jvm_options("kafka-broker", classpath, java=java) == []


def test_the_fingerprint_follows_the_jdk_and_every_jar(tmp_path):
    jar = tmp_path / "lib" / "a.jar"
    jar.parent.mkdir()
    jar.write_bytes(b"jar")
    homes = []
    for version in ("17.0.15", "17.0.16"):
        home = tmp_path / f"jdk-{version}"
        (home / "bin").mkdir(parents=True)
        (home / "bin" / "java").write_text("")
        (home / "release").write_text(f'JAVA_VERSION="{version}"\n')
        homes.append(str(home / "bin" / "java"))
    print_ = jvm_archives.fingerprint
    assert print_("kafka-tools", [jar], homes[0]) != print_("kafka-tools", [jar], homes[1]), "a JDK update"
    assert print_("kafka-tools", [jar], homes[0]) != print_("kafka-broker", [jar], homes[0]), "another kind"
    before = print_("kafka-tools", [jar.parent / "*"], homes[0])
    assert before == print_("kafka-tools", [jar], homes[0]), "folder/* is every jar of the folder"
    jar.write_bytes(b"a new jar")
    assert print_("kafka-tools", [jar], homes[0]) != before


def newer_jdk() -> str | None:
    for java in sorted(glob.glob("/usr/lib/jvm/*/bin/java")):
        version = java_version(java)
        if version and version >= 19:
            return java
    return None


@pytest.mark.skipif(newer_jdk() is None, reason="needs a JDK 19 or newer in /usr/lib/jvm "
                                                 "(e.g. `apt-get install -y openjdk-21-jdk-headless`)")
@pytest.mark.slow
def test_a_newer_jdk_makes_and_checks_its_archive_itself(own_cache):
    java, classpath = newer_jdk(), kafka_classpath()
    options = jvm_options("kafka-tools", classpath, java=java)
    target = jvm_archives.archive_file("kafka-tools", classpath, java)
    assert options[:2] == ["-XX:+AutoCreateSharedArchive", f"-XX:SharedArchiveFile={target}"]
    assert_only_the_programs_output(run(java, options, classpath))
    assert jvm_archives.is_complete(target)
    assert_only_the_programs_output(run(java, options, classpath))
