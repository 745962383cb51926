"""Savepoints the Spark way: a committed checkpoint, copied; and trying an upgrade on a copy.

Flink has ``flink savepoint <job>``: a manually taken snapshot of the source offsets and the
state, from which any version of the job can start. Spark has no such command. What a Spark user
does instead, and what this module does for you:

    query.stop()                                   # a graceful stop, after sl.catch_up(query)
    sp = sl.take_savepoint(ckpt, "v0-at-batch-3")  # a copy of a committed checkpoint
    sl.run_to_end(new_code(events), output_mode="update", checkpoint=sp)   # v1 starts from it

``take_savepoint`` refuses a checkpoint whose last batch has no commit (a half-finished batch)
or that a query of this Spark session is still running. The copy gets its own query id and its
own state-schema paths, and remembers where it came from (``savepoint_info``).

    outcome = sl.try_change("new grouping key", events.groupBy("method").count(), sp)
    outcome.outcome, outcome.error_class   # ('refused', 'STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE')
    sl.changes_table([outcome, ...])       # one row per change: accepted or refused, and why

``sl.starting_offsets(sp)`` gives the savepoint's Kafka position as ``startingOffsets`` JSON,
for a *new* job that is bootstrapped with the old job's state and must read on from the same
point. ``sl.savepoints.PathStats`` is a ``transformWithState`` processor (count and latest
timestamp per path) that can start from such an initial state.
"""
from __future__ import annotations

import json
import re
import shutil
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

from .checkpoint import Checkpoint, new_checkpoint
from .runs import WAIT_S, run_to_end

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
    original = _checkpoint_of(source)
    root = Path(original.path)
    if not (root / "metadata").exists():
        raise SavepointError(f"{original.path} is not a checkpoint (no metadata file)")
    last_planned = _last_batch(root / "offsets")
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
        (Path(copy.path) / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}) + "\n")
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
    ckpt = _checkpoint_of(checkpoint)
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
    entry = Path(str(checkpoint)) / "sources" / str(source) / "0"
    try:
        lines = entry.read_text(errors="replace").splitlines()
    except OSError:
        return {}
    for line in lines:
        line = line.strip("\x00 ")
        if line.startswith("{"):
            return {topic: {str(p): int(o) for p, o in parts.items()} for topic, parts in json.loads(line).items()}
    return {}


def write_to_topic(frame, topic: str) -> None:
    """Write a *batch* DataFrame to a Kafka topic, one JSON record per row (with ``batch_id`` 0),
    as ``run_to_end(..., output_topic=)`` does for a streaming query's batches."""
    from .streams import write_batch_to_topic

    write_batch_to_topic(frame, 0, topic)


def recorded_conf(checkpoint, keys=FIXED_BY_CHECKPOINT) -> dict[str, Any]:
    """The settings the checkpoint recorded with its last batch (``offsets/N``, line 2): Spark
    uses these on a restart, not the session's. Short names: the part after the last dot."""
    root = Path(str(checkpoint))
    last = _last_batch(root / "offsets")
    if last is None:
        return {}
    lines = (root / "offsets" / str(last)).read_text().splitlines()
    conf = json.loads(lines[1]).get("conf", {}) if len(lines) > 1 else {}
    return {key.rsplit(".", 1)[-1]: _short(conf.get(key)) for key in keys}


# -- trying a change ------------------------------------------------------------------------------

@dataclass
class ChangeOutcome:
    """What Spark did when a changed query was started on a copy of a savepoint."""

    change: str
    outcome: str                    # "accepted" or "refused"
    error_class: str | None = None  # the innermost Spark error class, e.g. STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE
    batches_run: int = 0            # batches the changed query committed
    message: str = ""               # the first line of Spark's error message
    checkpoint: Checkpoint | None = None
    rows: Any = None                # what the accepted query output (pandas), else None
    conf_after: dict = field(default_factory=dict)  # recorded_conf of the copy afterwards


def try_change(change: str, frame, savepoint, *, output_mode: str = "update", conf: dict | None = None,
               spark=None, timeout_s: float = WAIT_S) -> ChangeOutcome:
    """Start the changed streaming DataFrame ``frame`` on a fresh copy of ``savepoint`` and say
    whether Spark accepted it.

    ``conf``: session settings to change for this run only (restored afterwards), e.g.
    ``{"spark.sql.shuffle.partitions": "8"}``. The input must hold records the savepoint has not
    read: Spark checks the state schema when a batch runs, so with nothing new to read no batch
    runs and nothing is checked (``batches_run == 0`` shows it).
    """
    session = _session(spark)
    copy = take_savepoint(savepoint, "try-" + re.sub(r"[^a-z0-9]+", "-", change.lower()).strip("-"),
                          spark=session)
    before = copy.last_committed_batch()
    saved = {key: session.conf.get(key, None) for key in (conf or {})}
    try:
        for key, value in (conf or {}).items():
            session.conf.set(key, str(value))
        run = run_to_end(frame, output_mode=output_mode, checkpoint=copy, timeout_s=timeout_s)
    except TimeoutError:
        raise
    except Exception as err:  # Spark refused the change: that is the result
        return ChangeOutcome(change, "refused", error_class(err), _batches_since(copy, before),
                             _first_line(err), copy, None, recorded_conf(copy))
    finally:
        for key, value in saved.items():
            if value is None:
                session.conf.unset(key)
            else:
                session.conf.set(key, value)
    return ChangeOutcome(change, "accepted", None, _batches_since(copy, before), "", copy, run.rows,
                         recorded_conf(copy))


def changes_table(outcomes) -> Any:
    """One row per ``ChangeOutcome``: change, outcome, error class, batches run, and the state
    provider and shuffle partitions the copy's checkpoint recorded afterwards."""
    import pandas as pd

    return pd.DataFrame([{"change": o.change, "outcome": o.outcome, "error class": o.error_class or "",
                          "batches run": o.batches_run,
                          "provider (checkpoint)": o.conf_after.get("providerClass"),
                          "partitions (checkpoint)": o.conf_after.get("partitions")} for o in outcomes])


_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]")


def error_class(error) -> str:
    """The most specific Spark error class in an exception: for a query that failed with
    ``[STREAM_FAILED] ... [STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE] ...`` it is the second one.
    Falls back to the exception's own condition, then its type name."""
    found = [c for c in _CLASS.findall(str(error)) if c != "STREAM_FAILED"]
    if found:
        return found[0]
    condition = getattr(error, "getCondition", None)
    try:
        name = condition() if callable(condition) else None
    except Exception:  # some pyspark errors have no condition
        name = None
    return name or type(error).__name__


# -- the version tree -----------------------------------------------------------------------------

def plot_version_tree(versions: dict, ax=None, *, topic: str | None = None):
    """Draw job versions as lanes over the input they read: ``versions`` is ``{name: checkpoint}``.

    Each lane runs from the Kafka position where that version started to where its last committed
    batch stopped (records read, summed over partitions, from the checkpoint's offsets log); a
    version started from a savepoint branches off the lane of the checkpoint it was copied from,
    at the savepoint's position. Everything is read from the checkpoints themselves.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.7 + 0.6 * len(versions)))
    names = list(versions)
    lanes = {name: len(names) - 1 - i for i, name in enumerate(names)}
    by_path = {}
    for name, ckpt in versions.items():
        by_path[str(ckpt)] = name
        info = savepoint_info(ckpt)
        if info:
            by_path.setdefault(info["taken_from"], None)
    for name, ckpt in versions.items():
        ckpt = _checkpoint_of(ckpt)
        info = savepoint_info(ckpt)
        start = _records_read(ckpt, info["batch"], topic) if info else 0
        end = _records_read(ckpt, ckpt.last_committed_batch(), topic)
        y = lanes[name]
        ax.plot([start, end], [y, y], lw=6, solid_capstyle="butt", color=f"C{y % 10}")
        ax.text(end, y, f"  {name}", va="center")
        parent = _parent_name(info, versions) if info else None
        if parent is not None:
            ax.annotate("", xy=(start, y), xytext=(start, lanes[parent]),
                        arrowprops={"arrowstyle": "->", "color": "0.3"})
            ax.plot([start], [lanes[parent]], marker="D", color="black")
            ax.text(start, lanes[parent] + 0.25, f"savepoint (batch {info['batch']})", ha="center", fontsize=8)
    ax.set_yticks([])
    ax.set_xlabel("input records read (Kafka offsets, all partitions)")
    ax.set_title("Job versions and the savepoints they start from")
    ax.set_ylim(-0.6, len(names) - 0.2)
    ax.margins(x=0.15)
    return ax


# -- a transformWithState job that can start from another job's state -----------------------------

PATH_STATS_OUTPUT = "path STRING, count LONG, last_ts TIMESTAMP"
"""The output schema of ``PathStats`` (give it as ``outputStructType``)."""


def _make_path_stats():
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor

    class PathStats(StatefulProcessor):
        """Per path: how many requests (``count``) and the latest request time (``last_ts``), in
        one value state called ``stats``. Group by ``path``. It can start from an initial state
        with a ``count`` column (``initialState=frame.groupBy("path")``): another job's counts."""

        def init(self, handle):
            self.stats = handle.getValueState("stats", "count LONG, last_ts TIMESTAMP")

        def handleInitialState(self, key, initialState, timerValues):
            fields = initialState.asDict()
            self.stats.update((int(fields["count"]), fields.get("last_ts")))

        def handleInputRows(self, key, rows, timerValues):
            count, last = self.stats.get() if self.stats.exists() else (0, None)
            last = _as_utc(last)
            for row in rows:
                count += 1
                ts = _as_utc(row.ts)
                if ts is not None and (last is None or ts > last):
                    last = ts
            self.stats.update((count, last))
            yield Row(path=key[0], count=count, last_ts=last)

        def close(self):
            pass

    PathStats.__module__ = __name__
    return PathStats


def __getattr__(name):  # PathStats is built on first use, so `import streamlab` stays light
    if name == "PathStats":
        globals()["PathStats"] = cls = _make_path_stats()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- helpers --------------------------------------------------------------------------------------

def _checkpoint_of(source) -> Checkpoint:
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


def _last_batch(folder: Path) -> int | None:
    batches = [int(p.name) for p in folder.iterdir() if p.name.isdigit()] if folder.is_dir() else []
    return max(batches) if batches else None


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
                entry.write_text(text.replace(old, new))


def _batches_since(ckpt: Checkpoint, before: int | None) -> int:
    last = ckpt.last_committed_batch()
    if last is None:
        return 0
    return last - (before if before is not None else -1)


def _records_read(ckpt: Checkpoint, batch: int | None, topic: str | None) -> int:
    if batch is None:
        return 0
    offsets = ckpt.offsets()
    rows = offsets[offsets["batch"] == batch]
    if topic is not None:
        rows = rows[rows["topic"] == topic]
    return int(sum(int(o) for o in rows["offset"] if isinstance(o, (int, float))))


def _parent_name(info: dict, versions: dict) -> str | None:
    for name, ckpt in versions.items():
        if str(ckpt) == info["taken_from"]:
            return name
    # a copy of a copy: follow the chain to a checkpoint that is drawn
    seen = set()
    path = info["taken_from"]
    while path not in seen:
        seen.add(path)
        parent = savepoint_info(path)
        if not parent:
            return None
        path = parent["taken_from"]
        for name, ckpt in versions.items():
            if str(ckpt) == path:
                return name
    return None


def _as_utc(moment):
    """Timestamps come back from state and from rows as naive or aware datetimes: compare them in UTC."""
    if moment is None:
        return None

    return moment.astimezone(UTC)


def _first_line(error) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


def _short(value):
    if isinstance(value, str) and value.startswith("org.apache.spark"):
        return value.rsplit(".", 1)[-1]
    return value


def _session(spark):
    """The given session, else the active one (not ``sl.spark()``: called on a running session it
    would put its default settings back, e.g. the state store provider)."""
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    from .session import spark as get_spark

    return get_spark()
