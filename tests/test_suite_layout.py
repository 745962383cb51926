"""How the suite runs in parallel (tests/conftest.py): which tests travel together, in which order, and what a run
leaves behind."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import (
    AS_LONG_AS_A_LESSON,
    BESIDE_THE_GRADING_RUNS,
    LESSONS_SLOWEST_FIRST,
    SLOW_MODULES,
    WAITING_MODULES,
    group_of,
)

ROOT = Path(__file__).resolve().parents[1]


def test_a_labs_grading_run_is_one_group_and_lab01_goes_first():
    lab03 = [group_of(f"tests/grading/test_grade_labs.py::{name}[lab03_state_backends]")
             for name in ("test_blank_lab_gets_zero", "test_nothing_is_left_running")]
    assert lab03[0] == lab03[1] and lab03[0][1] == "grade lab03" and 1 <= lab03[0][0] < 2
    robust = group_of("tests/grading/test_grade_labs.py::test_hanging_submission_is_stopped_at_the_limit")
    lab01 = group_of("tests/grading/test_grade_labs.py::test_blank_lab_gets_zero[lab01_stateless_vs_stateful]")
    assert robust == lab01 and robust[0] == 0, "lab01's tests share the robustness run"


def test_notebooks_run_one_by_one_and_the_cluster_once():
    a = group_of("tests/test_notebooks.py::test_notebook_runs[02_keyed_state]")
    b = group_of("tests/test_notebooks.py::test_notebook_runs[03_state_backends]")
    assert a[1] != b[1] and b[0] < a[0] < 2.5, "each lesson on its own, the slowest (03) first"
    cheap = group_of("tests/test_notebooks.py::test_notebook_is_a_lesson[02_keyed_state]")
    assert cheap == (4, "tests/test_notebooks.py")
    assert group_of("tests/stack/test_cluster.py::test_notebook_01_on_the_cluster")[1] == \
        group_of("tests/stack/test_cluster.py::test_stop_stops_everything")[1] == "cluster"


def test_the_one_at_a_time_hostile_data_run_starts_beside_lab01s_and_before_the_other_labs():
    lab01 = group_of("tests/grading/test_grade_labs.py::test_blank_lab_gets_zero[lab01_stateless_vs_stateful]")[0]
    hostile_data = group_of("tests/grading/sandbox/test_grade_hostile_data.py::test_x")[0]
    lab02 = group_of("tests/grading/test_grade_labs.py::test_blank_lab_gets_zero[lab02_keyed_state]")[0]
    assert lab01 < hostile_data < lab02


def test_every_lesson_has_its_place_in_the_slowest_first_order():
    from streamlab.site import executed

    lessons = sorted(path.stem for path in executed.lessons(ROOT))
    assert sorted(LESSONS_SLOWEST_FIRST) == lessons, "a lesson added or gone: measure it and give it its place"
    ranks = [group_of(f"tests/test_notebooks.py::test_notebook_runs[{stem}]")[0] for stem in LESSONS_SLOWEST_FIRST]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)
    assert ranks[-1] < group_of("tests/test_notebooks.py::test_setup_notebook_runs_twice_in_one_kernel")[0] < 2.5
    for path, lesson in AS_LONG_AS_A_LESSON.items():
        assert (ROOT / path).is_file() and lesson in LESSONS_SLOWEST_FIRST, (path, lesson)
        assert group_of(f"{path}::test_x") == (group_of(f"tests/test_notebooks.py::test_notebook_runs[{lesson}]")[0],
                                               path), "handed out with the lesson it takes as long as"


def test_the_slowest_lessons_go_out_among_the_grading_runs_one_after_each():
    """Lab02's run, lesson 03, lab03's run, lesson 08, ...: a grading run fills the cores a lesson leaves idle."""
    labs = [group_of(f"tests/grading/test_grade_labs.py::test_x[lab0{n}_x]")[0] for n in range(2, 8)]
    beside = [group_of(f"tests/test_notebooks.py::test_notebook_runs[{stem}]")[0]
              for stem in LESSONS_SLOWEST_FIRST[:BESIDE_THE_GRADING_RUNS]]
    assert len(beside) <= len(labs)
    for at, lesson in enumerate(beside):
        after = labs[at + 1] if at + 1 < len(labs) else 2
        assert labs[at] < lesson < after, (at, labs, beside)
    rest = group_of(f"tests/test_notebooks.py::test_notebook_runs[{LESSONS_SLOWEST_FIRST[BESIDE_THE_GRADING_RUNS]}]")
    assert 2 <= rest[0] < 2.5, "the short lessons pack the end"


def test_slow_modules_go_before_the_rest_slowest_first():
    ranks = [group_of(f"{path}::test_x")[0] for path in SLOW_MODULES]
    assert ranks == sorted(ranks) and 3 <= ranks[0] and ranks[-1] < 4
    assert group_of("tests/test_style.py::test_ruff_finds_nothing")[0] == 4
    assert all((ROOT / path).is_file() for path in SLOW_MODULES), "SLOW_MODULES names a test module that is gone"


def test_modules_that_wait_go_out_among_the_grading_runs():
    """A module that waits out a time limit is handed out while grading runs still keep the CPU busy, never last."""
    grading = [group_of(f"tests/grading/test_grade_labs.py::test_x[lab0{n}_x]")[0] for n in (2, 7)]
    assert all(grading[0] < group_of(f"{path}::test_x")[0] < grading[1] for path in WAITING_MODULES)
    assert all((ROOT / path).is_file() for path in WAITING_MODULES), "WAITING_MODULES names a test module that is gone"


def test_every_test_that_uses_spark_and_only_those_run_on_the_spark_worker(request):
    """group_of reads fixtures from the source; pytest knows them: the two must agree on every test."""
    items = [item for item in request.session.items if hasattr(item, "fixturenames")]
    uses_spark = {item.nodeid for item in items if "spark" in item.fixturenames}
    on_spark_worker = {item.nodeid for item in items if group_of(item.nodeid)[1] == "spark"}
    if not uses_spark:  # this module run on its own; make check and make test collect the whole suite
        pytest.skip("no collected test uses the spark fixture: run this with the suite")
    assert on_spark_worker == uses_spark


def test_a_fixture_that_uses_spark_takes_its_tests_along(tmp_path, monkeypatch):
    import conftest

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef table(spark):\n    return 1\n\n"
        "def test_a(table):\n    pass\n\ndef test_b(tmp_path):\n    pass\n\n"
        "def test_c(spark, tmp_path):\n    pass\n")
    monkeypatch.setattr(conftest, "ROOT", tmp_path)
    conftest.spark_tests.cache_clear()
    try:
        assert conftest.spark_tests("tests/test_x.py") == {"test_a", "test_c"}
        assert group_of("tests/test_x.py::test_a[p1]") == (2.5, "spark")
        assert group_of("tests/test_x.py::test_b")[1] == "tests/test_x.py"
    finally:
        conftest.spark_tests.cache_clear()


def test_make_test_runs_the_fast_tier_first_then_the_heavy_ones_with_the_docker_tier_then_the_site():
    makefile = (ROOT / "Makefile").read_text()
    body = makefile.split("\ntest: tests-here setup\n", 1)[1].split("\n\n", 1)[0].replace("\\\n", " ")
    recipe = body.splitlines()
    assert len(recipe) == 4, recipe
    fast, beside, site, late = recipe
    assert "-m pytest -n auto -x" in fast and '-m "not ($(HEAVY) or $(LATE) or $(DOCKER))"' in fast, \
        "stops at the fast tier's first failure"
    commands = [part.strip() for part in beside.split(";")]
    docker = next(c for c in commands if '-m "$(DOCKER)"' in c and c.startswith("$(BIN)/python -m pytest"))
    heavy = next(c for c in commands if '-m "$(HEAVY)"' in c and c.startswith("$(BIN)/python -m pytest"))
    assert docker.endswith("& docker=$$!") and "-rs" in docker.split() and "no:xdist" in docker, \
        "the docker tier: one compose project, in order, its skip reason in one line, in the background"
    assert commands.index(docker) < commands.index(heavy), "started before the heavy tiers, so they run side by side"
    assert "-n auto" in heavy and "-x" not in heavy.split(), "the rest: together, every test; a failure hides none"
    assert "wait $$docker" in beside and commands[-1] == "test $$heavy -eq 0 && test $$docker_status -eq 0", \
        "either failing fails make test"
    assert site.strip() == "$(BIN)/streamlab site", "the site, from the lessons the notebook tests executed"
    assert late.strip() == '$(BIN)/python -m pytest -q -m "$(LATE)"', "then the browser checks of what was built"
    markers = makefile.split("\nHEAVY := ", 1)[1].split("\n", 1)[0].split(" or ")
    assert markers == ["notebooks", "labs", "cluster", "slow"]
    assert makefile.split("\nLATE := ", 1)[1].split("\n", 1)[0] == "browser"
    check = makefile.split("\ncheck: tests-here setup\n", 1)[1].split("\n", 1)[0]
    assert '-m "not ($(HEAVY) or $(LATE) or $(DOCKER))"' in check, "make check is the fast tier"
    assert makefile.split("\nDOCKER := ", 1)[1].split("\n", 1)[0] == "docker"


def test_the_graders_tests_are_laid_out_like_its_wings():
    """tests/grading/<wing>/ tests streamlab/grading/<wing>/; the front ends and whole-grader runs sit above them."""
    wings = {p.name for p in (ROOT / "streamlab" / "grading").iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in (ROOT / "tests" / "grading").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == wings
    assert all(list((ROOT / "tests" / "grading" / wing).glob("test_*.py")) for wing in wings)


@pytest.mark.slow
def test_a_broker_a_course_command_starts_in_a_run_stops_with_the_run(tmp_path):
    """A test that runs a course command with no Kafka configured gets the course's broker started in the run's data
    folder (as a learner would); the run stops it when it ends."""
    import os
    import subprocess
    import sys

    (tmp_path / "test_starts_kafka.py").write_text(
        "import os\n\n\ndef test_a_command_starts_kafka():\n"
        "    from streamlab.stack import kafka\n"
        "    kafka.bootstrap_servers()  # what `streamlab grade` does when no Kafka runs\n"
        "    print('RUN_DIR', os.environ['STREAMLAB_DATA_DIR'])\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("STREAMLAB_DATA_DIR", "KAFKA_BOOTSTRAP_SERVERS", "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-p", "conftest",
                           "-q", "-s", "--rootdir", str(tmp_path), str(tmp_path / "test_starts_kafka.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    run_dir = next(line.split(" ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("RUN_DIR "))
    left = subprocess.run(["pgrep", "-f", f"streamlab.broker.log={run_dir}"], capture_output=True, text=True).stdout
    assert left == "", f"the run's broker still runs: pid {left.split()}"
