"""streamlab.stack.jupyter: the learner's JupyterLab (`make lab`) keeps nbgrader's Validate button and
assignment list and hides the instructor's tools; `make lab-instructor` has them all. The configuration
is checked as files (fast), then JupyterLab is started and looked at in headless Chromium (`-m browser`)."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.error import HTTPError
from urllib.request import urlopen

import pytest
from browser import INSTALL, Chromium, chromium_path

from streamlab.stack import jupyter
from streamlab.stack.paths import project_root

ROOT = project_root()
LAB = "labs/lab01_stateless_vs_stateful/lab01_stateless_vs_stateful.ipynb"


def nbgrader_plugins() -> set[str]:
    """The JupyterLab plugins the installed nbgrader brings (read from its labextension)."""
    import nbgrader

    found = set()
    prefix = Path(nbgrader.__file__).resolve().parents[4]  # <venv>/lib/pythonX.Y/site-packages/nbgrader
    static = prefix / "share" / "jupyter" / "labextensions" / "@jupyter" / "nbgrader" / "static"
    for script in static.glob("*.js"):
        found |= set(re.findall(r'"(@jupyter/nbgrader:[a-z-]+)"', script.read_text(encoding="utf-8", errors="ignore")))
    return found


def test_the_learner_config_disables_exactly_the_instructors_plugins():
    page_config = json.loads((jupyter.LEARNER_CONFIG / "labconfig" / "page_config.json").read_text())
    disabled = {name for name, off in page_config["disabledExtensions"].items() if off}
    assert disabled == set(jupyter.INSTRUCTOR_PLUGINS)
    plugins = nbgrader_plugins()
    assert disabled < plugins, f"nbgrader renamed its plugins: {sorted(plugins)}"
    assert {"@jupyter/nbgrader:validate-assignment", "@jupyter/nbgrader:assignment-list"} <= plugins - disabled
    server = json.loads((jupyter.LEARNER_CONFIG / "jupyter_server_config.json").read_text())
    extensions = server["ServerApp"]["jpserver_extensions"]
    assert extensions["nbgrader.server_extensions.validate_assignment"] is True
    assert extensions["nbgrader.server_extensions.formgrader"] is False


def test_a_learner_gets_the_course_config_in_front_an_instructor_nothing_added():
    env = {"JUPYTER_CONFIG_PATH": "/somewhere/else", "HOME": "/home/x"}
    learner = jupyter.lab_environment(instructor=False, env=env)
    assert learner["JUPYTER_CONFIG_PATH"].split(os.pathsep) == [str(jupyter.LEARNER_CONFIG), "/somewhere/else"]
    assert "JUPYTER_CONFIG_DIR" not in learner, "the user's own configuration folder stays theirs"
    assert jupyter.lab_environment(instructor=True, env=env) == env
    again = jupyter.lab_environment(instructor=False, env=learner)
    assert again["JUPYTER_CONFIG_PATH"] == learner["JUPYTER_CONFIG_PATH"], "not added twice"


def test_make_lab_and_make_lab_instructor():
    makefile = (ROOT / "Makefile").read_text()
    assert "\nlab: setup\n\t$(BIN)/streamlab lab\n" in makefile
    assert "\nlab-instructor: setup\n\t$(BIN)/streamlab lab --instructor\n" in makefile
    assert "make lab-instructor" in (ROOT / "README.md").read_text()


def test_streamlab_lab_hands_jupyter_lab_its_own_options():
    from streamlab.cli import parse_lab

    assert parse_lab(["lab", "--no-browser"]).jupyter_args == ["--no-browser"]
    assert parse_lab(["lab", "--", "--no-browser"]).jupyter_args == ["--no-browser"], "the -- is not passed on"
    args = parse_lab(["lab", "--port", "8899", "--instructor", "--no-browser"])
    assert (args.instructor, args.jupyter_args) == (True, ["--port", "8899", "--no-browser"])
    assert parse_lab(["lab", "--", "--instructor"]).jupyter_args == ["--instructor"], "after --: all jupyter's"
    args = parse_lab(["lab", "--language", "zh", "--port=8899", "--language=en"])
    assert (args.language, args.jupyter_args) == ("en", ["--port=8899"]), "the course's own, with its value"


def test_a_chinese_learner_lands_on_the_chinese_lesson_00():
    command = jupyter.lab_command(ROOT, language="zh")
    assert "--LabApp.default_url=/lab/tree/zh/notebooks/00_setup.ipynb" in command
    assert (ROOT / "zh" / "notebooks" / "00_setup.ipynb").is_file()
    assert jupyter.course_language({"LANG": "zh_CN.UTF-8"}) == "zh"
    assert jupyter.course_language({"LANG": "zh_CN.UTF-8", "LC_ALL": "en_US.UTF-8"}) == "en", "LC_ALL first"
    assert jupyter.course_language({"LANG": "C.UTF-8"}) == jupyter.course_language({}) == "en"


def _read_when_up(url: str, proc: subprocess.Popen, log: Path) -> str:
    """What JupyterLab (``proc``) answers at ``url``, once it answers: at most 120 s, failing with its log if it
    exits or does not answer by then."""
    deadline = time.monotonic() + 120
    while True:
        try:
            with urlopen(url, timeout=5) as response:
                return response.read().decode()
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not start: {log.read_text()[-2000:]}")
            time.sleep(0.5)


def _lab_page_config(folder: Path, *, news: bool, instructor: bool = False) -> tuple[dict, list[str]]:
    """The page configuration JupyterLab started by ``jupyter.lab_command`` serves, and the command."""
    port, token = _free_port(), "course-test-token"
    tmp_path = folder / f"news-{news}-instructor-{instructor}"
    tmp_path.mkdir()
    env = jupyter.lab_environment(instructor, dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
                                                   JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime")))
    command = jupyter.lab_command(tmp_path, [f"--port={port}", "--ServerApp.ip=127.0.0.1", "--no-browser",
                                             f"--IdentityProvider.token={token}"], news=news)
    with open(tmp_path / "jupyter.log", "w") as log:
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            page = _read_when_up(f"http://127.0.0.1:{port}/lab?token={token}", proc, tmp_path / "jupyter.log")
        finally:
            os.killpg(proc.pid, 15)
            proc.wait(timeout=30)
    return json.loads(re.search(r'id="jupyter-config-data"[^>]*>(.*?)</script>', page, re.S).group(1)), command


@pytest.mark.slow
def test_the_first_page_asks_nothing_about_jupyter_news(tmp_path):
    """JupyterLab started as `streamlab lab` starts it: its page says news are off (no question about "official
    Jupyter news" over lesson 00) and checks for no update. A learner's configuration says the same, for the
    JupyterLab the Docker stack and a classroom's servers start themselves; JupyterLab's own default would ask."""
    config, command = _lab_page_config(tmp_path, news=False)
    assert config["news"] == {"disabled": True}
    assert "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate" in command
    assert _lab_page_config(tmp_path, news=True)[0]["news"] == {"disabled": True}, "the learner's configuration"
    assert _lab_page_config(tmp_path, news=True, instructor=True)[0]["news"] == {"disabled": False}


# --- in a browser -----------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def jupyterlab(tmp_path):
    """Start JupyterLab as `streamlab lab` would (without Kafka), on a copy of lab 01 in tmp_path (opening
    a notebook writes its checkpoint beside it), on a free port with a token, its own settings and
    workspaces in tmp_path; yields a function (instructor) -> the URL of the lab in it."""
    if chromium_path() is None:
        pytest.skip(f"no Chromium to look at JupyterLab with: {INSTALL}")
    procs = []
    course = tmp_path / "course"  # a copy of the lab: JupyterLab writes checkpoints next to what it opens
    (course / LAB).parent.mkdir(parents=True)
    shutil.copyfile(ROOT / LAB, course / LAB)
    shutil.copyfile(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")

    def start(instructor: bool) -> str:
        port, token = _free_port(), "course-test-token"
        home = tmp_path / ("instructor" if instructor else "learner")
        home.mkdir()
        env = jupyter.lab_environment(instructor, dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"),
                                                       JUPYTER_RUNTIME_DIR=str(home / "runtime")))
        command = jupyter.lab_command(course, [f"--port={port}", "--ServerApp.ip=127.0.0.1", "--no-browser",
                                             f"--IdentityProvider.token={token}",
                                             f"--LabApp.workspaces_dir={home / 'workspaces'}",
                                             f"--LabApp.user_settings_dir={home / 'settings'}"])
        log = open(home / "jupyter.log", "w")  # noqa: SIM115 - closed with the process
        procs.append((subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True), log))
        base = f"http://127.0.0.1:{port}"
        _read_when_up(f"{base}/api/status?token={token}", procs[-1][0], home / "jupyter.log")
        return f"{base}/lab/tree/{LAB}?token={token}"

    yield start
    for proc, log in procs:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=30)
        log.close()


MENU_ITEM = """(() => {
  const item = [...document.querySelectorAll('.lm-MenuBar-item')].find(e => e.textContent.trim() === 'Nbgrader');
  if (!item) return null;
  const r = item.getBoundingClientRect();
  return [r.x + r.width / 2, r.y + r.height / 2];
})()"""
MENU_LABELS = """[...document.querySelectorAll('.lm-Menu .lm-Menu-item')].filter(e => e.offsetParent !== null)
    .map(e => e.querySelector('.lm-Menu-itemLabel').textContent.trim())"""
LOOK = """({
  validate: !!document.querySelector('.validate-button'),
  createAssignment: [...document.querySelectorAll('[title], [aria-label]')]
      .some(e => /Create Assignment/i.test(e.getAttribute('title') || e.getAttribute('aria-label') || '')),
  menus: [...document.querySelectorAll('.lm-MenuBar-item')].map(e => e.textContent.trim()),
})"""


def _look(url: str) -> dict:
    with Chromium() as browser:
        page = browser.new_page()
        page.goto(url, timeout=120)
        page.wait_until("document.querySelector('.jp-NotebookPanel-toolbar') && "
                        "document.querySelectorAll('.lm-MenuBar-item').length > 5", timeout=120)
        # nbgrader's plugins have run once its button is in the notebook's toolbar (both kinds of lab have it)
        page.wait_until("!!document.querySelector('.validate-button')", timeout=60)
        view = page.evaluate(LOOK)
        where = page.evaluate(MENU_ITEM)
        if where is None:
            view["nbgrader_menu"] = None
        else:
            page.click(*where)
            view["nbgrader_menu"] = page.wait_until(MENU_LABELS, timeout=20)
        return view


@pytest.mark.browser
def test_the_learners_jupyterlab_has_validate_and_no_instructor_tools(jupyterlab):
    url = jupyterlab(instructor=False)
    view = _look(url)
    assert view["validate"], "nbgrader's Validate button is in the notebook's toolbar"
    assert view["nbgrader_menu"] == ["Assignment List"], view
    assert not view["createAssignment"], "no Create Assignment panel"
    base = url.split("/lab/")[0]
    token = url.rsplit("token=", 1)[1]
    with pytest.raises(HTTPError) as answer:  # the formgrader's server side is off too
        urlopen(f"{base}/formgrader?token={token}", timeout=10)
    assert answer.value.code == 404


@pytest.mark.browser
def test_the_instructors_jupyterlab_has_the_instructor_tools(jupyterlab):
    view = _look(jupyterlab(instructor=True))
    assert view["validate"]
    assert {"Assignment List", "Course List", "Formgrader"} <= set(view["nbgrader_menu"] or []), view
    assert view["createAssignment"]


def test_streamlab_lab_instructor_is_a_documented_switch():
    proc = subprocess.run([sys.executable, "-m", "streamlab", "lab", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "--instructor" in proc.stdout
