"""Savepoints the Spark way: a committed checkpoint, copied; and trying an upgrade on a copy.

Flink has ``flink savepoint <job>``: a manually taken snapshot of the source offsets and the
state, from which any version of the job can start. Spark has no such command. What a Spark user
does instead, and what this module does for you:

    query.stop()                                   # a graceful stop, after sl.catch_up(query)
    sp = sl.m07.take_savepoint(ckpt, "v0-at-batch-3")  # a copy of a committed checkpoint
    sl.run_to_end(new_code(events), output_mode="update", checkpoint=sp)   # v1 starts from it

``take_savepoint`` refuses a checkpoint whose last batch has no commit (a half-finished batch)
or that a query of this Spark session is still running. The copy gets its own query id and its
own state-schema paths, and remembers where it came from (``savepoint_info``).

    outcome = sl.m07.try_change("new grouping key", events.groupBy("method").count(), sp)
    outcome.outcome, outcome.error_class   # ('refused', 'STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE')
    sl.m07.changes_table([outcome, ...])       # one row per change: accepted or refused, and why

``sl.m07.starting_offsets(sp)`` gives the savepoint's Kafka position as ``startingOffsets`` JSON,
for a *new* job that is bootstrapped with the old job's state and must read on from the same
point. ``sl.m07.PathStats`` is a ``transformWithState`` processor (count and latest
timestamp per path) that can start from such an initial state.

This module takes and reads savepoints; module 07's other tools build on it: ``upgrades``
(``try_change``, ``changes_table``: a changed query tried on a copy), ``version_tree``
(``plot_version_tree``) and ``path_stats`` (``PathStats``).
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from ..checkpoint import Checkpoint, new_checkpoint, rewrite_file
from ..streams import write_batch_to_topic
from . import path_stats
from .path_stats import PATH_STATS_OUTPUT  # noqa: F401 (sl.m07.PATH_STATS_OUTPUT)

SAVEPOINT_FILE = "_savepoint.json"
"""Written into a savepoint copy: which checkpoint it was taken from, at which batch. Spark
ignores files it does not know in a checkpoint folder."""

FIXED_BY_CHECKPOINT = (
    "spark.sql.streaming.stateStore.providerClass",
    "spark.sql.shuffle.partitions",
    "spark.sql.streaming.stateStore.encodingFormat",
    "spark.sql.streaming.multipleWatermarkPolicy",
)
"""Settings a checkpoint records in its offsets log and uses on every restart, whatever the
session says (see ``recorded_conf``)."""


class SavepointError(RuntimeError):
    """The checkpoint cannot be copied as a savepoint now; the message says why."""


# -- taking a savepoint ---------------------------------------------------------------------------

def take_savepoint(source, name: str, *, spark=None, new_query_id: bool = True) -> Checkpoint:
    """Copy a committed, stopped checkpoint to a fresh location ``<data>/checkpoints/<name>-<hex>``.

    ``source`` is an ``sl.Checkpoint``, a checkpoint path, or a stopped ``StreamingQuery``.
    Refuses (``SavepointError``) when
      * the checkpoint has no committed batch, or its last ``offsets/N`` has no ``commits/N``
        (a batch was planned but did not finish: the state and the offsets do not match);
      * a query of this Spark session is running on it (its files change under the copy).
        Queries in *other* processes cannot be seen from here: stop them first.
    The copy:
      * gets a new query id (``new_query_id=False`` keeps the original's; two runs with the same
        id cannot coexist in one session: starting one stops the other);
      * points its ``transformWithState`` state-schema file paths at itself (Spark records them
        as absolute paths; a plain copy would still read the original's);
      * records its origin in ``_savepoint.json`` (read it with ``savepoint_info``).
    """
    original = checkpoint_of(source)
    if original.query_id() is None:
        raise SavepointError(f"{original.path} is not a checkpoint (no metadata file)")
    last_planned = original.last_planned_batch()
    last_committed = original.last_committed_batch()
    if last_committed is None:
        raise SavepointError("the checkpoint has no committed batch yet: nothing consistent to copy")
    if last_planned is not None and last_planned != last_committed:
        raise SavepointError(f"batch {last_planned} is in the offsets log but not committed (last commit: "
                             f"batch {last_committed}): the query is running or was stopped mid-batch. "
                             f"Let it finish (sl.catch_up) and stop it, or restart it once to complete the batch")
    running = _running_query_on(original, spark)
    if running is not None:
        raise SavepointError(f"query {running.name or running.id} is still running on this checkpoint: "
                             f"sl.catch_up(query) then query.stop() before taking a savepoint")
    copy = new_checkpoint(name)
    shutil.copytree(original.path, copy.path)
    _relocate_schema_paths(original.path, copy.path)
    if new_query_id:
        copy.new_query_id()
    info = {"taken_from": original.path, "batch": last_committed, "source_query_id": original.query_id(),
            "query_id": copy.query_id(), "taken_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (Path(copy.path) / SAVEPOINT_FILE).write_text(json.dumps(info, indent=1) + "\n")
    return copy


def savepoint_info(checkpoint) -> dict | None:
    """Where a savepoint copy came from: ``taken_from`` (path), ``batch``, ``source_query_id``,
    ``query_id``, ``taken_at``; ``None`` for a checkpoint that is not a savepoint copy."""
    try:
        return json.loads((Path(str(checkpoint)) / SAVEPOINT_FILE).read_text())
    except (OSError, ValueError):
        return None


def starting_offsets(checkpoint) -> str:
    """The Kafka position of the checkpoint's last committed batch, as ``startingOffsets`` JSON
    (``{"topic": {"0": 42, "1": 17}}``): where a new job must start reading when it takes over
    this checkpoint's state, so that no record is lost or counted twice."""
    ckpt = checkpoint_of(checkpoint)
    last = ckpt.last_committed_batch()
    if last is None:
        raise SavepointError("the checkpoint has no committed batch")
    offsets = ckpt.offsets()
    rows = offsets[offsets["batch"] == last]
    position: dict[str, dict[str, int]] = {}
    for topic, partition, offset in zip(rows["topic"], rows["partition"], rows["offset"]):
        if topic is not None:
            position.setdefault(topic, {})[str(int(partition))] = int(offset)
    return json.dumps(position)


def initial_offsets(checkpoint, source: int = 0) -> dict[str, dict[str, int]]:
    """Where the query that wrote ``checkpoint`` *first* started reading its Kafka source
    (``sources/<source>/0``): ``{"topic": {"0": 42, ...}}``. A job bootstrapped from a savepoint
    must show the savepoint's position here, not 0 (the beginning) or the end of the topic."""
    return {topic: {str(p): o for p, o in parts.items()}
            for topic, parts in checkpoint_of(checkpoint).initial_offsets(source).items()}


def write_to_topic(frame, topic: str) -> None:
    """Write a *batch* DataFrame to a Kafka topic, one JSON record per row (with ``batch_id`` 0),
    as ``run_to_end(..., output_topic=)`` does for a streaming query's batches."""
    write_batch_to_topic(frame, 0, topic)


def recorded_conf(checkpoint, keys=FIXED_BY_CHECKPOINT) -> dict[str, Any]:
    """The settings the checkpoint recorded with its last batch (``offsets/N``, line 2): Spark
    uses these on a restart, not the session's. Short names: the part after the last dot."""
    try:
        conf = Checkpoint(str(checkpoint)).conf()
    except FileNotFoundError:
        return {}
    return {key.rsplit(".", 1)[-1]: _short(conf.get(key)) for key in keys}


def __getattr__(name):  # sl.m07.PathStats: built on first use (see streamlab.lessons.m07_upgrades.path_stats)
    if name == "PathStats":
        return path_stats.PathStats
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- helpers --------------------------------------------------------------------------------------

def checkpoint_of(source) -> Checkpoint:
    """The ``Checkpoint`` of a checkpoint, a path or a running StreamingQuery."""
    if isinstance(source, Checkpoint):
        return source
    if isinstance(source, (str, Path)):
        return Checkpoint(source)
    jsq = getattr(source, "_jsq", None)  # a classic StreamingQuery: ask the JVM where it writes
    if jsq is not None:
        try:
            return Checkpoint(str(jsq.streamingQuery().resolvedCheckpointRoot()).removeprefix("file:"))
        except Exception as err:
            raise SavepointError(f"cannot find this query's checkpoint ({err}); pass the checkpoint") from err
    raise TypeError(f"expected a checkpoint, a path or a StreamingQuery, not {type(source).__name__}")


def _running_query_on(ckpt: Checkpoint, spark):
    from pyspark.sql import SparkSession

    session = spark or SparkSession.getActiveSession()
    query_id = ckpt.query_id()
    if session is None or query_id is None:
        return None
    return next((q for q in session.streams.active if str(q.id) == query_id), None)


def _relocate_schema_paths(old_root: str, new_root: str) -> None:
    """transformWithState records absolute paths of its schema files in state/<op>/_metadata/v2/*."""
    old = "file:" + old_root.rstrip("/") + "/"
    new = "file:" + new_root.rstrip("/") + "/"
    for entry in Path(new_root).glob("state/*/_metadata/v2/*"):
        if entry.is_file() and not entry.name.startswith("."):
            text = entry.read_text()
            if old in text:
                rewrite_file(entry, text.replace(old, new))


def schema_file_paths(checkpoint) -> list[str]:
    """The state-schema files a ``transformWithState`` checkpoint points at: the absolute paths its
    operator metadata (``state/<operator>/_metadata/v2/``, first entry) records. A plain copy of the
    folder still points at the original's files; ``take_savepoint`` re-points them at the copy."""
    return checkpoint_of(checkpoint).schema_files()


def _short(value):
    if isinstance(value, str) and value.startswith("org.apache.spark"):
        return value.rsplit(".", 1)[-1]
    return value
