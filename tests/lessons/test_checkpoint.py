"""streamlab.lessons.checkpoint: fresh checkpoint locations, and reading one (offsets, commits, state)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import streamlab as sl
from streamlab.lessons.checkpoint import Checkpoint


def _count_paths(spark, topic, ckpt, collector):
    query = (sl.kafka_stream(topic, sl.ACCESS_LOG_SCHEMA, spark=spark).groupBy("path").count()
             .writeStream.outputMode("update").foreachBatch(collector)
             .option("checkpointLocation", ckpt.path).trigger(availableNow=True).start())
    assert query.awaitTermination(180), "query did not finish"
    assert query.exception() is None


@pytest.mark.parametrize("store", ["hdfs", "rocksdb"])
@pytest.mark.slow
def test_checkpoint_inspection_after_a_restart(spark, store):
    """Two runs on one checkpoint: offsets, commits and state read back match the data."""
    spark = sl.spark(state_store=store)
    topic = sl.new_topic(f"ckpt-{store}", partitions=2)
    events = sl.access_log(30, seed=21)
    ckpt, out = sl.new_checkpoint(f"pkg-{store}"), sl.BatchCollector()
    sl.produce(topic, events[:20], key="path")
    _count_paths(spark, topic, ckpt, out)
    sl.produce(topic, events[20:], key="path")
    _count_paths(spark, topic, ckpt, out)

    assert ckpt.commits()["batch"].tolist() == [0, 1]
    offsets = ckpt.offsets()
    last = offsets[offsets.batch == 1].set_index("partition")["offset"].to_dict()
    assert last == sl.end_offsets(topic)
    state = {r["path"]: r["count"] for r in
             ckpt.state().selectExpr("key.path AS path", "value.count AS count").collect()}
    assert state == Counter(e["path"] for e in events)
    meta = ckpt.state_metadata().collect()
    assert [(m.operatorId, m.numPartitions) for m in meta] == [(0, 2)]
    files = ckpt.files()
    if store == "rocksdb":
        assert any(f.endswith(".zip") or f.endswith(".changelog") for f in files), files
    else:
        assert any(f.endswith(".delta") for f in files), files
    # Written through Hadoop's FileSystem (session.CHECKPOINT_FILES): each file renamed into place from its temporary
    # name, none left behind, and the checksum Hadoop keeps beside each, as Spark's default FileContext writes them
    root = Path(ckpt.path)
    assert not [p for p in root.rglob("*") if p.name.endswith(".tmp")], "no temporary file left behind"
    for name in ("offsets/0", "offsets/1", "commits/0", "commits/1", "metadata"):
        assert (root / name).with_name(f".{Path(name).name}.crc").is_file(), f"{name} has its checksum beside it"
    sl.spark(state_store="hdfs")


def test_checkpoint_reads_offsets_and_commits_files(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    (tmp_path / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n'
                                            '{"t":{"1":4,"0":7}}\n')
    (tmp_path / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":1500}\n')
    ckpt = Checkpoint(tmp_path)
    assert ckpt.offsets()[["partition", "offset"]].values.tolist() == [[0, 7], [1, 4]]
    assert ckpt.commits().to_dict("records") == [{"batch": 0, "next_watermark_ms": 1500}]
    assert ckpt.last_committed_batch() == 0


def test_checkpoint_is_the_one_reader_of_its_folder(tmp_path):
    """What a savepoint and the grader ask of a checkpoint folder, answered by Checkpoint alone: the latest planned
    batch, whether a batch is planned as Spark writes it, where the sources started, a new query id."""
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text('v1\n{"conf":{}}\n{"t":{"0":3}}\n')
    (tmp_path / "offsets" / "1").write_text('{"t":{"0":5}}\n')   # no version header: not Spark's
    (tmp_path / "sources" / "0").mkdir(parents=True)
    (tmp_path / "sources" / "0" / "0").write_bytes(b'\x00v1\n{"t":{"0":2,"1":0}}')
    ckpt = Checkpoint(tmp_path)
    assert ckpt.query_id() is None and ckpt.last_planned_batch() == 1
    assert ckpt.is_planned(0) and not ckpt.is_planned(1) and not ckpt.is_planned(2)
    assert ckpt.initial_offsets() == ckpt.initial_offsets(0) == {"t": {0: 2, 1: 0}} and ckpt.initial_offsets(1) == {}
    assert sl.m07.initial_offsets(ckpt) == {"t": {"0": 2, "1": 0}}
    first = ckpt.new_query_id()
    assert ckpt.query_id() == first and ckpt.new_query_id() != first
    assert ckpt.schema_files() == []


def test_batch_times_are_when_each_planned_batch_started(tmp_path):
    import pandas as pd

    (tmp_path / "offsets").mkdir()
    for batch, started in ((0, 1_767_258_000_000), (1, 1_767_258_007_500)):
        (tmp_path / "offsets" / str(batch)).write_text(
            f'v1\n{{"batchWatermarkMs":{batch * 1000},"batchTimestampMs":{started},"conf":{{}}}}\n{{"t":{{"0":3}}}}\n')
    times = Checkpoint(tmp_path).batch_times()
    assert times["batch"].tolist() == [0, 1]
    assert times["timestamp"].tolist() == [pd.Timestamp("2026-01-01 09:00:00", tz="UTC"),
                                           pd.Timestamp("2026-01-01 09:00:07.5", tz="UTC")]
    assert times["watermark"].tolist() == [pd.Timestamp(0, tz="UTC"), pd.Timestamp(1000, unit="ms", tz="UTC")]


def test_new_checkpoints_are_fresh():
    a, b = sl.new_checkpoint("x"), sl.new_checkpoint("x")
    assert a.path != b.path and not Path(a.path).exists()


def test_a_new_query_id_leaves_no_stale_checksum_for_spark_to_trip_on(spark, tmp_path):
    """A savepoint's copy gets a new query id, written over Spark's ``metadata``: Hadoop's checksum beside it would no
    longer match, and Spark's read of the file (through Hadoop's file system) would fail with ChecksumException."""
    jvm = spark.sparkContext._jvm
    fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark.sparkContext._jsc.hadoopConfiguration())
    metadata = jvm.org.apache.hadoop.fs.Path(str(tmp_path / "metadata"))
    out = fs.create(metadata, True)
    out.write(bytearray(b'{"id":"00000000-0000-0000-0000-000000000000"}\n'))
    out.close()
    assert (tmp_path / ".metadata.crc").is_file(), "Hadoop wrote its checksum, as Spark's checkpoints have"

    query_id = Checkpoint(tmp_path).new_query_id()
    read = jvm.org.apache.commons.io.IOUtils.toString(fs.open(metadata), "UTF-8")
    assert query_id in read, "read back through Hadoop, checksum and all"
    assert Checkpoint(tmp_path).query_id() == query_id
