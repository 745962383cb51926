"""streamlab.lessons.m07_upgrades.savepoints: taking a savepoint (a checked copy of a checkpoint); and what
builds on it (``version_tree``, and ``upgrades`` end to end: test_upgrades.py beside this file has its unit tests).

The fast tests build checkpoint folders by hand, file by file, as Spark lays them out; the slow
one (marked ``notebooks``) runs real queries against the broker.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import streamlab as sl

QUERY_ID = "11111111-2222-4333-8444-555555555555"


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMLAB_DATA_DIR", str(tmp_path))
    return tmp_path


def make_checkpoint(root: Path, *, planned: int, committed: int, topic: str = "requests-abc123",
                    tws: bool = False) -> sl.Checkpoint:
    """A checkpoint folder shaped like Spark's: metadata, offsets/0..planned, commits/0..committed."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "sources" / "0").mkdir(parents=True)
    (root / "metadata").write_text(json.dumps({"id": QUERY_ID}) + "\n")
    (root / "sources" / "0" / "0").write_bytes(b"\x00v1\n" + json.dumps({topic: {"0": 0, "1": 0}}).encode())
    conf = {"spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
            "spark.sql.shuffle.partitions": "2"}
    for batch in range(planned + 1):
        offsets = {topic: {"0": 10 * (batch + 1), "1": 20 * (batch + 1)}}
        (root / "offsets" / str(batch)).write_text(
            "v1\n" + json.dumps({"batchWatermarkMs": 0, "conf": conf}) + "\n" + json.dumps(offsets) + "\n")
    for batch in range(committed + 1):
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    if tws:
        schema = root / "state" / "0" / "_stateSchema" / "default" / "0_abc"
        schema.parent.mkdir(parents=True)
        schema.write_text("schema")
        entry = root / "state" / "0" / "_metadata" / "v2" / "0"
        entry.parent.mkdir(parents=True)
        entry.write_text("v2\n" + json.dumps({"stateStoreInfo": [{"stateSchemaFilePaths": [f"file:{schema}"]}]}))
    return sl.Checkpoint(root)


def test_take_savepoint_copies_a_committed_checkpoint(data_dir):
    original = make_checkpoint(data_dir / "v0", planned=1, committed=1, tws=True)
    copy = sl.m07.take_savepoint(original, "v0-savepoint")

    assert Path(copy.path).parent == data_dir / "checkpoints" and Path(copy.path).name.startswith("v0-savepoint-")
    assert copy.commits()["batch"].tolist() == [0, 1]
    assert copy.query_id() != QUERY_ID, "a savepoint gets its own query id"
    info = sl.m07.savepoint_info(copy)
    assert info["taken_from"] == original.path and info["batch"] == 1 and info["source_query_id"] == QUERY_ID
    recorded = (Path(copy.path) / "state/0/_metadata/v2/0").read_text()
    assert copy.path in recorded and original.path + "/" not in recorded, "schema paths point at the copy"
    assert sl.m07.take_savepoint(original, "same-id", new_query_id=False).query_id() == QUERY_ID
    assert sl.m07.savepoint_info(original) is None


def test_take_savepoint_refuses_an_uncommitted_batch(data_dir):
    running = make_checkpoint(data_dir / "v0", planned=2, committed=1)
    with pytest.raises(sl.m07.SavepointError, match="batch 2 .* not committed"):
        sl.m07.take_savepoint(running, "too-early")
    assert not list((data_dir / "checkpoints").glob("too-early-*")), "nothing is copied"


def test_take_savepoint_refuses_what_is_not_a_checkpoint(data_dir):
    (data_dir / "empty").mkdir()
    with pytest.raises(sl.m07.SavepointError, match="not a checkpoint"):
        sl.m07.take_savepoint(data_dir / "empty", "nothing")
    with pytest.raises(TypeError):
        sl.m07.take_savepoint(42, "nothing")


def test_offsets_and_conf_read_from_the_checkpoint(data_dir):
    ckpt = make_checkpoint(data_dir / "v0", planned=2, committed=1)
    assert json.loads(sl.m07.starting_offsets(ckpt)) == {"requests-abc123": {"0": 20, "1": 40}}, \
        "last *committed* batch"
    assert sl.m07.initial_offsets(ckpt) == {"requests-abc123": {"0": 0, "1": 0}}
    conf = sl.m07.recorded_conf(ckpt)
    assert conf["providerClass"] == "HDFSBackedStateStoreProvider" and conf["partitions"] == "2"


def test_schema_file_paths_read_what_each_copy_points_at(data_dir):
    original = make_checkpoint(data_dir / "tws", planned=0, committed=0, tws=True)
    recorded = sl.m07.schema_file_paths(original)
    assert recorded == [f"file:{original.path}/state/0/_stateSchema/default/0_abc"]
    plain = original.copy_to("plain")
    assert sl.m07.schema_file_paths(plain) == recorded, "a plain copy still points at the original's files"
    savepoint = sl.m07.take_savepoint(original, "sp")
    assert sl.m07.schema_file_paths(savepoint) == [f"file:{savepoint.path}/state/0/_stateSchema/default/0_abc"]
    assert sl.m07.schema_file_paths(make_checkpoint(data_dir / "plain-count", planned=0, committed=0)) == []


def test_plot_version_tree_draws_one_lane_per_version(data_dir):
    import matplotlib

    matplotlib.use("Agg")
    v0 = make_checkpoint(data_dir / "v0", planned=1, committed=1)
    savepoint = sl.m07.take_savepoint(v0, "sp")
    v1 = sl.m07.take_savepoint(savepoint, "v1")      # a copy of a copy: drawn as a branch of v0
    ax = sl.m07.plot_version_tree({"v0": v0, "v1": v1})
    assert [t.get_text().strip() for t in ax.texts if t.get_text().strip() in ("v0", "v1")] == ["v0", "v1"]
    assert any("savepoint (batch 1)" in t.get_text() for t in ax.texts)


@pytest.mark.notebooks
def test_savepoint_of_a_real_query_and_two_changes(spark, data_dir):
    """A real v0 run, a savepoint refused while it runs, then one accepted and one refused change."""
    topic = sl.new_topic("savepoints-test")
    sl.produce(topic, sl.access_log(30, seed=3), key="path")
    events = sl.kafka_stream(topic, sl.ACCESS_LOG_SCHEMA, spark=spark)
    ckpt = sl.new_checkpoint("v0")
    query = (events.groupBy("path").count().writeStream.outputMode("update").foreachBatch(sl.BatchCollector())
             .option("checkpointLocation", ckpt.path).start())
    try:
        sl.catch_up(query)
        with pytest.raises(sl.m07.SavepointError, match="still running"):
            sl.m07.take_savepoint(query, "sp")
    finally:
        query.stop()
    savepoint = sl.m07.take_savepoint(query, "sp")   # the stopped query: found through its checkpoint
    assert sl.m07.savepoint_info(savepoint)["taken_from"] == ckpt.path
    sl.produce(topic, sl.access_log(10, seed=4), key="path")

    accepted = sl.m07.try_change("filter", events.filter("method != 'PUT'").groupBy("path").count(), savepoint)
    refused = sl.m07.try_change("two keys", events.groupBy("path", "method").count(), savepoint)
    assert (accepted.outcome, accepted.batches_run) == ("accepted", 1)
    assert (refused.outcome, refused.error_class) == ("refused", "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE")
    assert savepoint.last_committed_batch() == 0, "try_change works on copies, never on the savepoint"
