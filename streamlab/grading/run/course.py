"""One submission's private nbgrader course folder: where ``grade`` and ``check`` both run a submission.

    <template>/gradebook.db, solutions/<lab>/    the lab, as nbgrader generate_assignment recorded it
    <course>/                                    a copy of the template, for one student, deleted afterwards
    <course>/submitted/<student>/<lab>/          the submission's bytes, as the grader checked them

``streamlab grade`` makes the template once per run from solutions/<lab>/ (its visible and hidden tests);
``streamlab check`` makes it from the released lab, labs/<lab>/ (the visible tests a learner has, which
is all a public copy of the course holds). Either way nbgrader's autograde then puts the template's test
cells back into the submission, and its gradebook scores them (``workers.worker``).

A notebook of the course in Chinese is graded from a second template, made once from the same source with its
markdown in Chinese (``make_chinese_template``): nbgrader puts its locked cells back as the gradebook holds them, so
its feedback shows the lab's text in Chinese; its code cells, tests and points are the English template's.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from ...stack import translations
from .. import bounds
from ..labs import generate_from_solutions, solutions_dir
from .submissions import SubmissionRefused, read_submitted_file


def make_template(template: Path, lab: str, source: Path) -> float:
    """nbgrader generate_assignment of the lab's notebooks in ``source`` (solutions/<lab>/ or labs/<lab>/), in
    the course folder ``template``; returns the lab's points in all."""
    from nbgrader.api import Gradebook

    if template.exists():
        shutil.rmtree(template)
    generate_from_solutions(template, lab, source)
    with Gradebook(f"sqlite:///{template / 'gradebook.db'}") as gradebook:
        return float(gradebook.find_assignment(lab).max_score)


def make_chinese_template(template: Path, lab: str, source: Path) -> bool:
    """``make_template`` from ``source`` with each notebook's markdown in Chinese (``translations.in_chinese``, read
    from the lab's translation, i18n/zh/solutions/<lab>/); False, and nothing made, when a notebook has none."""
    notebooks = sorted(Path(source).glob("*.ipynb"))
    keys = [solutions_dir() / lab / notebook.name for notebook in notebooks]
    if not notebooks or not all(translations.translation_of(key).is_file() for key in keys):
        return False
    chinese = template.with_name(template.name + "-source")
    if chinese.exists():
        shutil.rmtree(chinese)
    shutil.copytree(source, chinese, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__",
                                                                    "hidden_checks.py"))
    try:
        for notebook, key in zip(notebooks, keys, strict=True):
            data = translations.in_chinese(json.loads(notebook.read_text(encoding="utf-8")), key)
            (chinese / notebook.name).write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
        make_template(template, lab, chinese)  # nbgrader copies the notebooks into the template
    finally:
        shutil.rmtree(chinese, ignore_errors=True)  # so the source copy is not needed afterwards, nor left on failure
    return True


def course_for(template: Path, course: Path, *, lab: str, student: str, contents: dict[str, bytes],
               extra: list[Path] = ()) -> Path:
    """``course``: a copy of ``template`` holding one submission, ``contents`` ({notebook name: its checked
    bytes}) and the ``extra`` files beside them (each read bounded, never through a link)."""
    if course.exists():
        shutil.rmtree(course)
    shutil.copytree(template, course)
    target = course / "submitted" / student / lab
    target.mkdir(parents=True)
    try:
        for name, data in contents.items():  # content only: the original is untouched
            (target / f"{name}.ipynb").write_bytes(data)
        for path in extra:
            (target / path.name).write_bytes(read_submitted_file(path, limit=bounds.EXTRA_FILE_BYTES))
    except SubmissionRefused:
        shutil.rmtree(course, ignore_errors=True)
        raise
    return course
