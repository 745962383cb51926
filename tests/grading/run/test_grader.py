"""The Grader's bookkeeping for submissions it need not run (no kernel, no Spark): a grader built whole, on a Kafka
address nothing answers at (no submission here reaches a worker)."""
from __future__ import annotations

import csv
import io
import json

from streamlab.grading import Grader, Result, Status, find_labs
from streamlab.grading.outputs.results import format_points
from streamlab.grading.run.submissions import Submission

LAB = find_labs()[0]
NO_KAFKA = "127.0.0.1:1"


def test_invalid_submission_is_recorded_with_a_status_page_and_skipped_next_time(tmp_path):
    file = tmp_path / "ana.ipynb"
    file.write_text("{ not json")
    out, stream = tmp_path / "out", io.StringIO()
    grader = Grader(LAB, out, stream=stream, limits=None, bootstrap=NO_KAFKA)
    points = format_points(grader.max_score)
    assert grader.max_score > 0 and (out / "course" / ".template" / "gradebook.db").is_file(), "made whole"
    results = grader.run([Submission("ana", {LAB: file}, file)])
    assert [(r.status, r.score, r.max_score, r.report) for r in results] == [
        (Status.INVALID, 0.0, grader.max_score, None)]
    assert f"ana: invalid notebook, 0/{points} (" in stream.getvalue() and "is not JSON" in stream.getvalue()
    page = (out / "feedback" / "ana.html").read_text()
    assert "<b>Status:</b> invalid notebook" in page
    stored = json.loads((out / "results" / "ana.json").read_text())
    assert stored["status"] == "invalid notebook" and stored["file"] == str(file)
    with (out / "grades.csv").open(newline="") as handle:
        assert [row["status"] for row in csv.DictReader(handle)] == ["invalid notebook (no sandbox)"]

    again = grader.graded_before(Submission("ana", {LAB: file}, file))
    assert again == Result.from_json((out / "results" / "ana.json").read_text())
    file.write_text("{ still not json")
    assert grader.graded_before(Submission("ana", {LAB: file}, file)) is None


def test_grader_errors_are_graded_again(tmp_path):
    grader = Grader(LAB, tmp_path, force=False, limits=None, bootstrap=NO_KAFKA)
    submission = Submission("bob", {LAB: tmp_path / "bob.ipynb"}, tmp_path / "bob.ipynb")
    page = tmp_path / "bob.html"
    page.write_text("")
    result = Result(student="bob", status=Status.ERROR, sha256=submission.sha256(), feedback=str(page),
                    grader=grader.grader, solution_sha256=grader.solution_sha256, sandboxed=False)
    (grader.results_dir / "bob.json").write_text(result.to_json())
    assert grader.graded_before(submission) is None
    result.status = Status.CRASHED
    (grader.results_dir / "bob.json").write_text(result.to_json())
    assert grader.graded_before(submission) == result
    result.grader = "streamlab 0.1.0, nbgrader 0.9.5, grading code 000000000000"  # graded by other code
    (grader.results_dir / "bob.json").write_text(result.to_json())
    assert grader.graded_before(submission) is None, "a result of other grading code is redone"
    (grader.results_dir / "bob.json").write_text("{ broken")
    assert grader.graded_before(submission) is None
