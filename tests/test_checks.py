"""streamlab.checks: the doctor."""
from __future__ import annotations

import os
import subprocess
import sys

from streamlab import checks
from streamlab.checks import Check


def streamlab(*args, env=None, timeout=180):
    return subprocess.run([sys.executable, "-m", "streamlab", *args], capture_output=True, text=True,
                          timeout=timeout, env=env or os.environ.copy())


def test_doctor_passes_here(kafka_bootstrap):
    proc = streamlab("doctor", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "spark reads kafka  read 3 of 3 records" in proc.stdout


def test_report_shows_the_fix_of_each_failure():
    text = checks.report([Check("java", True, "Java 17 at /usr/bin/java"),
                          Check("kafka broker", False, "not started", "Run `streamlab kafka start`.")])
    assert text.splitlines() == [
        "ok  java          Java 17 at /usr/bin/java",
        "FAIL kafka broker  not started",
        "                   -> Run `streamlab kafka start`.",
    ]

