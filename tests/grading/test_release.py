"""streamlab release: the course as students get it holds no solution, hidden test or hidden check.

The output is read file by file here (not only by the release's own check): no solutions/ or tests/, no
nbgrader marker in a notebook, no file equal to one of the answer key's, every lab present as its student
version. Then each way a key could leak is planted in a copy of a release, and the check must name it.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys

import nbformat
import pytest

from streamlab.grading import release as rel
from streamlab.grading.labs import find_labs, labs_dir, solutions_dir
from streamlab.stack.paths import project_root

ROOT = project_root()


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    out = tmp_path_factory.mktemp("release") / "course"
    proc = subprocess.run([sys.executable, "-m", "streamlab", "release", str(out)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "checked: no solution, hidden test or hidden check" in proc.stdout
    return out


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_release_has_what_a_learner_needs(released):
    for needed in ("notebooks/00_setup.ipynb", "streamlab/__init__.py", "Makefile", "requirements.txt",
                   "docker/Dockerfile", "binder/postBuild", "README.md", "LICENSE", "docs/learners.md",
                   "docs/instructors.md", "docs/contributors.md", "CONTRIBUTING.md"):
        assert (released / needed).is_file(), needed
    assert sorted(p.name for p in (released / "labs").iterdir()) == find_labs()


def test_the_release_holds_no_part_of_the_answer_key(released):
    names = {part for p in released.rglob("*") for part in p.relative_to(released).parts}
    assert not names & {"solutions", "tests", "gradebook.db", "benchmarks", ".ci"}
    key = {_digest(p) for folder in (solutions_dir(), ROOT / "tests") for p in folder.rglob("*") if p.is_file()}
    assert [p for p in released.rglob("*") if p.is_file() and _digest(p) in key] == []
    for notebook in released.rglob("*.ipynb"):
        text = "\n".join(cell.source for cell in nbformat.read(notebook, as_version=4).cells)
        for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
            assert marker not in text, f"{notebook}: {marker}"
    assert rel.answer_key_in(released) == []


def test_the_student_labs_are_the_ones_generated_now(released):
    for lab in find_labs():
        for notebook in (released / "labs" / lab).glob("*.ipynb"):
            assert _digest(notebook) == _digest(labs_dir() / lab / notebook.name), \
                "labs/ is out of date: make labs"


@pytest.mark.parametrize("leak", ["checks copied", "solution notebook as the lab", "tests folder",
                                  "solution pasted in a guide"])
def test_each_way_the_key_could_leak_is_caught(released, tmp_path, leak):
    copy = tmp_path / "course"
    shutil.copytree(released, copy)
    lab = find_labs()[0]
    solution = next((solutions_dir() / lab).glob("*.ipynb"))
    if leak == "checks copied":
        shutil.copy(solutions_dir() / lab / "hidden_checks.py", copy / "docker" / "extras.py")
    elif leak == "solution notebook as the lab":
        shutil.copy(solution, copy / "labs" / lab / solution.name)
    elif leak == "tests folder":
        (copy / "tests" / "submissions").mkdir(parents=True)
        (copy / "tests" / "submissions" / "x.ipynb").write_text("{}")
    else:
        region = rel.SOLUTION_REGION.search("\n".join(c.source for c in nbformat.read(solution, 4).cells)).group(1)
        guide = copy / "docs" / "instructors.md"
        guide.write_text(guide.read_text() + "\n```python\n" + region + "```\n")
    found = rel.answer_key_in(copy)
    expected = {"checks copied": "docker/extras.py: a hidden check's line",
                "solution notebook as the lab": f"labs/{lab}/{solution.name}: nbgrader's marker",
                "tests folder": "tests: never released",
                "solution pasted in a guide": "docs/instructors.md: a lab's solution"}[leak]
    assert any(problem.startswith(expected) for problem in found), found


def test_a_release_is_written_outside_the_course_and_never_over_a_folder_by_surprise(tmp_path):
    with pytest.raises(rel.ReleaseError, match="inside the course"):
        rel.release(ROOT / "notebooks" / "release")
    (tmp_path / "there").mkdir()
    with pytest.raises(rel.ReleaseError, match="exists: choose a new folder, or --force"):
        rel.release(tmp_path / "there")


def test_the_release_builds_the_site_and_says_where_the_tests_are(released):
    """Binder and the site build from the public course: its pages are all there (lessons, student labs, the
    guides), and `make test`, whose tests hold the answer key, says they stay in the private repository
    (before it sets anything up)."""
    from streamlab.site.executed import lessons
    from streamlab.site.pages import course_pages

    site = course_pages(released, lessons(released))
    assert {p.slug for p in site} >= {"index", "learners", "instructors", "contributors", "glossary", *find_labs()}
    assert all((released / p.repo_path).is_file() for p in site)
    for target in ("test", "check"):
        proc = subprocess.run(["make", "-C", str(released), target], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "no tests/" in proc.stdout, proc.stdout + proc.stderr
        assert "the instructor's private repository" in proc.stdout
    assert not (released / ".venv").exists(), "refused before any set-up"
    labs = subprocess.run(["make", "-C", str(released), "labs"], capture_output=True, text=True, timeout=60)
    assert labs.returncode == 2 and "no solutions/ here" in labs.stdout
    dry = subprocess.run(["make", "-n", "-C", str(released), "site", "lab"], capture_output=True, text=True,
                         timeout=60)
    assert dry.returncode == 0 and "streamlab site" in dry.stdout and "streamlab lab" in dry.stdout
