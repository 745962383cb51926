"""The graded labs: solutions/ (instructor versions) and labs/ (generated student versions).

* labs/ is exactly what `streamlab release-labs` generates from solutions/ now (never stale);
* both are stored without outputs, with complete nbgrader metadata;
* test cells only assert (no Spark actions), students never see solutions or hidden tests;
* nbgrader_config.py does what it claims: checked by autograding a tiny notebook.
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import nbformat
import pytest

from streamlab import grading
from streamlab.grading.labs import run_converter

ROOT = Path(__file__).resolve().parents[2]
LABS = grading.find_labs()
SPARK_IN_TESTS = re.compile(r"\bspark\b|writeStream|readStream|\.collect\(|\.toPandas\(|\.state\(|"
                            r"kafka_stream|kafka_table|\bproduce\(|awaitTermination|processAllAvailable")


def _notebooks(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.ipynb"))


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def test_there_are_labs():
    assert LABS and LABS[0].startswith("lab01"), LABS


def test_every_lab_is_released_and_nothing_else():
    released = sorted(p.name for p in (ROOT / "labs").iterdir() if p.is_dir())
    assert released == LABS, "labs/ must hold one folder per lab in solutions/: run `streamlab release-labs`"


@pytest.fixture(scope="module")
def fresh_release(tmp_path_factory) -> Path:
    """Every lab released from solutions/ now, into a folder of its own: one release for all labs
    (each release sets up a scratch nbgrader gradebook, which costs more than a lab)."""
    target = tmp_path_factory.mktemp("released")
    with pytest.MonkeyPatch.context() as patch:
        if os.access("/dev/shm", os.W_OK):  # nbgrader's scratch gradebook in memory: no disk sync per commit
            patch.setattr(tempfile, "tempdir", "/dev/shm")
        grading.release_labs(LABS, target=target)
    return target


@pytest.mark.parametrize("lab", LABS)
def test_released_lab_is_up_to_date(lab, fresh_release):
    """Regenerate the lab from solutions/ and compare with labs/ cell by cell."""
    tmp_path = fresh_release
    fresh_files = [p.name for p in sorted((tmp_path / lab).rglob("*")) if p.is_file()]
    committed_files = [p.name for p in sorted((ROOT / "labs" / lab).rglob("*")) if p.is_file()]
    stale = "labs/ is stale: run `streamlab release-labs` (or `make labs`) and commit labs/"
    assert committed_files == fresh_files, stale
    for name in fresh_files:
        if not name.endswith(".ipynb"):
            assert (tmp_path / lab / name).read_bytes() == (ROOT / "labs" / lab / name).read_bytes(), stale
            continue
        fresh = nbformat.read(tmp_path / lab / name, as_version=4)
        committed = nbformat.read(ROOT / "labs" / lab / name, as_version=4)
        assert len(fresh.cells) == len(committed.cells), stale
        for new, old in zip(fresh.cells, committed.cells):
            assert (new.cell_type, new.source) == (old.cell_type, old.source), f"{stale} (cell {old.get('id')})"
            assert new.metadata == old.metadata, f"{stale} (metadata of cell {old.get('id')})"
        assert fresh.metadata.get("kernelspec") == committed.metadata.get("kernelspec"), stale


@pytest.mark.parametrize("folder", ["solutions", "labs"])
@pytest.mark.parametrize("lab", LABS)
def test_stored_without_outputs(lab, folder):
    for path in _notebooks(ROOT / folder / lab):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        dirty = [c.get("id") for c in nb.cells
                 if c.cell_type == "code" and (c.outputs or c.execution_count is not None)]
        assert not dirty, f"{path.relative_to(ROOT)}: cells {dirty} have outputs"


@pytest.mark.parametrize("lab", LABS)
def test_solution_has_complete_nbgrader_metadata(lab):
    for path in _notebooks(ROOT / "solutions" / lab):
        nb = nbformat.read(path, as_version=4)
        ids = [_nbgrader(c)["grade_id"] for c in nb.cells if _nbgrader(c)]
        assert len(ids) == len(set(ids)), "grade ids must be unique"
        assert all(_nbgrader(c) for c in nb.cells), "every cell carries nbgrader metadata (locked or answer)"
        tests = [c for c in nb.cells if _nbgrader(c).get("grade")]
        answers = [c for c in nb.cells if _nbgrader(c).get("solution")]
        assert tests and answers
        for cell in nb.cells:
            meta = _nbgrader(cell)
            assert meta["schema_version"] == 3 and "grade_id" in meta
            assert meta["cell_type"] == cell.cell_type
            if meta.get("grade"):
                assert meta["locked"] and meta["points"] > 0 and cell.cell_type == "code"
            elif meta.get("solution"):
                assert not meta["locked"]
                assert "### BEGIN SOLUTION" in cell.source and "### END SOLUTION" in cell.source
            else:
                assert meta["locked"], f"instructions and helper cells are read-only ({meta['grade_id']})"
        # the grade's facts are in hidden_checks.py, outside the kernel: no test cell hides lines in the kernel
        assert not any("BEGIN HIDDEN TESTS" in c.source for c in tests), "hidden tests would run in the kernel"
        assert all("### BEGIN HIDDEN TESTS" not in c.source for c in nb.cells if c not in tests)


@pytest.mark.parametrize("lab", LABS)
def test_test_cells_only_assert(lab):
    """Spark work happens in helper cells; a test cell only checks results (no JVM output there)."""
    for path in _notebooks(ROOT / "solutions" / lab):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if _nbgrader(cell).get("grade"):
                found = SPARK_IN_TESTS.findall(cell.source)
                assert not found, f"{_nbgrader(cell)['grade_id']} runs Spark ({found}): move it to a helper cell"
                last = [line for line in cell.source.strip().split("\n") if line.strip()][-1]
                assert last.startswith(("print(", "assert", " ", "#", ")")), \
                    f"{_nbgrader(cell)['grade_id']} ends with an expression: nbgrader would read it as a partial score"


@pytest.mark.parametrize("lab", LABS)
def test_students_see_no_solutions_and_no_hidden_tests(lab):
    for path in _notebooks(ROOT / "labs" / lab):
        text = path.read_text()
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS"):
            assert marker not in text, f"{path.relative_to(ROOT)} contains {marker}"
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if _nbgrader(cell).get("solution"):
                assert "raise NotImplementedError()" in cell.source


def test_config_layout_and_limits():
    config = grading.nbgrader_config(ROOT)
    assert config.CourseDirectory.source_directory == "solutions"
    assert config.CourseDirectory.release_directory == "labs"
    assert config.Execute.timeout >= 120, "a Spark start needs more than nbgrader's 30 s default"
    assert "--IPKernelApp.capture_fd_output=False" in config.Execute.extra_arguments
    pattern = re.compile(config.IgnorePattern.pattern)
    assert pattern.search("08:15:02 WARN TaskSetManager: lost task 0.0\n")
    assert pattern.search('{"ts": "2026-01-01 09:00:00.000", "level": "ERROR", "logger": "X"}\n')
    assert not pattern.search("Traceback (most recent call last):\nValueError: bad\n")
    assert not pattern.search("a warning the student printed\n")


PROBE = [
    # (source, points earned) — each cell is a test cell worth 1 point
    ("import os\nassert os.environ.get('NBGRADER_EXECUTION') == 'autograde'", 1),
    # low-level output on fd 2, as the JVM writes it: not forwarded into the cell
    ("import os\nos.write(2, b'12:00:00 ERROR SparkContext: JVM noise on fd 2\\n')\nprint('ok')", 1),
    # Spark-looking log lines printed to sys.stderr: dropped by IgnorePattern
    ("import sys\nprint('08:15:02 WARN TaskSetManager: lost task', file=sys.stderr)", 1),
    # anything else on stderr still fails the test cell, as nbgrader intends
    ("import sys\nprint('a real problem', file=sys.stderr)", 0),
]


@pytest.mark.labs  # runs nbgrader autograde (a kernel): ~20 s
@pytest.mark.filterwarnings("ignore:Object of type .* not in session")  # nbgrader's gradebook internals
def test_config_grades_as_promised(tmp_path):
    """Autograde a tiny notebook with the course's config: NBGRADER_EXECUTION is set, JVM-style
    stderr does not cost points, other stderr does."""
    from nbgrader.api import Gradebook
    from nbgrader.converters import Autograde

    cells = []
    for i, (source, _) in enumerate(PROBE):
        cell = nbformat.v4.new_code_cell(source, metadata={"nbgrader": {
            "cell_type": "code", "grade": True, "grade_id": f"probe{i}", "locked": True, "points": 1,
            "schema_version": 3, "solution": False, "task": False}})
        cells.append(cell)
    nb = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": {
        "display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}})
    (tmp_path / "solutions" / "probe").mkdir(parents=True)
    nbformat.write(nb, tmp_path / "solutions" / "probe" / "probe.ipynb")
    grading.generate_assignment(tmp_path, "probe")  # raises GradingError if nbgrader fails
    (tmp_path / "submitted" / "someone" / "probe").mkdir(parents=True)
    (tmp_path / "submitted" / "someone" / "probe" / "probe.ipynb").write_bytes(
        (tmp_path / "labs" / "probe" / "probe.ipynb").read_bytes())
    config = grading.nbgrader_config(tmp_path, cell_timeout=60)
    result = run_converter(Autograde, config, assignment="probe", student="someone",
                           force=True, create_student=True)
    assert result["success"], result.get("error", "") + result["log"]
    with Gradebook(config.CourseDirectory.db_url) as gradebook:
        submission = gradebook.find_submission("probe", "someone")
        scores = {g.name: g.score for nb_ in submission.notebooks for g in nb_.grades}
    assert scores == {f"probe{i}": points for i, (_, points) in enumerate(PROBE)}


@pytest.mark.filterwarnings("ignore:Object of type .* not in session")  # nbgrader's gradebook internals
@pytest.mark.slow
def test_a_new_gradebook_reads_its_version_without_a_new_python(tmp_path, monkeypatch):
    """nbgrader asks `alembic heads` in a new Python process for each new gradebook (3-5 s); the course reads the
    same version in its own process. The gradebook still records exactly what `alembic heads` prints."""
    import subprocess

    import nbgrader.api
    from nbgrader.api import Gradebook
    from nbgrader.dbutil import _temp_alembic_ini

    from streamlab.grading.labs import with_scripts_on_path

    with _temp_alembic_ini("sqlite:////tmp/gradebook.db") as alembic_ini:
        printed = subprocess.check_output(["alembic", "-c", alembic_ini, "heads"], text=True,
                                          env=with_scripts_on_path(dict(os.environ)))
    alembics_own = printed.split("\n")[0].split(" ")[0]

    def no_new_python(*args, **kwargs):
        raise AssertionError(f"a new process for the gradebook's version: {args}")

    monkeypatch.setattr(nbgrader.api.sp, "check_output", no_new_python)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("a lab")])
    (tmp_path / "solutions" / "probe").mkdir(parents=True)
    nbformat.write(nb, tmp_path / "solutions" / "probe" / "probe.ipynb")
    grading.generate_assignment(tmp_path, "probe")  # makes the gradebook; raises GradingError if nbgrader fails
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        recorded = gradebook.db.execute(nbgrader.api.text("SELECT version_num FROM alembic_version")).scalar()
    assert recorded == alembics_own


def test_nbgrader_checks_every_cells_metadata_with_one_validator_and_the_same_errors():
    """nbgrader's metadata check (``jsonschema.validate`` per cell) made its validator, and checked nbgrader's schema
    against JSON Schema's own, for every cell; ``metadata_checked_by_one_validator`` keeps one validator per schema.
    A cell's metadata is still checked: a wrong one fails as jsonschema.validate fails it, a good one passes."""
    import copy

    import jsonschema
    import nbgrader.nbgraderformat.common as common
    from nbgrader.nbgraderformat.v3 import MetadataValidatorV3

    from streamlab.grading.labs import OneValidatorPerSchema, metadata_checked_by_one_validator

    metadata_checked_by_one_validator()
    metadata_checked_by_one_validator()  # once is enough: the second call changes nothing
    assert isinstance(common.jsonschema, OneValidatorPerSchema)
    assert common.jsonschema.ValidationError is jsonschema.ValidationError  # every other name is jsonschema's
    nb = grading.reference_notebook(LABS[0])
    MetadataValidatorV3().validate_nb(nb)  # a lab as it is: valid
    schema = MetadataValidatorV3().schema
    wrong = [("points", "ten"), ("grade", "yes"), ("grade_id", 7), ("locked", None), ("schema_version", "3")]
    for key, value in wrong:
        cell = copy.deepcopy(next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")))
        cell.metadata.nbgrader[key] = value
        with pytest.raises(jsonschema.ValidationError) as theirs:
            jsonschema.validate(cell.metadata.nbgrader, schema)
        with pytest.raises(jsonschema.ValidationError) as ours:
            common.jsonschema.validate(cell.metadata.nbgrader, schema)
        assert (ours.value.message, list(ours.value.path)) == (theirs.value.message, list(theirs.value.path)), key
    assert len(common.jsonschema.made) == 1  # every cell of every notebook: nbgrader's one schema, one validator
    broken = {**schema, "type": "no such type"}  # a schema that is itself wrong is still refused
    with pytest.raises(jsonschema.SchemaError):
        common.jsonschema.validate({}, broken)
