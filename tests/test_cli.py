"""streamlab.cli: the `streamlab` command, including a look at topics without writing code."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import streamlab as sl


def streamlab(*args, env=None, timeout=180, input=None):
    return subprocess.run([sys.executable, "-m", "streamlab", *args], capture_output=True, text=True,
                          timeout=timeout, env=env or os.environ.copy(), input=input)


def test_status_of_a_never_started_broker(tmp_path):
    env = dict(os.environ, STREAMLAB_DATA_DIR=str(tmp_path))
    proc = streamlab("kafka", "status", env=env)
    assert proc.returncode == 1 and "not started" in proc.stdout


def test_kafka_topics_lists_partitions_and_end_offsets(kafka_bootstrap):
    topic = sl.new_topic("cli-topics", partitions=2)
    sl.produce(topic, [{"n": i} for i in range(5)], partition=1)
    proc = streamlab("kafka", "topics")
    assert proc.returncode == 0, proc.stderr
    header = next(line for line in proc.stdout.splitlines() if line.startswith("topic"))
    assert header.split()[:3] == ["topic", "partitions", "end"]
    row = next(line for line in proc.stdout.splitlines() if line.startswith(topic + " "))
    assert row.split() == [topic, "2", "0:0", "1:5"]
    assert kafka_bootstrap in proc.stdout
    sl.delete_topic(topic)


def test_kafka_read_prints_partition_offset_key_and_value(kafka_bootstrap):
    topic = sl.new_topic("cli-read", partitions=1)
    sl.produce(topic, [{"path": "/api/a", "n": 1}, {"path": "/api/b", "n": 2}, {"path": "/api/a", "n": 3}],
               key="path")
    proc = streamlab("kafka", "read", topic)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["partition", "offset", "key", "value"]
    assert lines[1].split(maxsplit=3) == ["0", "0", "/api/a", '{"path": "/api/a", "n": 1}']
    assert lines[3].split(maxsplit=3) == ["0", "2", "/api/a", '{"path": "/api/a", "n": 3}']
    limited = streamlab("kafka", "read", topic, "--limit", "2")
    assert len(limited.stdout.splitlines()) == 4 and "(stopped after 2: --limit N shows more)" in limited.stdout
    sl.delete_topic(topic)


def test_kafka_read_of_a_missing_topic_says_so_and_creates_nothing(kafka_bootstrap):
    proc = streamlab("kafka", "read", "no-such-topic-cli")
    assert proc.returncode == 1 and "does not exist" in proc.stderr and "Traceback" not in proc.stderr
    assert "no-such-topic-cli" not in sl.list_topics()


@pytest.mark.slow
def test_kafka_topics_says_when_kafka_does_not_answer():
    proc = streamlab("kafka", "topics", env=dict(os.environ, KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:9"))
    assert proc.returncode == 2 and "no answer from Kafka at 127.0.0.1:9" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_help_names_every_kafka_action():
    proc = streamlab("kafka", "--help")
    for action in ("start", "stop", "status", "reset", "topics", "read", "console"):
        assert action in proc.stdout
