"""The code is clean by the project's ruff rules (pyproject.toml, [tool.ruff]): run
`.venv/bin/python -m ruff check` to see the findings, `--fix` for the easy ones."""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ["."]  # everything but what pyproject.toml excludes: `ruff check` at the top finds the same


def test_ruff_is_configured_in_pyproject():
    ruff = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    assert ruff["line-length"] == 120
    assert {"E", "F", "W", "I", "B", "UP"} <= set(ruff["lint"]["select"])


def test_ruff_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                           *CHECKED], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "No module named ruff" not in proc.stderr, "ruff is pinned in requirements.txt: run `make setup`"
    assert proc.returncode == 0, f"ruff findings (fix them, or `ruff check --fix`):\n{proc.stdout}{proc.stderr}"
