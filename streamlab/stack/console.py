"""Kafka's own command-line tools, run from the jars the course caches (no Kafka download needed).

    streamlab kafka console producer --topic greetings          # type records, one per line
    streamlab kafka console consumer --topic greetings --from-beginning
    streamlab kafka console topics --describe --topic greetings
    streamlab kafka console groups --describe --all-groups      # consumer groups and their lag
    streamlab kafka console share-consumer --topic greetings --group queue   # a share group's member
    streamlab kafka console share-groups --describe --group queue            # a share group's start offset

Each is the tool behind Kafka's ``bin/kafka-console-producer.sh`` (and so on), with the same
options; ``--bootstrap-server`` is filled in with the Kafka in use unless you give one.
"""
from __future__ import annotations

import os

from . import broker
from .java import QUICK_JIT, require_java
from .jvm_archives import jvm_options
from .kafka import bootstrap_servers
from .paths import PACKAGE_DIR

# name -> (Java class, the script of a Kafka distribution that runs it)
TOOLS = {
    "producer": ("org.apache.kafka.tools.ConsoleProducer", "kafka-console-producer.sh"),
    "consumer": ("org.apache.kafka.tools.consumer.ConsoleConsumer", "kafka-console-consumer.sh"),
    "topics": ("org.apache.kafka.tools.TopicCommand", "kafka-topics.sh"),
    "groups": ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "kafka-consumer-groups.sh"),
    # share groups (KIP-932, production-ready since Kafka 4.2): a queue's consumer, and the groups' admin tool
    "share-consumer": ("org.apache.kafka.tools.consumer.ConsoleShareConsumer", "kafka-console-share-consumer.sh"),
    "share-groups": ("org.apache.kafka.tools.consumer.group.ShareGroupCommand", "kafka-share-groups.sh"),
}
HEAP = "256m"


def command(tool: str, args: list[str], *, servers: str | None = None) -> list[str]:
    """The command line that runs Kafka's ``tool`` (a key of ``TOOLS``) with ``args``."""
    if tool not in TOOLS:
        raise ValueError(f"unknown tool {tool!r}; choose one of {', '.join(TOOLS)}")
    main_class, _script = TOOLS[tool]
    java = require_java()
    asks_for_help = any(a in ("-h", "--help", "--version") for a in args)
    if not asks_for_help and not any(a.split("=")[0] == "--bootstrap-server" for a in args):
        args = ["--bootstrap-server", servers or bootstrap_servers(), *args]
    classpath = broker.classpath("tools")
    # a short-lived JVM: the quick JIT and its start-up archive (2.1 s -> 0.7 s for `topics --list`)
    return [java, f"-Xmx{HEAP}", "-Djava.awt.headless=true", QUICK_JIT,
            *jvm_options("kafka-tools", java=java),
            f"-Dlog4j2.configurationFile={PACKAGE_DIR / 'conf' / 'kafka-tools-log4j2.yaml'}",
            "-cp", classpath, main_class, *args]


def exec_tool(tool: str, args: list[str]) -> None:
    """Replace this process by Kafka's ``tool``: it reads the terminal and handles Ctrl-C itself."""
    cmd = command(tool, args)
    os.execv(cmd[0], cmd)
