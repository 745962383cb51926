"""The checks behind `streamlab doctor`: check that everything the course needs is here, and say how to fix what isn't.

Each check returns a ``Check`` (name, ok, detail, fix). ``run_checks()`` runs them all; the CLI
prints them as a table and notebook 00 shows them as a DataFrame.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SUPPORTED_JAVA = (17, 21)


class JavaError(RuntimeError):
    """No usable Java; the message says what to install."""


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def find_java() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def java_version(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 else major


JAVA_FIX = (
    "Install a JDK 17 (e.g. `sudo apt install openjdk-17-jdk`, `brew install openjdk@17`, "
    "or `conda install -c conda-forge openjdk=17`) and put it on PATH or set JAVA_HOME. "
    "Or use the Docker stack (docker/README.md), which brings its own Java."
)


def require_java() -> str:
    """Path of a usable `java`, or a JavaError saying what to install."""
    java = find_java()
    if java is None:
        raise JavaError("No Java found (looked at JAVA_HOME and PATH). " + JAVA_FIX)
    version = java_version(java)
    if version is None:
        raise JavaError(f"Could not run `{java} -version`. " + JAVA_FIX)
    if version < 17:
        raise JavaError(f"{java} is Java {version}; Spark 4 needs Java 17. " + JAVA_FIX)
    return java


def check_python() -> Check:
    ok = sys.version_info >= (3, 11)
    return Check("python", ok, f"{sys.version.split()[0]} at {sys.executable}",
                 "" if ok else "Use Python 3.11 (see environment.yml).")


def check_java() -> Check:
    java = find_java()
    if java is None:
        return Check("java", False, "not found on JAVA_HOME or PATH", JAVA_FIX)
    version = java_version(java)
    if version is None or version < 17:
        return Check("java", False, f"{java}: version {version}", JAVA_FIX)
    note = "" if version in SUPPORTED_JAVA else " (the course is tested on 17)"
    return Check("java", True, f"Java {version} at {java}{note}")


def check_pyspark() -> Check:
    try:
        import pyspark
    except ImportError:
        return Check("pyspark", False, "not installed", "Run `make setup` (or pip install -r requirements.txt).")
    from .pins import pinned_version

    want = pinned_version("pyspark")
    ok = pyspark.__version__ == want
    return Check("pyspark", ok, pyspark.__version__,
                 "" if ok else f"The course pins pyspark=={want}: run `make setup`.")


def check_connector() -> Check:
    from . import jars

    if not jars.is_cached("connector"):
        return Check("kafka connector", False, "not downloaded yet",
                     "Run `streamlab fetch` once with network access (make lab does it).")
    names = [j.name for j in jars.connector_jars()]
    return Check("kafka connector", True, ", ".join(n for n in names if "kafka" in n))


def check_memory() -> Check:
    import psutil

    free_gb = psutil.virtual_memory().available / 2**30
    ok = free_gb >= 2
    return Check("memory", ok, f"{free_gb:.1f} GiB available",
                 "" if ok else "Spark and Kafka need about 2 GiB: close other programs.")


def check_broker() -> Check:
    from . import kafka

    try:
        servers = kafka.bootstrap_servers(start=False)
    except kafka.NoBrokerError as err:
        return Check("kafka broker", False, str(err), "Run `streamlab kafka start`.")
    ok, detail = kafka.ping(servers)
    return Check("kafka broker", ok, f"{servers}: {detail}",
                 "" if ok else "Run `streamlab kafka status`; `streamlab kafka start` restarts a dead broker.")


def check_port(port: int = 9092) -> Check:
    from .broker import port_is_free, status

    state = status()
    if state.running and state.port == port:
        return Check(f"port {port}", True, "used by the course's broker")
    if port_is_free(port):
        return Check(f"port {port}", True, "free")
    return Check(f"port {port}", True, "taken by another program: the course's broker will pick another port")


def check_spark_reads_kafka(session=None) -> Check:
    """The end-to-end check: Spark, through the connector, reads records a Python client wrote."""
    from . import kafka

    try:
        spark_session = session
        if spark_session is None:
            from .session import spark as get_spark

            spark_session = get_spark()
        topic = kafka.new_topic("doctor", partitions=1)
        kafka.produce(topic, [{"check": i} for i in range(3)])
        rows = (spark_session.read.format("kafka")
                .option("kafka.bootstrap.servers", kafka.bootstrap_servers())
                .option("subscribe", topic).load().count())
        kafka.delete_topic(topic)
    except Exception as err:  # noqa: BLE001 - the doctor reports any failure
        return Check("spark reads kafka", False, f"{type(err).__name__}: {str(err).splitlines()[0][:200]}",
                     "Run `streamlab doctor` in a terminal for details.")
    ok = rows == 3
    return Check("spark reads kafka", ok, f"read {rows} of 3 records")


def run_checks(*, with_spark: bool = False, session=None) -> list[Check]:
    checks = [check_python(), check_java(), check_pyspark(), check_connector(), check_memory(),
              check_port(), check_broker()]
    if with_spark and all(c.ok for c in checks):
        checks.append(check_spark_reads_kafka(session))
    return checks


def report(checks: list[Check]) -> str:
    width = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        lines.append(f"{'ok ' if c.ok else 'FAIL'} {c.name:<{width}}  {c.detail}")
        if not c.ok and c.fix:
            lines.append(f"     {'':<{width}}  -> {c.fix}")
    return "\n".join(lines)

