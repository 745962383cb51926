"""How the course opens JupyterLab: for a learner (``streamlab lab``, ``make lab``) or an instructor
(``streamlab lab --instructor``, ``make lab-instructor``).

A learner's JupyterLab keeps nbgrader's *Validate* button and its assignment list, and leaves out the
instructor's tools: the formgrader, the course list and the "Create Assignment" panel. That is a
Jupyter configuration folder of the course's own (``streamlab/conf/jupyter-learner/``: nbgrader's
instructor plugins disabled in ``labconfig/page_config.json``, their server extensions in
``jupyter_server_config.json``), added in front of ``JUPYTER_CONFIG_PATH`` for this JupyterLab only:
your own Jupyter configuration (``~/.jupyter``) is neither read differently nor changed.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from .paths import PACKAGE_DIR

LEARNER_CONFIG = PACKAGE_DIR / "conf" / "jupyter-learner"
# nbgrader's JupyterLab plugins a learner does not get (labconfig/page_config.json disables them)
INSTRUCTOR_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:course-list",
                      "@jupyter/nbgrader:create-assignment")
# The page JupyterLab opens on, by the course's language: lesson 00, in English or in Chinese (zh/, built from the
# English by `streamlab translate`)
START_PAGES = {"en": "/lab/tree/notebooks/00_setup.ipynb", "zh": "/lab/tree/zh/notebooks/00_setup.ipynb"}
START_PAGE = START_PAGES["en"]


def course_language(env: dict[str, str] | None = None) -> str:
    """The course's language for a learner who did not choose one: Chinese ("zh") when the locale is Chinese (the
    first of LC_ALL, LC_MESSAGES and LANG that is set starts with "zh"), else English ("en")."""
    env = os.environ if env is None else env
    locale = next((env[name] for name in ("LC_ALL", "LC_MESSAGES", "LANG") if env.get(name)), "")
    return "zh" if locale.lower().startswith("zh") else "en"


def notebook_language(env: dict[str, str] | None = None) -> str:
    """The language of the notebook this kernel runs, as far as the kernel can tell: "zh" when JupyterLab started it
    for a notebook of the course in Chinese (``JPY_SESSION_NAME``, the notebook's path, in zh/notebooks/ or
    zh/labs/), else "en"."""
    parts = Path((os.environ if env is None else env).get("JPY_SESSION_NAME", "").replace("\\", "/")).parts
    return "zh" if any(pair in (("zh", "notebooks"), ("zh", "labs")) for pair in zip(parts, parts[1:])) else "en"


def lab_environment(instructor: bool = False, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment JupyterLab runs with: ``env`` (default: this process's), plus, for a learner,
    the course's learner configuration first on ``JUPYTER_CONFIG_PATH``."""
    env = dict(os.environ if env is None else env)
    if not instructor:
        rest = [p for p in env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p and p != str(LEARNER_CONFIG)]
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(LEARNER_CONFIG), *rest])
    return env


def lab_command(root: Path, extra_args: list[str] | None = None, *, news: bool = False,
                language: str = "en") -> list[str]:
    """``jupyter lab`` on the course folder ``root``, opening on lesson 00 in ``language`` ("en", "zh"), with no
    question about "official Jupyter news" over it and no check for JupyterLab updates (a lesson is what the first
    page shows; ``news``: JupyterLab's own default)."""
    command = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={root}",
               f"--LabApp.default_url={START_PAGES[language]}"]
    if not news:
        command += ["--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # e.g. a container or WSL shell running as root
    return command + list(extra_args or [])
