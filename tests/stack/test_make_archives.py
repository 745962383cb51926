"""streamlab.stack.make_archives: the representative starts that make the JVMs' start-up archives."""
from __future__ import annotations

import pytest

from streamlab.stack import jars, make_archives
from streamlab.stack.paths import cache_dir


@pytest.mark.slow
def test_missing_archives_are_made_by_a_representative_start(tmp_path, monkeypatch, capsys):
    """In an empty archive folder: a broker of its own and Kafka's console consumer reading a topic make
    the broker's and the tools' archives; nothing is left running, and a second call has nothing to do."""
    jars.fetch("kafka", quiet=True)
    jars.fetch("tools", quiet=True)
    (tmp_path / "jars").symlink_to(cache_dir() / "jars")
    monkeypatch.setenv("STREAMLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("STREAMLAB_JVM_ARCHIVES", raising=False)
    kinds = ["kafka-broker", "kafka-tools"]
    assert not any(s.ready for s in make_archives.states() if s.kind in kinds)

    made = {s.kind: s for s in make_archives.make_missing(kinds)}
    out = capsys.readouterr().out
    assert all(made[kind].ready and made[kind].size_mb > 5 for kind in kinds), out
    assert not made["spark-driver"].ready, "only the kinds asked for"
    assert not list((tmp_path / "archives").glob("*.part")), "every part was complete and renamed"

    make_archives.make_missing(kinds)
    assert capsys.readouterr().out == "", "nothing missing, nothing to say"


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown kinds of JVM: spark-driverr"):
        make_archives.make_missing(["spark-driverr"])


def test_a_kind_that_could_not_be_made_is_not_tried_again_by_make(tmp_path, monkeypatch, capsys):
    """`make setup` runs `streamlab fetch --archives --quiet` every time: a kind that failed for this JDK and
    these jars is left alone there (a note says why); `streamlab fetch --archives` tries it again."""
    (tmp_path / "jars").symlink_to(cache_dir() / "jars")
    monkeypatch.setenv("STREAMLAB_CACHE_DIR", str(tmp_path))
    (broker_state,) = [s for s in make_archives.states() if s.kind == "kafka-broker"]
    broker_state.path.parent.mkdir(parents=True, exist_ok=True)
    broker_state.path.with_suffix(".failed").write_text("the JVM was killed while writing")
    assert make_archives.failed_before(broker_state.path)
    make_archives.make_missing(["kafka-broker"], quiet=True)
    assert capsys.readouterr().out == "", "not tried again"


def test_an_executor_killed_while_writing_its_archive_gets_another_run(tmp_path, monkeypatch):
    """The worker kills an executor 10 s after its application ends; on a busy machine that can cut its
    archive short (the part file stays incomplete). The cluster query then runs again with a fresh
    executor, up to EXECUTOR_TRIES times, and stops as soon as the archive is there."""
    from types import SimpleNamespace

    runs, options = [], []
    monkeypatch.setattr(make_archives.cluster, "start", lambda *a, **k: None)
    monkeypatch.setattr(make_archives.cluster, "stop", lambda *a, **k: None)
    monkeypatch.setattr(make_archives.cluster, "worker_pids", lambda: [])
    monkeypatch.setattr(make_archives, "_wait_for", lambda kinds, timeout: None)
    monkeypatch.setattr(make_archives, "jvm_options", lambda kind: [f"-XX:ArchiveClassesAtExit=part-{len(options)}"])

    def run(cmd, env, **kwargs):
        runs.append(cmd)
        options.append(env["STREAMLAB_EXECUTOR_JAVA_OPTIONS"])

    monkeypatch.setattr(make_archives.subprocess, "run", run)
    monkeypatch.setattr(make_archives, "state", lambda kind: SimpleNamespace(ready=len(runs) >= 2))
    make_archives._cluster_run("127.0.0.1:9092", "t", tmp_path, ["spark-executor"])
    assert len(runs) == 2, "written on the second run: no third"
    assert options == ["-XX:ArchiveClassesAtExit=part-0", "-XX:ArchiveClassesAtExit=part-1"], "a new part file each run"

    runs.clear(), options.clear()
    monkeypatch.setattr(make_archives, "state", lambda kind: SimpleNamespace(ready=False))
    make_archives._cluster_run("127.0.0.1:9092", "t", tmp_path, ["spark-executor"])
    assert len(runs) == make_archives.EXECUTOR_TRIES, "bounded: the doctor then says which archive is missing"
