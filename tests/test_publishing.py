"""Static checks of how the course reaches readers who have not installed it: the GitHub Pages workflow
(.github/workflows/pages.yml) that builds and publishes the site, the Binder configuration (binder/)
that runs the notebooks in a browser, and the README's first screen that links to both. This machine
reaches neither GitHub nor Binder: the files are read, not run."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import yaml

from streamlab.site.pages import binder_url, repository
from streamlab.stack import jupyter

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"
BINDER = ROOT / "binder"


def _steps(job: dict) -> list[dict]:
    return job["steps"]


def _uses(job: dict) -> list[str]:
    return [step["uses"].split("@")[0] for step in _steps(job) if "uses" in step]


def test_the_pages_workflow_builds_the_site_and_deploys_it():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert triggers["push"]["branches"] == ["main"] and "workflow_dispatch" in triggers
    assert workflow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    build, deploy = workflow["jobs"]["build"], workflow["jobs"]["deploy"]
    assert _uses(build) == ["actions/checkout", "actions/setup-python", "actions/setup-java", "actions/setup-node",
                            "actions/configure-pages", "actions/upload-pages-artifact"]
    with_ = {step["uses"].split("@")[0]: step.get("with", {}) for step in _steps(build) if "uses" in step}
    assert with_["actions/setup-python"]["python-version"] == "3.11"
    assert str(with_["actions/setup-java"]["java-version"]) == "17"
    assert with_["actions/upload-pages-artifact"]["path"] == "build/site"
    runs = [step for step in _steps(build) if "run" in step]
    assert [step["run"].strip() for step in runs] == ["make site"]
    assert runs[0]["env"]["STREAMLAB_SITE_REPOSITORY"] == "${{ github.repository }}", "links to its own repository"
    assert deploy["needs"] == "build" and _uses(deploy) == ["actions/deploy-pages"]
    assert deploy["environment"]["name"] == "github-pages"
    for job in (build, deploy):
        for step in _steps(job):
            if "uses" in step:
                assert re.fullmatch(r"actions/[a-z-]+@v\d+", step["uses"]), step["uses"]


def test_binder_brings_java_17_and_the_pinned_packages_of_the_course():
    ours = yaml.safe_load((BINDER / "environment.yml").read_text())
    course = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert ours == course, "binder/environment.yml is a copy of environment.yml"
    assert "openjdk=17" in ours["dependencies"]


def test_binder_installs_the_package_and_the_jars_and_starts_the_broker():
    post_build, start = BINDER / "postBuild", BINDER / "start"
    for script in (post_build, start):
        assert os.access(script, os.X_OK), f"{script.name} must be executable"
        assert script.read_text().startswith("#!/bin/bash\n")
        check = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
    post = post_build.read_text()
    assert "pip install --no-deps -e ." in post and "streamlab fetch --connector --kafka --tools" in post
    text = start.read_text()
    assert "streamlab kafka start" in text and text.rstrip().endswith('exec "$@"')
    assert "jupyter.LEARNER_CONFIG" in text and "JUPYTER_CONFIG_PATH" in text, "a learner's JupyterLab"
    assert jupyter.LEARNER_CONFIG.is_dir()


def test_the_readmes_first_screen_links_to_the_site_and_to_binder():
    readme = (ROOT / "README.md").read_text()
    first_screen = "\n".join(readme.splitlines()[:15])
    repo = repository(ROOT)
    owner, name = repo.split("/")
    assert binder_url(repo, "notebooks/00_setup.ipynb") in first_screen
    assert f"https://{owner}.github.io/{name}/" in first_screen
    assert "make site" in first_screen


def test_the_contributors_guide_says_how_to_serve_the_site_and_how_long_it_takes():
    readme = (ROOT / "docs" / "contributors.md").read_text()
    assert "cd build/site && python -m http.server" in readme
    section = readme.split("## The course as a website", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"\d+ s after `make test`", section) and re.search(r"\d+ min alone", section), \
        "how long `make site` takes, after `make test` and alone"


# What each reader's guide must cover (issue: an instructor follows the instructor's guide alone, from a fresh
# clone to grades in their platform), and the README stays the short front door to them.
GUIDE_COVERS = {
    "learners.md": ["make lab", "Python 3.11", "JDK 17", "00_setup", "streamlab check", "streamlab doctor",
                    "When something goes wrong", "Binder", "docker compose"],
    "instructors.md": ["streamlab release", "private", "JupyterHub", "nbgrader's exchange", "streamlab doctor",
                       "of memory", "of disk", "streamlab grade", "--roster", "--format canvas", "--format moodle",
                       "streamlab grade gradescope", "Kubernetes", "GitHub Actions", "Slurm", "What each lab grades"],
    "contributors.md": ["make check", "make test", "How a lesson is built", "Writing a lab", "hidden_checks.py",
                        "How long a lesson takes", "The course as a website", "Layout"],
}


def test_the_readme_is_a_short_front_door_to_a_guide_for_each_reader():
    readme = (ROOT / "README.md").read_text()
    prose = re.sub(r"^\|.*\|$", "", readme, flags=re.M)  # the modules' and articles' tables are not read through
    assert len(prose.split()) < 1200, "the README is the front door: details go into the guides"
    assert "make lab" in readme and "make test" in readme
    for name, needed in GUIDE_COVERS.items():
        assert f"](docs/{name})" in readme, f"the README links docs/{name}"
        text = (ROOT / "docs" / name).read_text()
        assert not [n for n in needed if n not in text], f"docs/{name} misses {[n for n in needed if n not in text]}"
