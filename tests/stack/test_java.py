"""streamlab.stack.java: finding a usable Java, and the message when there is none."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from streamlab.stack import java


def streamlab(*args, env=None, timeout=180):
    return subprocess.run([sys.executable, "-m", "streamlab", *args], capture_output=True, text=True,
                          timeout=timeout, env=env or os.environ.copy())


def fake_java(tmp_path, version_line: str):
    """A JAVA_HOME whose bin/java prints ``version_line`` as `java -version` does (on stderr)."""
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    (home / "bin" / "java").chmod(0o755)
    return home


@pytest.mark.parametrize("line,major", [
    ('openjdk version "17.0.12" 2024-07-16', 17),
    ('openjdk version "21" 2023-09-19', 21),
    ('java version "1.8.0_402"', 8),
    ("no version here", None),
])
def test_java_version_reads_the_major_version(tmp_path, line, major):
    home = fake_java(tmp_path, line)
    assert java.java_version(str(home / "bin" / "java")) == major


def test_java_home_wins_over_path(tmp_path, monkeypatch):
    home = fake_java(tmp_path, 'openjdk version "17.0.1"')
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert java.find_java() == str(home / "bin" / "java")
    assert java.require_java() == str(home / "bin" / "java")


def test_require_java_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(java.JavaError, match="No Java found.*JDK 17"):
        java.require_java()
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path, 'openjdk version "11.0.2"')))
    with pytest.raises(java.JavaError, match="Java 11; Spark 4 needs Java 17"):
        java.require_java()


def test_missing_java_gets_a_clear_message(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "KAFKA_BOOTSTRAP_SERVERS")}
    env.update(PATH=str(tmp_path), STREAMLAB_DATA_DIR=str(tmp_path / "data"))
    proc = streamlab("kafka", "start", env=env)
    assert proc.returncode == 2
    assert "No Java found" in proc.stderr and "JDK 17" in proc.stderr and "Traceback" not in proc.stderr
    doctor = streamlab("doctor", "--quick", env=env)
    assert doctor.returncode == 1 and "FAIL java" in doctor.stdout and "JDK 17" in doctor.stdout


def test_wrong_java_version_gets_a_clear_message(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "java").write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    (fake / "java").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    env.update(JAVA_HOME=str(tmp_path), STREAMLAB_DATA_DIR=str(tmp_path / "data"))
    proc = streamlab("kafka", "start", env=env)
    assert proc.returncode == 2 and "Java 11" in proc.stderr and "needs Java 17" in proc.stderr


def test_a_java_home_without_java_is_not_passed_over_for_path(tmp_path, monkeypatch):
    """Spark's launcher runs $JAVA_HOME/bin/java when JAVA_HOME is set and never falls back to PATH: the doctor
    said "Java 17 at /usr/bin/java" while sl.spark() died with JAVA_GATEWAY_EXITED."""
    from streamlab.stack import doctor

    monkeypatch.setenv("PATH", str(fake_java(tmp_path, 'openjdk version "17.0.1"').parent / "bin"))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk-here"))
    assert java.find_java() is None
    with pytest.raises(java.JavaError, match="JAVA_HOME is .*no-jdk-here, which has no bin/java"):
        java.require_java()
    check = doctor.examine_java()
    assert not check.ok and "no-jdk-here, which has no bin/java" in check.detail


@pytest.mark.parametrize("case", ["too old", "JAVA_HOME without java"])
def test_sl_spark_says_what_is_wrong_with_java_before_starting_spark(tmp_path, case):
    """A learner's first sl.spark() with Java 11 (or a JAVA_HOME that points nowhere) gets what to do, at once,
    instead of JAVA_GATEWAY_EXITED with the cause in a log file."""
    home = fake_java(tmp_path, 'openjdk version "11.0.2"') if case == "too old" else tmp_path / "nothing"
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_MASTER")}
    env.update(JAVA_HOME=str(home), STREAMLAB_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.run([sys.executable, "-c", "import streamlab as sl; sl.spark()"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    expected = "Java 11; Spark 4 needs Java 17" if case == "too old" else "which has no bin/java"
    assert last.startswith("streamlab.stack.java.JavaError:") and expected in last and "JDK 17" in last, last
    assert "JAVA_GATEWAY_EXITED" not in proc.stderr
