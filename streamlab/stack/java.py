"""Find a usable Java: Spark 4 and the Kafka broker both need a JDK 17 or newer.

``require_java()`` returns the path of ``java`` or raises ``JavaError`` with what to install;
the doctor (``streamlab.stack.doctor``) reports the same facts as a check instead of raising.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

SUPPORTED_JAVA = (17, 21)
# Only the quick JIT compiler (C1): for JVMs whose work is short or light (the course's broker, Kafka's
# tools, the Spark driver of a lesson, a course cluster's master, worker and executors). They start sooner and leave
# the cores to the rest.
QUICK_JIT = "-XX:TieredStopAtLevel=1"
# The serial garbage collector for a lesson's Spark driver (and the grader's, and a course cluster's JVMs): one
# thread, no concurrent work beside the program. Its heap is 1 GB and its data small; the default (G1 on a machine of
# 2 processors and 1792 MB or more, the HotSpot GC tuning guide's "Ergonomics") spends more CPU on collecting than
# such a driver needs. Lab 06's reference, run top to bottom on the idle 2-core machine, alternating: 58.2 and 58.8
# CPU-s against 65.2 and 66.4 (wall 51.5 s against 55.7 and 56.8); lab 05's 19.0 and 19.3 CPU-s against 21.3 and
# 23.8. A new session starts as soon (about 4 s either way).
SMALL_HEAP_GC = "-XX:+UseSerialGC"

JAVA_FIX = (
    "Install a JDK 17 (e.g. `sudo apt install openjdk-17-jdk`, `brew install openjdk@17`, "
    "or `conda install -c conda-forge openjdk=17`) and put it on PATH or set JAVA_HOME. "
    "Or use the Docker stack (docker/README.md), which brings its own Java."
)


class JavaError(RuntimeError):
    """No usable Java; the message says what to install."""


def find_java() -> str | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java`` when JAVA_HOME is set (None if it has no
    such file: Spark does not fall back to PATH then, so neither does the course), else the ``java`` on
    PATH, else None."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java = Path(java_home) / "bin" / "java"
        return str(java) if java.exists() else None
    return shutil.which("java")


def missing_java() -> str:
    """Why ``find_java()`` found none, in a learner's words."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        return (f"JAVA_HOME is {java_home}, which has no bin/java: Spark runs $JAVA_HOME/bin/java, so point "
                "JAVA_HOME at a JDK 17 or unset it to use the java on PATH.")
    return "No Java found (looked at JAVA_HOME and PATH)."


def java_version(java: str) -> int | None:
    """The major version of ``java`` (8 for "1.8.0_..."), or None if it cannot be run."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "([^"]+)"', out)
    return major_of(match.group(1)) if match else None


def major_of(version: str) -> int | None:
    """17 for "17.0.15", 8 for "1.8.0_392": the major version in a Java version string."""
    match = re.match(r"(\d+)(?:\.(\d+))?", version)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major


def require_java() -> str:
    """Path of a usable `java`, or a JavaError saying what to install."""
    java = find_java()
    if java is None:
        raise JavaError(missing_java() + " " + JAVA_FIX)
    version = java_version(java)
    if version is None:
        raise JavaError(f"Could not run `{java} -version`. " + JAVA_FIX)
    if version < 17:
        raise JavaError(f"{java} is Java {version}; Spark 4 needs Java 17. " + JAVA_FIX)
    return java
