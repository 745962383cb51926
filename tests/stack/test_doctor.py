"""streamlab.stack.doctor: the doctor."""
from __future__ import annotations

import os
import subprocess
import sys

from streamlab import cli
from streamlab.stack import doctor
from streamlab.stack.doctor import Finding
from streamlab.stack.paths import cache_dir


def streamlab(*args, env=None, timeout=180):
    return subprocess.run([sys.executable, "-m", "streamlab", *args], capture_output=True, text=True,
                          timeout=timeout, env=env or os.environ.copy())


def test_doctor_passes_here(spark, capsys):
    """The whole doctor, Spark reading Kafka included, on the test run's Spark (the check uses the
    running session, as in a notebook: ``sl.spark()`` hands it back)."""
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "spark reads kafka  read 3 of 3 records" in out and "All checks passed." in out, out


def test_doctor_command_runs_in_a_fresh_process(kafka_bootstrap):
    """`streamlab doctor` as a learner types it (without the Spark check, which a second Spark would
    make slow; the test above runs it)."""
    proc = streamlab("doctor", "--quick")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok  kafka broker" in proc.stdout and "spark reads kafka" not in proc.stdout, proc.stdout


def test_report_shows_the_fix_of_each_failure():
    text = doctor.report([Finding("java", True, "Java 17 at /usr/bin/java"),
                          Finding("kafka broker", False, "not started", "Run `streamlab kafka start`.")])
    assert text.splitlines() == [
        "ok  java          Java 17 at /usr/bin/java",
        "FAIL kafka broker  not started",
        "                   -> Run `streamlab kafka start`.",
    ]



def test_the_doctor_reports_the_start_up_archives(tmp_path, monkeypatch):
    """Here they are ready (`make setup` made them); in an empty cache each kind is missing, with the fix,
    and that is advice, not a failure."""
    assert doctor.examine_archives().detail.startswith("ready for 6 kinds of JVM"), doctor.examine_archives()
    (tmp_path / "jars").symlink_to(cache_dir() / "jars")
    monkeypatch.setenv("STREAMLAB_CACHE_DIR", str(tmp_path))
    missing = doctor.examine_archives()
    assert missing.ok and "missing for this JDK and these jars: spark-driver," in missing.detail, missing
    assert "streamlab fetch --archives" in doctor.report([missing])
