"""Which shard grades which submission (no kernel): fixed by the submission's name alone."""
from __future__ import annotations

from pathlib import Path

import pytest

from streamlab.grading.labs import GradingError
from streamlab.grading.run.shards import WHOLE, Shard, select, shard_key, shard_of
from streamlab.grading.run.submissions import Submission


def _flat(name: str) -> Submission:
    return Submission(name, {"lab": Path(f"/subs/{name}.ipynb")}, Path(f"/subs/{name}.ipynb"))


def test_parse():
    assert Shard.parse("2/4") == Shard(2, 4) and str(Shard.parse(" 3 / 8 ")) == "3/8"
    assert Shard.parse("1/1") == WHOLE
    for bad in ("", "2", "2/", "a/b", "5/4", "-1/4", "1/0", "2-4"):
        with pytest.raises(GradingError):
            Shard.parse(bad)
    with pytest.raises(GradingError, match="numbered from 1.*JOB_COMPLETION_INDEX"):
        Shard.parse("0/4")


def test_a_students_shard_is_fixed_by_their_file_name():
    # these values are a promise: changing the hash would move students between machines mid-grading
    assert (shard_of("ana.ipynb", 4), shard_of("ben.ipynb", 4), shard_of("cem.ipynb", 4)) == (4, 3, 1)
    assert shard_of("ana.ipynb", 1) == 1
    assert {shard_of(f"s{i}.ipynb", 5) for i in range(200)} == {1, 2, 3, 4, 5}


def test_shards_split_the_folder_exactly_once():
    folder = [_flat(f"student{i:03d}") for i in range(300)]
    shards = [select(folder, Shard(k, 7)) for k in range(1, 8)]
    names = [s.student for shard in shards for s in shard]
    assert sorted(names) == sorted(s.student for s in folder)   # nobody lost, nobody twice
    assert all(20 < len(shard) < 70 for shard in shards), [len(s) for s in shards]  # roughly even
    assert select(folder, WHOLE) == folder


def test_students_added_later_move_nobody():
    before = [_flat(f"student{i:03d}") for i in range(50)]
    after = before + [_flat(f"late{i:02d}") for i in range(20)]
    for k in range(1, 5):
        old = {s.student for s in select(before, Shard(k, 4))}
        new = {s.student for s in select(after, Shard(k, 4))}
        assert old <= new and all(n.startswith("late") for n in new - old)


def test_nbgrader_layout_shards_by_the_students_folder():
    nested = Submission("ana", {"lab": Path("/subs/ana/lab01/lab01.ipynb")}, Path("/subs/ana/lab01"))
    assert shard_key(nested) == "ana"
    assert shard_key(_flat("ana")) == "ana.ipynb"


def test_the_graders_version_hashes_everything_that_decides_a_grade(tmp_path, monkeypatch):
    """Shards graded by different code must not merge, and a rerun must not keep their grades: a change in any wing
    of the grader (here the sandbox's) or in the helpers the labs grade with (the checkpoint reader, the Kafka
    client) changes the version, a change in the site, the classroom, the command line or a stack module nothing of a
    grade imports does not. What decides is found from the imports: a new helper counts once a lesson imports it."""
    import shutil

    from streamlab.grading.run import runinfo

    copy = tmp_path / "streamlab"
    shutil.copytree(runinfo.package_root(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(runinfo, "package_root", lambda: copy)
    for changed, decides in (("grading/sandbox/box.py", True), ("lessons/checkpoint.py", True),
                             ("stack/kafka.py", True), ("lessons/m06_event_time.py", True),
                             ("conf/log4j2.properties", True), ("site/build.py", False), ("classroom/hub.py", False),
                             ("cli.py", False), ("stack/docker_images.py", False)):
        before = runinfo.grader_version()
        path = copy / changed
        assert path.is_file(), changed
        path.write_text(path.read_text() + "\n# changed\n")
        assert (runinfo.grader_version() != before) == decides, changed
    helper = copy / "lessons" / "new_helper.py"
    helper.write_text("X = 1\n")
    before = runinfo.grader_version()
    helper.write_text("X = 2\n")
    assert runinfo.grader_version() == before, "a module nothing of a grade imports"
    events = copy / "lessons" / "events.py"
    events.write_text(events.read_text() + "\nfrom . import new_helper  # noqa: E402,F401\n")
    before = runinfo.grader_version()
    helper.write_text("X = 3\n")
    assert runinfo.grader_version() != before, "once a lesson imports it, it decides a grade"


def test_the_graders_version_names_the_packages_that_run_and_read_a_grade(monkeypatch):
    """nbgrader runs and scores the notebook, Spark reads the state the checks grade: a machine with another release
    of either grades with other code, so its shards do not merge and a rerun there grades again."""
    import importlib.metadata

    from streamlab.grading.run import runinfo

    real = importlib.metadata.version
    before = runinfo.grader_version()
    assert f"pyspark {real('pyspark')}," in before and f"nbgrader {real('nbgrader')}," in before, before
    for package in ("pyspark", "nbgrader"):
        monkeypatch.setattr(importlib.metadata, "version", lambda name, p=package: "9.9" if name == p else real(name))
        assert runinfo.grader_version() != before, package

