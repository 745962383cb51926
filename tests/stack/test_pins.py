"""One source of truth for the Python pins: requirements.txt. Everything else must agree with it."""
from __future__ import annotations

import re
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
import yaml

from streamlab.stack.pins import read_pins

ROOT = Path(__file__).resolve().parents[2]


def test_requirements_pin_every_package_exactly():
    lines = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    lines = [line for line in lines if line]
    pinned = r"[A-Za-z0-9_.\-]+==[^\s;]+( ; sys_platform == \"linux\")?"  # a Linux-only package may say so
    assert lines and all(re.fullmatch(pinned, line) for line in lines), lines


def test_curriculum_pins_hold():
    pins = read_pins()
    assert pins["pyspark"] == "4.3.0"
    assert int(pins["pandas"].split(".")[0]) < 3, "the course pins pandas 2 (pyspark 4.3 needs >= 2.2.0)"
    for needed in ("protobuf", "pyarrow", "kafka-python", "jupyterlab", "nbgrader", "pytest", "testcontainers"):
        assert needed in pins, needed
    assert pins["nbgrader"].startswith("0.9.") and pins["jupyterlab"].startswith("4.")


def test_environment_yml_pip_section_equals_requirements():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    pip_section = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    conda = [d for d in deps if isinstance(d, str)]
    assert "python=3.11" in conda and "openjdk=17" in conda
    pip_pins = {}
    for line in pip_section:
        name, _, pinned = line.split(";")[0].partition("==")
        pip_pins[name.strip().lower()] = pinned.strip()
    assert pip_pins == read_pins(), "environment.yml's pip section drifted from requirements.txt"


def test_pyproject_repeats_no_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == [], "pins belong in requirements.txt only"


@pytest.mark.parametrize("package,pinned", sorted(read_pins().items()))
def test_installed_version_matches_pin(package, pinned):
    try:
        installed = version(package)
    except PackageNotFoundError:
        pytest.fail(f"{package} is pinned but not installed: run `make setup`")
    assert installed == pinned


def test_reading_a_notebook_does_not_build_iri_parsers():
    """jsonschema 4.24+ imports rfc3987-syntax, which builds ~38 Earley parsers at import: seconds in
    every process that reads a notebook. Notebook schemas never use its `iri` formats."""
    import subprocess
    import sys

    probe = "import sys, nbformat, nbgrader.converters; print('rfc3987_syntax' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "False", proc.stdout + proc.stderr
