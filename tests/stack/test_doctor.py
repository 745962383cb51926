"""streamlab.stack.doctor: the doctor."""
from __future__ import annotations

import os
import re
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



def test_report_in_chinese_names_this_machines_values_and_the_fix():
    text = doctor.report([Finding("java", True, "Java 17 at /usr/bin/java (the course is tested on 17)"),
                          Finding("kafka broker", False, "not started", "Run `streamlab kafka start`."),
                          Finding("port 9092", True, "free")], language="zh")
    assert text.splitlines() == [
        "ok  Java          Java 17，位于 /usr/bin/java（本课程在 17 上测试）",
        "FAIL Kafka broker  not started",                      # a library's own words stay as they are
        "                   -> 请运行 `streamlab kafka start`。",
        "ok  端口 9092     空闲",
    ]


def test_sl_doctor_in_a_chinese_notebook_speaks_chinese(monkeypatch):
    """In a notebook of the course in Chinese (JupyterLab gives the kernel its path), ``sl.doctor()``'s table says
    the findings in Chinese; elsewhere in English."""
    import streamlab as sl

    found = [Finding("port 9092", True, "free"), Finding("kafka broker", False, "x", "Run `streamlab kafka start`.")]
    monkeypatch.setattr(sl, "diagnose", lambda with_spark: found)
    monkeypatch.setenv("JPY_SESSION_NAME", "zh/notebooks/00_setup.ipynb")
    table = sl.doctor(with_spark=False)
    assert list(table["name"]) == ["端口 9092", "Kafka broker"] and list(table["detail"]) == ["空闲", "x"]
    assert table["fix"][1] == "请运行 `streamlab kafka start`。"
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/zh/course/notebooks/00_setup.ipynb")   # a folder named zh above
    assert list(sl.doctor(with_spark=False)["name"]) == ["port 9092", "kafka broker"]
    assert list(sl.doctor(with_spark=False, language="zh")["name"])[0] == "端口 9092"


# what the doctor passes on as it got it: a broker's answer, an error a library raised
SAID_AS_IT_CAME = {"{}: {}", "{}"}


def _sentences() -> list[str]:
    """Every sentence the doctor can say (its findings' names, details and fixes, JAVA_FIX, missing_java's), each
    value it fills in standing as "17"."""
    import ast
    import inspect

    from streamlab.stack import java

    def text(node) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
        if isinstance(node, ast.IfExp):
            return text(node.body) or text(node.orelse)
        return None

    found = [java.JAVA_FIX]
    for tree in (ast.parse(inspect.getsource(doctor)), ast.parse(inspect.getsource(java.missing_java))):
        for node in ast.walk(tree):
            call = isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Finding"
            said = isinstance(node, ast.Return) and isinstance(node.value, (ast.Constant, ast.JoinedStr))
            for value in (node.args[:1] + node.args[2:] if call else [node.value] if said else []):
                if (sentence := text(value)) not in (None, ""):
                    found.append(sentence)
    return found


def test_every_sentence_the_doctor_says_is_said_in_chinese_too():
    """A new sentence in English without its Chinese fails here: add its line to doctor.IN_CHINESE."""
    sentences = _sentences()
    assert len(sentences) > 30
    untold = [s for s in sentences if s not in SAID_AS_IT_CAME
              and not any(re.fullmatch(p, s.replace("{}", "17"), re.S) for p, _ in doctor.IN_CHINESE)]
    assert untold == []


def test_the_doctor_reports_the_start_up_archives(tmp_path, monkeypatch):
    """Here they are ready (`make setup` made them); in an empty cache each kind is missing, with the fix,
    and that is advice, not a failure."""
    assert doctor.examine_archives().detail.startswith("ready for 6 kinds of JVM"), doctor.examine_archives()
    (tmp_path / "jars").symlink_to(cache_dir() / "jars")
    monkeypatch.setenv("STREAMLAB_CACHE_DIR", str(tmp_path))
    missing = doctor.examine_archives()
    assert missing.ok and "missing for this JDK and these jars: spark-driver," in missing.detail, missing
    assert "streamlab fetch --archives" in doctor.report([missing])
