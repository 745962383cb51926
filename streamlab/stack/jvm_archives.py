"""Start-up archives: the course's JVMs map classes loaded and verified once instead of loading them again.

Most of a Spark driver's first seconds go to reading, parsing and verifying the same few thousand
classes from the same jars. Java's class-data sharing (CDS) writes those classes, already parsed,
into an archive file that the next JVM maps into memory at start. Each kind of JVM the course starts
has its own archive, in ``cache_dir()/archives/``:

============== ========================================================
spark-driver   ``sl.spark()``'s driver, local or on a cluster
spark-master   the local cluster's master (``streamlab cluster start``)
spark-worker   the local cluster's worker
spark-executor the local cluster's executors
kafka-broker   the native broker (and its storage formatting)
kafka-tools    Kafka's console tools (``streamlab kafka console ...``)
============== ========================================================

``streamlab fetch`` makes them (``streamlab.stack.make_archives``: each JVM goes through a representative
start). ``jvm_options(kind)`` gives the options a JVM of that kind starts with (``classpath(kind)`` is
what it runs on):

* an archive for this JDK and these jars exists: map it (``-XX:SharedArchiveFile``);
* none (a JDK update, new jars, a cache made before this code): the JVM runs as before and, on Java
  17 and 18, writes an archive when it exits (``-XX:ArchiveClassesAtExit``, to a ``.part`` file that
  the next start checks and renames); on Java 19 and newer the JVM does both itself
  (``-XX:+AutoCreateSharedArchive``). So the archives remake themselves; nothing is ever required.

An archive's file name carries a fingerprint of the JDK (its ``release`` file and ``libjvm.so``) and
of every jar on the classpath (path, size, modification time), so an archive never meets a JVM it
was not made for. If one still does not fit, the JVM ignores it, and says nothing: the course's JVMs
start with the CDS log off (``QUIET``), because a JVM warning on stderr lands in a notebook cell, and
nbgrader scores a test cell that writes to stderr zero.

``STREAMLAB_JVM_ARCHIVES=off`` starts every JVM without an archive (to compare, or to rule them out).
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from . import jars
from .java import find_java, java_version, major_of
from .local_files import local_files_jar
from .paths import cache_dir

KINDS = {
    "spark-driver": "the Spark driver (sl.spark(), local or on a cluster)",
    "spark-master": "the local Spark cluster's master",
    "spark-worker": "the local Spark cluster's worker",
    "spark-executor": "the local Spark cluster's executors",
    "kafka-broker": "the native Kafka broker",
    "kafka-tools": "Kafka's console tools",
}
# Nothing about the archive is ever printed: not when one is mapped, not when one does not fit.
QUIET = ("-Xlog:cds*=off", "-Xlog:class+path*=off")
DYNAMIC_MAGIC = bytes.fromhex("a8ab0bf0")  # 0xf00baba8, little-endian: a dynamic archive's first bytes
ABANDONED_AFTER_S = 15 * 60  # a .part still without its header this long after: its JVM died writing it


def enabled() -> bool:
    return os.environ.get("STREAMLAB_JVM_ARCHIVES", "on").lower() not in ("off", "0", "false", "no")


def folder() -> Path:
    return cache_dir() / "archives"


@functools.lru_cache(maxsize=8)
def _jdk(java: str) -> tuple[int | None, str]:
    """(major version, fingerprint) of the JDK behind ``java``: read from files, no JVM started
    (except to ask the version of a JDK without a ``release`` file)."""
    home = Path(os.path.realpath(java)).parent.parent
    release = home / "release"
    text = release.read_text(errors="replace") if release.exists() else ""
    match = re.search(r'^JAVA_VERSION="([^"]+)"', text, re.M)
    version = major_of(match.group(1)) if match else java_version(java)
    digest = hashlib.sha256(f"{home}\n{text}".encode())
    for libjvm in sorted(home.glob("lib/server/libjvm.so")) + sorted(home.glob("lib/server/classes*.jsa")):
        stat = libjvm.stat()
        digest.update(f"{libjvm} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return version, digest.hexdigest()


def classpath(kind: str) -> list[Path]:
    """The classpath a JVM of ``kind`` runs on, as its archive's fingerprint sees it (``folder/*`` for
    every jar of a folder): the one place that says it, for the JVMs that start and for the doctor."""
    spark = [jars.pyspark_jars_dir().resolve() / "*"]  # what bin/spark-class puts on every Spark JVM's classpath
    kafka = jars.jars("kafka")
    executor = [*spark, *(jars.connector_jars() if jars.is_cached("connector") else [])]
    # the session puts Janino's unsigned copies first, then the course's local file system (where javac made it)
    driver = [*jars.unsigned_spark_jars(make=False), *filter(None, [local_files_jar(make=False)]), *executor]
    return {"spark-driver": driver, "spark-master": spark, "spark-worker": spark, "spark-executor": executor,
            "kafka-broker": kafka, "kafka-tools": [*kafka, *jars.jars("tools")]}[kind]


def jars_of(classpath) -> list[Path]:
    """The files of a classpath (a list of paths, ``folder/*`` for every jar in a folder), in order."""
    found = []
    for entry in classpath:
        entry = Path(entry)
        if entry.name == "*":
            found.extend(sorted(entry.parent.glob("*.jar")))
        else:
            found.append(entry)
    return found


def fingerprint(kind: str, classpath, java: str) -> str:
    """16 hex digits that change when the JDK or any jar of ``classpath`` changes."""
    digest = hashlib.sha256(f"{kind}\n{_jdk(java)[1]}\n".encode())
    for jar in jars_of(classpath):
        try:
            stat = jar.stat()
            digest.update(f"{jar} {stat.st_size} {stat.st_mtime_ns}\n".encode())
        except OSError:
            digest.update(f"{jar} missing\n".encode())
    return digest.hexdigest()[:16]


def archive_file(kind: str, jars_on_path=None, java: str | None = None) -> Path | None:
    """Where the archive of ``kind`` for this JDK and its classpath (``classpath(kind)`` unless
    ``jars_on_path`` says otherwise) is, or will be; None without Java."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of JVM {kind!r}; choose one of {', '.join(KINDS)}")
    java = java or find_java()
    if java is None:
        return None
    jars_on_path = classpath(kind) if jars_on_path is None else jars_on_path
    return folder() / f"{kind}-{fingerprint(kind, jars_on_path, java)}.jsa"


def jvm_options(kind: str, jars_on_path=None, *, java: str | None = None, make: bool = True) -> list[str]:
    """The options a JVM of ``kind`` starts with: map its archive, or make it. Its classpath is
    ``classpath(kind)`` unless ``jars_on_path`` says otherwise.

    ``make=False`` only maps an existing archive (for a JVM that is not representative of its kind,
    such as the broker's storage formatting). Nothing is made where the cache is read-only (a graded
    submission's sandbox) or ``STREAMLAB_JVM_ARCHIVES=off``.
    """
    target = archive_file(kind, jars_on_path, java) if enabled() else None
    if target is None:
        return []
    version = _jdk(java or find_java())[0] or 17
    writable = make and _writable(target.parent)
    if version >= 19 and writable:  # the JVM checks, maps, and remakes a missing or unfit archive itself
        return ["-XX:+AutoCreateSharedArchive", f"-XX:SharedArchiveFile={target}", *QUIET]
    if target.exists() or (writable and promote(target)):
        return [f"-XX:SharedArchiveFile={target}", "-Xshare:auto", *QUIET]
    if writable:  # Java 17 and 18: the JVM writes its archive as it exits; the next start promotes it
        part = target.with_name(f"{target.stem}.{os.getpid()}-{secrets.token_hex(3)}.part")
        return [f"-XX:ArchiveClassesAtExit={part}", *QUIET]
    return []


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def is_complete(path: Path) -> bool:
    """True if a JVM finished writing the archive ``path``: it writes the header (the magic number
    first) last, after every region, so a file cut short by a killed JVM has none."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == DYNAMIC_MAGIC
    except OSError:
        return False


def promote(target: Path) -> bool:
    """Rename a complete ``.part`` of ``target`` (written by a JVM at its exit) to ``target``, and
    remove what it replaces: the archives of the same kind made for another JDK or other jars, parts
    of those, and parts abandoned by a JVM that died writing them. True if ``target`` now exists."""
    kind = target.name.rsplit("-", 1)[0]
    for part in sorted(target.parent.glob(f"{kind}-*.part"), key=_mtime, reverse=True):
        complete = is_complete(part)
        if complete and part.name.startswith(target.stem + ".") and not target.exists():
            os.replace(part, target)
        elif complete or time.time() - _mtime(part) > ABANDONED_AFTER_S:
            _remove(part)
    if target.exists():
        for old in target.parent.glob(f"{kind}-*.jsa"):
            if old != target:
                _remove(old)
    return target.exists()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


@dataclass
class ArchiveState:
    kind: str
    path: Path | None
    ready: bool
    size_mb: float = 0.0

    @property
    def detail(self) -> str:
        if self.path is None:
            return "no Java"
        if self.ready:
            return f"ready ({self.size_mb:.0f} MB)"
        return "missing for this JDK and these jars"


def state(kind: str) -> ArchiveState:
    """Whether ``kind``'s archive for this JDK and its classpath is ready (a complete part counts)."""
    target = archive_file(kind)
    if target is None:
        return ArchiveState(kind, None, False)
    if not target.exists() and _writable(target.parent):
        promote(target)
    if target.exists():
        return ArchiveState(kind, target, True, target.stat().st_size / 1e6)
    return ArchiveState(kind, target, False)
