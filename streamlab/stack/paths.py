"""Where the course keeps things on disk.

* ``cache_dir()``  jars resolved from Maven Central (kept between runs, so later runs work offline)
* ``data_dir()``   the native broker's data and log, and every checkpoint the course creates

Both live in ignored folders of the project unless ``STREAMLAB_CACHE_DIR`` /
``STREAMLAB_DATA_DIR`` say otherwise (the Docker image and the Spark cluster profile set them).
"""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # streamlab/, above this room


def project_root() -> Path:
    """The course repository (the folder holding requirements.txt), or the current folder."""
    candidate = PACKAGE_DIR.parent
    if (candidate / "requirements.txt").exists():
        return candidate
    return Path.cwd()


def cache_dir() -> Path:
    path = Path(os.environ.get("STREAMLAB_CACHE_DIR") or project_root() / ".cache")
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir() -> Path:
    path = Path(os.environ.get("STREAMLAB_DATA_DIR") or project_root() / ".streamlab")
    path.mkdir(parents=True, exist_ok=True)
    return path
