"""The streamlab package: generators, Kafka helpers, the Spark session, checkpoint inspection."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import streamlab as sl
from streamlab import jars
from streamlab.checkpoint import Checkpoint
from streamlab.kafka import TopicNotFoundError

ROOT = Path(__file__).resolve().parents[1]


# --- generators -------------------------------------------------------------------------------

def test_generators_are_deterministic():
    assert sl.access_log(50, seed=3) == sl.access_log(50, seed=3)
    assert sl.access_log(50, seed=3) != sl.access_log(50, seed=4)
    assert sl.timed_events(100, seed=1) == sl.timed_events(100, seed=1)
    assert sl.offset_reports(20, seed=2) == sl.offset_reports(20, seed=2)


def test_article_examples():
    assert [(r["method"], r["path"]) for r in sl.article_requests()] == [
        ("GET", "/api/a"), ("POST", "/api/b"), ("GET", "/api/a")]
    lags = [r["producer_offset"] - r["consumer_offset"] for r in sl.article_offset_reports()]
    assert lags == [5, 8, 3]


def test_offset_reports_never_have_negative_lag():
    assert all(r["producer_offset"] >= r["consumer_offset"] >= 0 for r in sl.offset_reports(500, seed=9))


def test_timed_events_have_the_requested_disorder():
    events = sl.timed_events(2000, seed=5, out_of_order=0.2, late=0.05, max_delay_s=5, late_by_s=120)
    kinds = Counter(e["arrival"] for e in events)
    assert abs(kinds["late"] / 2000 - 0.05) < 0.02 and abs(kinds["out_of_order"] / 2000 - 0.2) < 0.03
    # On-time events arrive in event-time order; a late event arrives after much newer ones.
    on_time = [e["event_time"] for e in events if e["arrival"] == "on_time"]
    assert on_time == sorted(on_time)
    position = {e["id"]: i for i, e in enumerate(events)}
    late = next(e for e in events if e["arrival"] == "late")
    newer_seen_before = [e for e in events[: position[late["id"]]] if e["id"] > late["id"] + 100]
    assert newer_seen_before, "a late event must arrive after events far newer than itself"
    with pytest.raises(ValueError):
        sl.timed_events(10, out_of_order=0.8, late=0.5)


# --- Kafka ------------------------------------------------------------------------------------

def test_topic_produce_offsets_and_read_back(kafka_bootstrap):
    topic = sl.new_topic("pkg-test", partitions=2)
    assert topic.startswith("pkg-test-") and topic in sl.list_topics()
    events = sl.access_log(20, seed=11)
    assert sl.produce(topic, events, key="path") == 20
    assert sum(sl.end_offsets(topic).values()) == 20
    records = sl.read_topic(topic)
    assert sorted(json.dumps(r["value"], sort_keys=True) for r in records) == sorted(
        json.dumps(e, sort_keys=True) for e in events)
    # Same key -> same partition.
    partitions_per_key = {}
    for r in records:
        partitions_per_key.setdefault(r["key"], set()).add(r["partition"])
    assert all(len(p) == 1 for p in partitions_per_key.values())
    sl.delete_topic(topic)


def test_topic_prefix_isolates_runs(kafka_bootstrap, monkeypatch):
    monkeypatch.setenv("STREAMLAB_TOPIC_PREFIX", "student7.")
    topic = sl.new_topic("requests", partitions=1)
    assert topic.startswith("student7.requests-")
    sl.delete_topic(topic)


def test_missing_topic_gets_a_clear_error(kafka_bootstrap):
    with pytest.raises(TopicNotFoundError, match="does not exist"):
        sl.produce("no-such-topic-xyz", [{"a": 1}])
    with pytest.raises(TopicNotFoundError, match="does not exist"):
        sl.end_offsets("no-such-topic-xyz")


def test_bootstrap_servers_prefers_the_environment(monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "kafka:19092")
    assert sl.bootstrap_servers() == "kafka:19092"


# --- Spark session and checkpoints ------------------------------------------------------------

def test_spark_session_is_ready_for_the_course(spark):
    assert spark.version == "4.2.1"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert "spark-sql-kafka-0-10" in spark.sparkContext.getConf().get("spark.jars")
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert sl.spark() is spark, "one session per process"


def _count_paths(spark, topic, ckpt, collector):
    query = (sl.kafka_stream(topic, sl.ACCESS_LOG_SCHEMA, spark=spark).groupBy("path").count()
             .writeStream.outputMode("update").foreachBatch(collector)
             .option("checkpointLocation", ckpt.path).trigger(availableNow=True).start())
    assert query.awaitTermination(180), "query did not finish"
    assert query.exception() is None


@pytest.mark.parametrize("store", ["hdfs", "rocksdb"])
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


def test_new_checkpoints_are_fresh():
    a, b = sl.new_checkpoint("x"), sl.new_checkpoint("x")
    assert a.path != b.path and not Path(a.path).exists()


# --- jars -------------------------------------------------------------------------------------

def test_connector_matches_the_spark_line():
    import pyspark

    assert jars.CONNECTOR_VERSION.split(".")[:2] == pyspark.__version__.split(".")[:2]
    names = [j.name for j in jars.connector_jars()]
    assert any(n.startswith("spark-sql-kafka-0-10_2.13-") for n in names)
    assert not any(n.startswith("scala-library") for n in names), "pyspark already ships Scala"


def test_first_run_offline_says_what_to_do(tmp_path):
    """With an empty cache and no network, fetching fails with a message, not a stack trace."""
    env = dict(os.environ, STREAMLAB_CACHE_DIR=str(tmp_path / "cache"),
               JAVA_TOOL_OPTIONS="-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=9 "
                                 "-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=9")
    proc = subprocess.run([sys.executable, "-m", "streamlab", "fetch", "--connector"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "first run needs network access" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "cache" / "jars" / "connector").exists(), "nothing half-written is kept"


def test_later_runs_work_offline():
    """A cached jar set is used without running the resolver at all."""
    assert jars.is_cached("connector")
    env = dict(os.environ, JAVA_TOOL_OPTIONS="-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=9")
    proc = subprocess.run([sys.executable, "-m", "streamlab", "fetch", "--connector"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Resolving" not in proc.stdout
