"""streamlab.lessons.m03_state_backends: reading state files, provider and settings of a checkpoint, and measuring a
query on each state store provider.

The file-reading tests build checkpoint folders by hand (milliseconds, no Spark); the last test
runs real queries on both providers against the broker.
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from streamlab.lessons import m03_state_backends as backends
from streamlab.stack.session import STATE_STORES

ROCKSDB = STATE_STORES["rocksdb"]
HDFS = STATE_STORES["hdfs"]


def _offsets(root: Path, provider_class: str, partitions: str = "2") -> None:
    (root / "offsets").mkdir(parents=True)
    conf = {backends.PROVIDER_CONF: provider_class, "spark.sql.shuffle.partitions": partitions}
    for batch in range(2):
        (root / "offsets" / str(batch)).write_text(
            "v1\n" + json.dumps({"batchWatermarkMs": 0, "conf": conf}) + '\n{"t":{"0":1}}\n')


def _write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def _zip(path: Path, ssts: list[tuple[str, int]]) -> None:
    meta = {"sstFiles": [{"localFileName": "x.sst", "dfsSstFileName": n, "sizeBytes": s} for n, s in ssts]}
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("metadata", "v1\n" + json.dumps(meta))


@pytest.fixture
def hdfs_ckpt(tmp_path):
    root = tmp_path / "hdfs"
    _offsets(root, HDFS)
    for partition in (0, 1):
        part = root / "state" / "0" / str(partition)
        _write(part / "1.delta", 100 + partition)
        _write(part / "2.delta", 200)
        _write(part / "2.snapshot", 1000)
        _write(part / ".2.delta.crc", 12)
        _write(part / "_metadata" / "schema", 50)
    _write(root / "state" / "0" / "_metadata" / "metadata", 40)
    return root


@pytest.fixture
def rocksdb_ckpt(tmp_path):
    root = tmp_path / "rocksdb"
    _offsets(root, ROCKSDB)
    part = root / "state" / "0" / "0"
    _write(part / "SSTs" / "000008-aaa.sst", 500)
    _write(part / "SSTs" / "000009-bbb.sst", 700)
    _write(part / "SSTs" / "000010-ccc.sst", 900)  # not listed by any zip yet
    _zip(part / "1.zip", [("000008-aaa.sst", 500)])
    _zip(part / "2.zip", [("000008-aaa.sst", 500), ("000009-bbb.sst", 700)])
    _write(part / "3.changelog", 300)
    return root


def test_provider_and_conf_come_from_the_offsets_log(hdfs_ckpt, rocksdb_ckpt):
    assert backends.provider_of(hdfs_ckpt) == "hdfs"
    assert backends.provider_of(rocksdb_ckpt) == "rocksdb"
    assert backends.checkpoint_conf(hdfs_ckpt)["spark.sql.shuffle.partitions"] == "2"


def test_provider_of_an_empty_checkpoint_says_why(tmp_path):
    with pytest.raises(FileNotFoundError, match="no offsets log"):
        backends.provider_of(tmp_path)


def test_state_files_of_an_hdfs_checkpoint(hdfs_ckpt):
    files = backends.state_files(hdfs_ckpt)
    assert not files["file"].str.contains(".crc", regex=False).any(), "hidden .crc files are left out"
    versioned = files[files["kind"] != "other"]
    assert sorted(zip(versioned["partition"], versioned["version"], versioned["kind"])) == [
        (0, 1, "delta"), (0, 2, "delta"), (0, 2, "snapshot"), (1, 1, "delta"), (1, 2, "delta"), (1, 2, "snapshot")]
    assert set(files.loc[files["kind"] == "other", "version"].isna()) == {True}


def test_bytes_per_batch_sums_partitions_by_kind(hdfs_ckpt):
    table = backends.state_bytes_per_batch(hdfs_ckpt)
    assert table["batch"].tolist() == [0, 1] and table["version"].tolist() == [1, 2]
    assert table["delta"].tolist() == [201, 400]
    assert table["snapshot"].tolist() == [0, 2000]
    assert table["total"].tolist() == [201, 2400]


def test_sst_files_belong_to_the_first_zip_that_lists_them(rocksdb_ckpt):
    files = backends.state_files(rocksdb_ckpt).set_index("file")
    ssts = files[files["kind"] == "sst"]["version"]
    assert ssts["state/0/0/SSTs/000008-aaa.sst"] == 1
    assert ssts["state/0/0/SSTs/000009-bbb.sst"] == 2
    assert ssts.isna()["state/0/0/SSTs/000010-ccc.sst"], "an SST no snapshot lists yet has no version"
    table = backends.state_bytes_per_batch(rocksdb_ckpt).set_index("version")
    assert table.loc[1, "sst"] == 500 and table.loc[2, "sst"] == 700
    assert table.loc[3, "changelog"] == 300 and table.loc[3, "total"] == 300


def test_use_state_store_rejects_unknown_providers():
    with pytest.raises(ValueError, match="provider must be one of"):
        backends.use_state_store(None, "memory")


@pytest.mark.notebooks
def test_measure_both_providers_on_the_same_topic(spark):
    """Real queries: the same 600 new users, 200 per batch, on HDFS and on RocksDB with changelog."""
    import streamlab as sl

    topic = sl.new_topic("test-backends", partitions=2)
    assert backends.produce_new_keys(topic, 600, spark=spark) == 600
    assert sl.end_offsets(topic) == {0: 300, 1: 300}
    runs = {}
    for provider, changelog in [("hdfs", False), ("rocksdb", True)]:
        frame = sl.kafka_stream(topic, backends.KEYS_SCHEMA, maxOffsetsPerTrigger=200).groupBy("user").count()
        ckpt = sl.new_checkpoint(f"test-backends-{provider}")
        runs[provider] = backends.measure_state_store(frame, provider, changelog=changelog, checkpoint=ckpt)
    spark.conf.set(backends.PROVIDER_CONF, HDFS)
    for provider, run in runs.items():
        assert run.table["state_rows"].tolist() == [200, 400, 600]
        assert (run.table["checkpoint_bytes"] > 0).all()
        assert backends.provider_of(run.checkpoint) == provider
        assert run.heap_before > 0 and run.heap_after > 0
        assert run.summary()["keys"] == 600
    kinds = {p: set(backends.state_files(r.checkpoint)["kind"]) for p, r in runs.items()}
    assert "delta" in kinds["hdfs"] and "changelog" not in kinds["hdfs"]
    assert "changelog" in kinds["rocksdb"] and "delta" not in kinds["rocksdb"]
    assert any(c.startswith("state_rocksdb") for c in runs["rocksdb"].table.columns)
    assert any(c.startswith("state_loadedMapCache") for c in runs["hdfs"].table.columns)


def test_wait_for_snapshot_returns_the_partitions_once_every_zip_is_there(tmp_path):
    for partition in ("0", "1"):
        (tmp_path / "state" / "0" / partition).mkdir(parents=True)
        (tmp_path / "state" / "0" / partition / "6.changelog").write_bytes(b"x")
    (tmp_path / "state" / "0" / "_metadata").mkdir()
    (tmp_path / "state" / "0" / "0" / "6.zip").write_bytes(b"PK")
    with pytest.raises(TimeoutError, match=r"6.zip in state partition\(s\) \['1'\]"):
        backends.wait_for_snapshot(tmp_path, 6, timeout=0)
    (tmp_path / "state" / "0" / "1" / "6.zip").write_bytes(b"PK")
    assert backends.wait_for_snapshot(tmp_path, 6, timeout=0) == [0, 1]
    with pytest.raises(TimeoutError, match="any"):
        backends.wait_for_snapshot(tmp_path / "nothing", 6, timeout=0)


def test_wait_for_an_hdfs_snapshot_looks_for_its_own_kind_of_file(tmp_path):
    for partition in ("0", "1"):
        (tmp_path / "state" / "0" / partition).mkdir(parents=True)
        (tmp_path / "state" / "0" / partition / "3.zip").write_bytes(b"PK")   # not an HDFS snapshot
    with pytest.raises(TimeoutError, match=r"3.snapshot in state partition\(s\) \['0', '1'\]"):
        backends.wait_for_snapshot(tmp_path, 3, kind="snapshot", timeout=0)
    for partition in ("0", "1"):
        (tmp_path / "state" / "0" / partition / "3.snapshot").write_bytes(b"x")
    assert backends.wait_for_snapshot(tmp_path, 3, kind="snapshot", timeout=0) == [0, 1]
    with pytest.raises(ValueError, match="kind"):
        backends.wait_for_snapshot(tmp_path, 3, kind="delta", timeout=0)


def test_wait_for_cleanup_gives_the_oldest_version_each_partition_holds(tmp_path):
    for partition in ("0", "1"):
        (tmp_path / "state" / "0" / partition).mkdir(parents=True)
        for name in ("1.delta", "2.delta", "2.snapshot", "3.delta"):
            (tmp_path / "state" / "0" / partition / name).write_bytes(b"x")
    (tmp_path / "state" / "0" / "0" / "1.delta").unlink()      # partition 0 cleaned up, partition 1 not (yet)
    assert backends.wait_for_cleanup(tmp_path, timeout=0) == {0: 2, 1: 1}
    (tmp_path / "state" / "0" / "1" / "1.delta").unlink()
    assert backends.wait_for_cleanup(tmp_path, timeout=60) == {0: 2, 1: 2}, "returns as soon as both are clean"
    assert backends.wait_for_cleanup(tmp_path / "nothing", timeout=0) == {}
