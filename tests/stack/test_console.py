"""Standard Kafka clients against the course's broker: Kafka's own console tools (from the cached
jars, through `streamlab kafka console`) and kcat. With topic auto-creation on (Kafka's default,
streamlab.stack.kafka_settings), producing to a topic that does not exist yet creates it."""
from __future__ import annotations

import secrets
import shutil
import subprocess
import sys

import pytest

import streamlab as sl
from streamlab.stack import console


def run(*cmd, input=None, timeout=120):
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, input=input)


def fresh_name(prefix: str) -> str:
    name = f"{prefix}-{secrets.token_hex(3)}"
    assert name not in sl.list_topics()
    return name


def test_console_command_fills_in_the_broker(kafka_bootstrap):
    cmd = console.command("producer", ["--topic", "t"])
    assert cmd[-4:] == ["--bootstrap-server", kafka_bootstrap, "--topic", "t"]
    assert cmd[-5] == "org.apache.kafka.tools.ConsoleProducer"
    assert "kafka-tools-" in cmd[cmd.index("-cp") + 1]
    assert console.command("consumer", ["--bootstrap-server=h:1"])[-1] == "--bootstrap-server=h:1"
    with pytest.raises(ValueError, match="unknown tool"):
        console.command("mirror", [])


@pytest.mark.slow
def test_kafka_console_producer_creates_a_new_topic_and_reads_back(kafka_bootstrap):
    topic = fresh_name("console")
    streamlab = [sys.executable, "-m", "streamlab", "kafka", "console"]
    produced = run(*streamlab, "producer", "--topic", topic, "--reader-property", "parse.key=true",
                   "--reader-property", "key.separator=:", input="a:first\nb:second\na:third\n")
    assert produced.returncode == 0, produced.stderr
    assert topic in sl.list_topics()
    assert sl.end_offsets(topic) == {0: 3}, "an auto-created topic has num.partitions=1"
    assert [(r["key"], r["value"]) for r in sl.read_topic(topic)] == [("a", "first"), ("b", "second"),
                                                                     ("a", "third")]
    consumed = run(*streamlab, "consumer", "--topic", topic, "--from-beginning", "--max-messages", "3",
                   "--timeout-ms", "30000", "--formatter-property", "print.key=true",
                   "--formatter-property", "key.separator==")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["a=first", "b=second", "a=third"]
    sl.delete_topic(topic)


@pytest.mark.skipif(shutil.which("kcat") is None,
                    reason="kcat is not installed (Debian/Ubuntu: apt-get install kcat; macOS: brew install kcat)")
@pytest.mark.slow
def test_kcat_produces_to_a_new_topic_and_reads_it_back(kafka_bootstrap):
    topic = fresh_name("kcat")
    listing = run("kcat", "-b", kafka_bootstrap, "-L")
    assert listing.returncode == 0 and "1 brokers:" in listing.stdout, listing.stderr
    produced = run("kcat", "-b", kafka_bootstrap, "-P", "-t", topic, "-K:", input="k1:v1\nk2:v2\n")
    assert produced.returncode == 0, produced.stderr
    consumed = run("kcat", "-b", kafka_bootstrap, "-C", "-t", topic, "-e", "-q", "-f", "%k=%s\\n")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["k1=v1", "k2=v2"]
    assert sl.end_offsets(topic) == {0: 2}
    sl.delete_topic(topic)
