"""Read the course's pins from requirements.txt, the single source of truth."""
from __future__ import annotations

import re
from pathlib import Path

from .paths import project_root


def requirements_file() -> Path:
    return project_root() / "requirements.txt"


def read_pins(path: Path | None = None) -> dict[str, str]:
    """{'pyspark': '4.3.0', ...} from lines like 'pyspark==4.3.0' (or 'bwrap-bin==0.11.0 ; sys_platform == "linux"')."""
    pins = {}
    for line in (path or requirements_file()).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        match = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)\s*==\s*([^\s;]+)(\s*;.*)?", line)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def pinned_version(package: str) -> str | None:
    try:
        return read_pins().get(package.lower())
    except FileNotFoundError:
        return None
