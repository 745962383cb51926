"""One meaning per word across the package (CONTRIBUTING.md, "One meaning per word"): a *check* is only ever one of
the grader's hidden checks, a list of their results is *verdicts*, what the doctor finds is a *finding*, and a number
the grader sets is a *bound* (never a cap)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import streamlab

PACKAGE = Path(streamlab.__file__).parent


def _definitions() -> list[tuple[str, str]]:
    """(module path, name) of every class and function the package defines, at any depth."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((str(path.relative_to(PACKAGE)), node.name))
    return found


def test_check_and_run_checks_are_only_the_hidden_checks():
    where = {name: sorted(path for path, defined in _definitions() if defined == name)
             for name in ("Check", "run_checks")}
    assert where == {"Check": ["grading/hidden_checks.py"], "run_checks": ["grading/hidden_checks.py"]}


def test_the_doctor_finds_and_does_not_check():
    names = [name for path, name in _definitions() if path == "stack/doctor.py"]
    assert "Finding" in names and "diagnose" in names
    assert [name for name in names if "check" in name.lower()] == []


def test_no_outcomes_and_no_caps_in_the_grader():
    said = []
    for path in sorted((PACKAGE / "grading").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\boutcomes\b|\bcap(s|ped)?\b", line):
                said.append(f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}")
    assert said == [], "verdicts (a list of CheckResult) and bound (a number the grader sets):\n" + "\n".join(said)

