"""Kafka offsets for replaying a stream: where a query starts, how far behind it is, and what it lost.

A Kafka topic is a set of partitions; each partition is a log of records numbered 0, 1, 2, ...
(the *offset*). A reader is fully described by one offset per partition: the next record it will
read. These helpers ask Kafka (through kafka-python's admin client and a consumer that joins no
group and commits nothing) the questions module 05 needs:

    sl.m05.earliest_offsets(topic)          # {partition: first offset still stored}
    sl.end_offsets(topic)               # {partition: next offset to be written}  (streamlab.stack.kafka)
    sl.m05.offsets_at(topic, when)          # {partition: first offset whose timestamp >= when}
    sl.m05.to_millis(when), sl.m05.to_iso(ms)  # a time as Kafka's milliseconds, and back
    sl.m05.checkpoint_offsets(ckpt, topic)  # {partition: where a restart of the query resumes}
    sl.m05.checkpoint_lag(ckpt, topic)      # per partition: end offset - checkpoint offset
    sl.m05.offsets_json(topic, offsets)     # '{"topic": {"0": 5, "1": 7}}' for startingOffsets/endingOffsets
    sl.m05.timestamps_json(topic, when)     # the same for startingOffsetsByTimestamp/endingOffsetsByTimestamp
    sl.m05.offset_ranges(rows)              # which offsets a query read, per partition
    sl.m05.delete_records(topic, {0: 20})   # delete records below offset 20 (a data-loss demo)
    sl.m05.add_partitions(topic, 3)         # grow a topic to 3 partitions
    sl.m05.produce_with_event_time(topic, events)  # records whose Kafka timestamp is the event's time
    sl.m05.arrival_order(events, 10, seed=1)    # the events as they reach Kafka when each is up to 10 s late
    sl.m05.consumer_groups()                # consumer groups Kafka knows (Spark's queries make none)
    sl.m05.data_loss_message(error)         # the lines of a failed query's error that say what was lost
    sl.m05.wait_for_rows(collector, 30)     # a running query's output has 30 rows: the seconds it took
    sl.m05.share_read(topic, "queue", ack="release")  # a share group's member: what it was handed, each
                                                       # record acknowledged (accept, release or reject)
    sl.m05.start_share_group(topic, "queue")  # move an idle share group's start offset (new groups: latest)
"""
from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ..stack import console
from ..stack.kafka import (
    TopicNotFoundError,
    admin_client,
    bootstrap_servers,
    end_offsets,
    list_topics,
    produce,
)
from .checkpoint import Checkpoint


def _consumer():
    from kafka import KafkaConsumer

    # No group id: the consumer only answers questions about offsets, it never commits any.
    return KafkaConsumer(bootstrap_servers=bootstrap_servers(), enable_auto_commit=False)


def _partitions(consumer, topic: str) -> list:
    from kafka import TopicPartition

    partitions = consumer.partitions_for_topic(topic)
    if not partitions:
        raise TopicNotFoundError(f"topic {topic!r} does not exist")
    return [TopicPartition(topic, p) for p in sorted(partitions)]


def to_millis(when: datetime | str | int | float) -> int:
    """Milliseconds since 1970-01-01 UTC, what Kafka timestamps are: from a datetime (naive means
    UTC), an ISO string such as ``"2026-01-01T09:00:30Z"``, or a number already in milliseconds."""
    if isinstance(when, (int, float)):
        return int(when)
    if isinstance(when, str):
        when = datetime.fromisoformat(when.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(round(when.timestamp() * 1000))


def to_iso(millis: int) -> str:
    """A Kafka timestamp (milliseconds since 1970-01-01 UTC) as an ISO string: ``"2026-01-01T09:00:30.250Z"``."""
    return datetime.fromtimestamp(millis / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def earliest_offsets(topic: str) -> dict[int, int]:
    """{partition: offset of the oldest record still stored}. 0 for a new topic; larger once
    retention or ``delete_records`` removed the oldest records (Kafka's *log start offset*)."""
    consumer = _consumer()
    try:
        starts = consumer.beginning_offsets(_partitions(consumer, topic))
        return {tp.partition: offset for tp, offset in sorted(starts.items(), key=lambda kv: kv[0].partition)}
    finally:
        consumer.close()


def offsets_at(topic: str, when: datetime | str | int) -> dict[int, int]:
    """{partition: offset of the first record whose Kafka timestamp is at or after ``when``}.

    This is Kafka's ``offsetsForTimes`` lookup, the one Spark does for ``startingOffsetsByTimestamp``.
    A partition with no record that late gets its end offset (nothing to read there).
    """
    millis = to_millis(when)
    consumer = _consumer()
    try:
        partitions = _partitions(consumer, topic)
        found = consumer.offsets_for_times({tp: millis for tp in partitions})
        ends = consumer.end_offsets(partitions)
        return {tp.partition: (found[tp].offset if found.get(tp) is not None else ends[tp])
                for tp in partitions}
    finally:
        consumer.close()


def offsets_json(topic: str, offsets: Mapping[int, int]) -> str:
    """The JSON that ``startingOffsets`` / ``endingOffsets`` (and the ``...ByTimestamp`` options)
    expect: ``{"<topic>": {"0": 12, "1": 7}}``. In ``startingOffsets`` -2 means earliest and -1
    latest; in ``endingOffsets`` -1 means latest."""
    return json.dumps({topic: {str(p): int(o) for p, o in sorted(offsets.items())}})


def timestamps_json(topic: str, when: datetime | str | int) -> str:
    """The JSON for ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``: the same time
    (in milliseconds) for every partition of ``topic``, ``{"<topic>": {"0": 1767258030000, ...}}``."""
    millis = to_millis(when)
    return offsets_json(topic, {partition: millis for partition in end_offsets(topic)})


def offset_ranges(rows, partition: str = "partition", offset: str = "offset"):
    """Which records a query read: one row per Kafka partition with the ``first`` and ``last``
    offset read and how many ``records``. ``rows``: pandas rows with the Kafka partition and
    offset columns (``kafka_partition``/``kafka_offset`` are found too)."""
    import pandas as pd

    columns = list(getattr(rows, "columns", []))
    if partition not in columns and f"kafka_{partition}" in columns:
        partition = f"kafka_{partition}"
    if offset not in columns and f"kafka_{offset}" in columns:
        offset = f"kafka_{offset}"
    if len(rows) == 0:
        return pd.DataFrame(columns=["partition", "first", "last", "records"])
    if partition not in columns or offset not in columns:
        raise ValueError(f"expected Kafka `partition` and `offset` columns, got {columns}")
    grouped = rows.groupby(partition)[offset].agg(["min", "max", "count"]).reset_index()
    grouped.columns = ["partition", "first", "last", "records"]
    return grouped.astype(int).sort_values("partition").reset_index(drop=True)


def checkpoint_offsets(checkpoint, topic: str) -> dict[int, int]:
    """{partition: offset} where a query restarted from ``checkpoint`` resumes reading ``topic``:
    the end offsets of its last *committed* batch (a batch written to ``offsets/`` but never
    committed is run again on restart, from the same start). Empty if nothing was committed."""
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else Checkpoint(str(checkpoint))
    return ckpt.committed_offsets(topic)


def checkpoint_lag(checkpoint, topic: str):
    """How far a (stopped) query is behind ``topic``, per partition, from its checkpoint alone:
    ``lag = end_offset - checkpoint_offset`` (module 01's consumer lag, with the topic's end offset
    as the producer offset and the checkpoint's as the consumer offset). A partition the
    checkpoint does not know yet (added later, or never read) counts from its earliest offset.
    Returns a pandas DataFrame: partition, end_offset, checkpoint_offset, lag."""
    import pandas as pd

    ends = end_offsets(topic)
    done = checkpoint_offsets(checkpoint, topic)
    starts = earliest_offsets(topic) if set(ends) - set(done) else {}
    rows = []
    for partition, end in ends.items():
        position = done.get(partition, starts.get(partition, 0))
        rows.append({"partition": partition, "end_offset": end, "checkpoint_offset": position,
                     "lag": end - position})
    return pd.DataFrame(rows, columns=["partition", "end_offset", "checkpoint_offset", "lag"])


def delete_records(topic: str, before: Mapping[int, int] | int) -> dict[int, int]:
    """Delete every record of ``topic`` with an offset below ``before`` (``{partition: offset}``,
    or one offset for every partition), as retention would. Returns the new earliest offsets.

    Kafka's ``DeleteRecords`` (kafka-python's ``KafkaAdminClient.delete_records``): offsets are
    never reused, the partition simply starts later. A query whose checkpoint points below the
    new start has lost data (see ``failOnDataLoss``)."""
    from kafka import TopicPartition

    ends = end_offsets(topic)
    wanted = {p: before for p in ends} if isinstance(before, int) else dict(before)
    unknown = set(wanted) - set(ends)
    if unknown:
        raise ValueError(f"topic {topic!r} has no partition {sorted(unknown)}; it has {sorted(ends)}")
    admin = admin_client()
    try:
        admin.delete_records({TopicPartition(topic, p): min(int(o), ends[p]) for p, o in wanted.items()})
    finally:
        admin.close()
    return earliest_offsets(topic)


def add_partitions(topic: str, total: int) -> int:
    """Grow ``topic`` to ``total`` partitions (Kafka can add partitions, never remove them).
    Records keep their partitions; new keyed records may hash elsewhere. Returns the new count."""
    import time

    from kafka.admin import NewPartitions

    admin = admin_client()
    try:
        admin.create_partitions({topic: NewPartitions(total_count=total)})
    finally:
        admin.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if len(end_offsets(topic)) == total:
            return total
        time.sleep(0.2)
    raise TimeoutError(f"topic {topic!r} did not show {total} partitions within 30 s")


def produce_with_event_time(topic: str, events: Iterable[dict], *, time_field: str = "ts",
                            key: str | Callable[[Any], Any] | None = None) -> int:
    """Like ``sl.produce``, but each record's Kafka timestamp is the event's own time
    (``event[time_field]``) instead of the moment it was sent, so time-based positions
    (``startingOffsetsByTimestamp``, ``offsets_at``) line up with event times. The topic is set to
    keep its records forever (``retention.ms=-1``): otherwise Kafka's time-based retention would
    delete records whose timestamps are older than a week. Returns how many were sent."""
    from kafka.admin import ConfigResource, ConfigResourceType

    if topic not in list_topics():
        raise TopicNotFoundError(f"topic {topic!r} does not exist: create it with new_topic(...) first")
    admin = admin_client()
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "-1"})])
    finally:
        admin.close()
    return produce(topic, events, key=key, timestamp_ms=lambda event: to_millis(event[time_field]))


def arrival_order(events: Iterable[dict], max_delay_s: float, *, seed: int, time_field: str = "ts") -> list[dict]:
    """``events`` in the order they reach Kafka when each is delayed by a seeded random 0 to ``max_delay_s``
    seconds after its own time (an agent that buffers): an event can arrive after others up to ``max_delay_s``
    younger than it, never more. Written with ``produce_with_event_time``, a partition's timestamps are then out
    of order, within that bound."""
    import random

    rng = random.Random(seed)
    delayed = [(to_millis(event[time_field]) + rng.uniform(0, max_delay_s * 1000), i, event)
               for i, event in enumerate(events)]
    return [event for _, _, event in sorted(delayed, key=lambda item: item[:2])]


def consumer_groups(topic: str | None = None) -> list[str]:
    """The consumer groups Kafka knows, or with ``topic`` only those that committed offsets for it.
    Monitoring tools compute lag from a group's committed offsets; a Spark query commits none (its
    offsets live in its checkpoint), so no group shows it."""
    admin = admin_client()
    try:
        groups = sorted(group for group, _ in admin.list_consumer_groups())
        if topic is None:
            return groups
        return [group for group in groups
                if any(tp.topic == topic for tp in admin.list_consumer_group_offsets(group))]
    finally:
        admin.close()


def data_loss_message(error: BaseException) -> str:
    """The part of a failed query's error that explains a data loss, without the Java stack trace:
    the "Some data may have been lost ..." sentence and the "Reason: ..." line (which offsets could
    not be read). Falls back to the error's first line."""
    lines = [line.strip() for line in str(error).splitlines()]
    keep = []
    for line in lines:
        if "Some data may have been lost" in line and not keep:
            keep.append(line[line.index("Some data"):])
        elif line.startswith("Reason:") and keep:
            keep.append(line)
            break
    return "\n".join(keep) if keep else (lines[0] if lines else type(error).__name__)


def wait_for_rows(collector, n: int = 1, *, timeout_s: float = 60) -> float:
    """Wait until a running query's output (a ``sl.BatchCollector``) holds at least ``n`` rows, and
    return the seconds it took: how long the query waited before it ran a batch. Raises
    ``TimeoutError`` after ``timeout_s`` seconds, saying how many rows had come."""
    started = time.monotonic()
    while len(collector.frame()) < n:
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"{len(collector.frame())} of {n} rows after {timeout_s:g} s")
        time.sleep(0.1)
    return time.monotonic() - started


# ----------------------------------------------------------------------------- a queue beside the log

SHARE_ACKS = {"accept": [], "release": ["--release"], "reject": ["--reject"]}
_DELIVERED = re.compile(r"^Partition:(\d+)\tOffset:(\d+)\tDelivery:(\d+)\t(.*?)\t(.*)$")


def share_read(topic: str, group: str, *, ack: str = "accept", max_records: int = 1000, wait_s: float = 5):
    """What share group ``group`` is handed of ``topic``, read by one member (Kafka's own share consumer,
    ``kafka-console-share-consumer``), each record acknowledged as ``ack`` says:

    * ``"accept"``: processed, never delivered to this group again;
    * ``"release"``: given back, delivered again with its delivery count one higher;
    * ``"reject"``: never delivered again, unprocessed.

    Returns one row per record (partition, offset, delivery: how many times the group was handed it, key,
    value), sorted by offset; empty when the group had nothing to hand out within ``wait_s`` seconds. Records
    handed out but not read before ``max_records`` are released when the member leaves."""
    import pandas as pd

    if ack not in SHARE_ACKS:
        raise ValueError(f"ack must be one of {', '.join(SHARE_ACKS)}, not {ack!r}")
    shown = ["print.partition=true", "print.offset=true", "print.delivery=true", "print.key=true"]
    args = ["--topic", topic, "--group", group, "--max-messages", str(max_records),
            "--timeout-ms", str(int(wait_s * 1000)), *SHARE_ACKS[ack]]
    for prop in shown:
        args += ["--formatter-property", prop]
    proc = subprocess.run(console.command("share-consumer", args), capture_output=True, text=True,
                          timeout=wait_s + 120)
    rows = [match.groups() for match in map(_DELIVERED.match, proc.stdout.splitlines()) if match]
    if not rows and "Processed a total of 0 messages" not in proc.stdout + proc.stderr:
        raise RuntimeError(f"Kafka's share consumer failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    frame = pd.DataFrame(rows, columns=["partition", "offset", "delivery", "key", "value"])
    for column in ("partition", "offset", "delivery"):
        frame[column] = frame[column].astype(int)
    return frame.sort_values(["partition", "offset"], ignore_index=True)


def start_share_group(topic: str, group: str, *, at: str = "earliest") -> dict[int, int]:
    """Move share group ``group``'s start offset on ``topic`` to ``at`` (``"earliest"``, ``"latest"``), as an
    operator does with ``kafka-share-groups --reset-offsets``: the one way back for a share group, allowed only
    while no member is active. A new group starts at ``latest`` (the group config ``share.auto.offset.reset``).
    Returns {partition: new start offset}."""
    if at not in ("earliest", "latest"):
        raise ValueError(f"at must be 'earliest' or 'latest', not {at!r}")
    args = ["--reset-offsets", f"--to-{at}", "--group", group, "--topic", topic, "--execute"]
    proc = subprocess.run(console.command("share-groups", args), capture_output=True, text=True, timeout=120)
    moved = {int(fields[2]): int(fields[3]) for fields in (line.split() for line in proc.stdout.splitlines())
             if len(fields) == 4 and fields[0] == group and fields[1] == topic}
    if proc.returncode != 0 or not moved:
        raise RuntimeError(f"Kafka could not move share group {group!r} (exit {proc.returncode}): "
                           f"{(proc.stdout + proc.stderr).strip()[-2000:]}")
    return moved
