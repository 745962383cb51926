"""One submission's private nbgrader course folder: where ``grade`` and ``check`` both run a submission.

    <template>/gradebook.db, solutions/<lab>/    the lab, as nbgrader generate_assignment recorded it
    <course>/                                    a copy of the template, for one student, deleted afterwards
    <course>/submitted/<student>/<lab>/          the submission's bytes, as the grader checked them

``streamlab grade`` makes the template once per run from solutions/<lab>/ (its visible and hidden tests);
``streamlab check`` makes it from the released lab, labs/<lab>/ (the visible tests a learner has, which
is all a public copy of the course holds). Either way nbgrader's autograde then puts the template's test
cells back into the submission, and its gradebook scores them (``workers.worker``).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from .. import bounds
from ..labs import generate_from_solutions
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
