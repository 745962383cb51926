"""State in Flink 2.x, and its twin in Spark: what a query must load before it can go on.

Flink 2.0's disaggregated state keeps the primary copy of the state on a distributed file system and
uses the local disk as a cache, so a job that recovers or rescales need not download its state first.
Spark's RocksDB state store is the older model: local RocksDB files, uploaded to the checkpoint at every
batch, and copied back from it whenever a query (re)starts. ``restart_cost`` measures that copy::

    cost = sl.m08.restart_cost([10_000, 100_000])   # builds state of 10 000 and 100 000 keys, then measures
    cost.table        # per key count: the first batch of a query kept running vs of a restarted one
    cost.wide()       # the same, one row per key count
    cost.plot()       # batch time and bytes copied, per key count
    cost.checkpoints  # {keys: the sl.Checkpoint each query left}, to read with the state data source

    sl.m08.copied_to_read(spark, checkpoint, batch)   # {state partition: bytes} a fresh load of a batch copied

The rows come from the queries' own progress reports (``durationMs``, the RocksDB provider's metrics)
and from Spark's log, whose line ``Copied N files (B bytes) from DFS to local`` the RocksDB state store
writes when it loads a version from the checkpoint (``loaded_from_checkpoint`` reads it).
"""
from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..stack.kafka import new_topic
from ..stack.session import driver_log
from ..stack.session import spark as get_spark
from .checkpoint import Checkpoint, new_checkpoint
from .m03_state_backends import KEYS_SCHEMA, PROVIDER_CONF, produce_new_keys, use_state_store
from .runs import WAIT_S, catch_up
from .streams import kafka_stream

MODES = ("kept running", "restarted")
"""How the measured batch's query got there: a query that kept running since it built the state (its state
store is open on the executor), or a query started again on the same checkpoint (a new run: new state store
instances, which load the state from the checkpoint)."""

MAX_KEYS = 5_000_000
"""The most keys ``restart_cost`` builds for one measurement (a bound for a lesson on a laptop)."""

STATE_LOGGER = "org.apache.spark.sql.execution.streaming.state"
_COPIED = re.compile(r"Copied (\d+) files \((\d+) bytes\) from DFS to local")
_COPIED_BY_PARTITION = re.compile(r"partitionId=(\d+).*?Copied \d+ files \((\d+) bytes\) from DFS to local")

COLUMNS = ["keys", "mode", "try", "batch_ms", "add_batch_ms", "state_rows", "state_mib", "files_copied", "mib_copied",
           "reported_load_ms"]


def check_key_counts(n_keys: int | Iterable[int]) -> list[int]:
    """The key counts to measure, smallest first: one positive whole number or several, each at most
    ``MAX_KEYS`` and each once. Raises ``TypeError`` or ``ValueError`` saying what is wrong."""
    counts = [n_keys] if isinstance(n_keys, int) else list(n_keys)
    if not counts:
        raise ValueError("name at least one key count, e.g. restart_cost([10_000, 100_000])")
    for n in counts:
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"a key count is a whole number, not {n!r}")
        if not 1 <= n <= MAX_KEYS:
            raise ValueError(f"a key count is between 1 and {MAX_KEYS:,}, not {n:,}")
    if len(set(counts)) != len(counts):
        raise ValueError(f"each key count once, not {counts}")
    return sorted(counts)


def loaded_from_checkpoint(log_text: str, run_id: str | None = None) -> tuple[int, int] | None:
    """(files, bytes) the RocksDB state store copied from the checkpoint, summed over the lines
    ``Copied N files (B bytes) from DFS to local`` in ``log_text`` (Spark's log at INFO level), of the query run
    ``run_id`` only when one is given (each line names its ``queryRunId``: another query, or another driver
    writing to the same log, is not counted); None when there is no such line (nothing was loaded, or the log
    was not captured)."""
    lines = [line for line in log_text.splitlines() if run_id is None or f"queryRunId={run_id}" in line]
    found = [(int(files), int(size)) for files, size in _COPIED.findall("\n".join(lines))]
    if not found:
        return None
    return sum(f for f, _ in found), sum(b for _, b in found)


def copied_to_read(spark, checkpoint, batch: int) -> dict[int, int]:
    """{state partition of operator 0: bytes} that Spark's RocksDB store copied from ``checkpoint`` (an
    ``sl.Checkpoint``) to local disk when the state data source read the state as of ``batch``: each read is a
    fresh load, like a restart's. From Spark's log lines ``Copied N files (B bytes) from DFS to local``; a
    partition that copied nothing (its state rebuilt from changelogs alone) is 0."""
    folder = Path(checkpoint.path, "state", "0")
    partitions = sorted(int(p.name) for p in folder.iterdir() if p.is_dir() and p.name.isdigit())
    with _state_store_log(spark) as log:
        spark.read.format("statestore").option("batchId", int(batch)).load(checkpoint.path).count()
        text = log()
    copied = dict.fromkeys(partitions, 0)
    for partition, size in _COPIED_BY_PARTITION.findall(text):
        copied[int(partition)] = copied.get(int(partition), 0) + int(size)
    return copied


def first_batch_row(progress: dict, *, keys: int, mode: str, copied: tuple[int, int] | None,
                    attempt: int = 1) -> dict:
    """One row of the table from a batch's progress report (``query.lastProgress`` as a dict):
    its time (``triggerExecution`` and ``addBatch``, ms), the keys in state, the RocksDB files' size
    (``rocksdbSstFileSize``), what the state store copied from the checkpoint (``copied``, from the log) and
    the load time the provider itself reports (``rocksdbLoadLatencyMs``)."""
    if mode not in MODES:
        raise ValueError(f"mode is one of {MODES}, not {mode!r}")
    durations = progress.get("durationMs") or {}
    operators = progress.get("stateOperators") or []
    if not operators:
        raise ValueError("this progress report has no stateful operator: is it the aggregation's?")
    metrics = operators[0].get("customMetrics") or {}
    sst = metrics.get("rocksdbSstFileSize")
    no_log = copied is None and mode == "restarted"   # a restart always loads: no line means no log
    files, size = copied if copied is not None else (0, 0)
    return {"keys": keys, "mode": mode, "try": attempt,
            "batch_ms": durations.get("triggerExecution"), "add_batch_ms": durations.get("addBatch"),
            "state_rows": sum(o.get("numRowsTotal", 0) for o in operators),
            "state_mib": None if sst is None else round(sst / 2**20, 2),
            "files_copied": None if no_log else files,
            "mib_copied": None if no_log else round(size / 2**20, 2),
            "reported_load_ms": metrics.get("rocksdbLoadLatencyMs")}


def cost_table(rows: Iterable[dict]):
    """The rows of ``first_batch_row`` as a pandas table, by key count and in the order of ``MODES``."""
    import pandas as pd

    table = pd.DataFrame(list(rows), columns=COLUMNS)
    table["mode"] = pd.Categorical(table["mode"], categories=list(MODES), ordered=True)
    return table.sort_values(["keys", "mode", "try"]).reset_index(drop=True)


def wide_table(table):
    """``cost_table`` with one row per key count: the state's size, each mode's batch time (the median of its
    tries), and what a restart copied from the checkpoint (the median of the restarts)."""
    import pandas as pd

    ms = table.pivot_table(index="keys", columns="mode", values="batch_ms", aggfunc="median", observed=True)
    restarted = table[table["mode"] == "restarted"].groupby("keys")[["state_mib", "mib_copied"]].median()
    wide = pd.DataFrame({"state MiB": restarted["state_mib"],
                         **{f"{mode}: batch ms": ms[mode] for mode in MODES if mode in ms},
                         "restarted: MiB copied": restarted["mib_copied"]})
    wide.index.name = "keys in state"
    return wide


@dataclass
class RestartCost:
    """What ``restart_cost`` measured."""

    table: Any                                         # pandas: one row per key count and mode (COLUMNS)
    checkpoints: dict[int, Checkpoint] = field(default_factory=dict)
    topics: dict[int, str] = field(default_factory=dict)

    def wide(self):
        return wide_table(self.table)

    def plot(self):
        """Two panels per key count: each mode's batch time (the median), and the MiB in state and copied by a
        restart."""
        import matplotlib.pyplot as plt

        wide = self.wide()
        labels = [f"{k:,}" for k in wide.index]
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.4))
        columns = [c for c in wide.columns if c.endswith("batch ms")]
        seconds = (wide[columns] / 1e3).set_axis(labels)
        seconds.plot.bar(ax=left, rot=0, color=["#55a868", "#dd8452"])
        left.set_ylim(0, 1.35 * max(float(seconds.max().max()), 0.001))
        left.set_title("a batch of one new record (s, median)")
        left.legend([c.split(":")[0] for c in columns], loc="upper center", ncol=2)
        mib = wide[["state MiB", "restarted: MiB copied"]].set_axis(labels)
        mib.plot.bar(ax=right, rot=0, color=["#999999", "#4c72b0"])
        right.set_title("RocksDB files (MiB)")
        right.legend(["in state", "copied by a restart"], loc="upper left")
        for ax in (left, right):
            ax.set_xlabel("keys in state")
            ax.grid(alpha=0.3, axis="y")
        plt.tight_layout()
        return fig


@contextmanager
def _state_store_log(spark):
    """Spark's state store logging at INFO while the block runs; yields a function that returns what the
    driver's log gained meanwhile ("" over Spark Connect or when the log is elsewhere)."""
    jvm = getattr(spark, "_jvm", None)
    path = Path(driver_log())
    start = path.stat().st_size if path.exists() else 0

    def read() -> str:
        if jvm is None or not path.exists():
            return ""
        with path.open("rb") as log:
            log.seek(start)
            return log.read().decode(errors="replace")

    if jvm is None:
        yield read
        return
    log4j = jvm.org.apache.logging.log4j
    before = log4j.LogManager.getLogger(STATE_LOGGER).getLevel()
    log4j.core.config.Configurator.setLevel(STATE_LOGGER, log4j.Level.INFO)
    try:
        yield read
    finally:
        log4j.core.config.Configurator.setLevel(STATE_LOGGER, before)


def _reports(query) -> list[dict]:
    return [json.loads(p.json) if hasattr(p, "json") else dict(p) for p in query.recentProgress]


def _progress(query, *, after: int = -1, timeout_s: float = 30.0) -> dict:
    """The progress of the query's last batch that read input and came after batch ``after`` (a plain dict).
    A running query's report lands a moment after its batch: wait for it, at most ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        fresh = [p for p in _reports(query) if p.get("numInputRows") and p.get("batchId", -1) > after]
        if fresh:
            return fresh[-1]
        if time.monotonic() > deadline:
            raise RuntimeError("the query reported no batch with input: was the new record written?")
        time.sleep(0.1)


def _counts(topic: str):
    return kafka_stream(topic, KEYS_SCHEMA).groupBy("user").count()


def _restart_once(writer, timeout_s: float):
    """Start ``writer``'s query again on its checkpoint, run what Kafka holds now, stop; the query."""
    query = writer.trigger(availableNow=True).start()
    try:
        if not query.awaitTermination(timeout_s):
            raise TimeoutError(f"the restarted query did not finish within {timeout_s:g} s (it was stopped)")
    finally:
        query.stop()
    return query


def _measure_one(spark, keys: int, tries: int, timeout_s: float) -> tuple[list[dict], Checkpoint, str]:
    topic = new_topic(f"m08-keys-{keys}", partitions=2)
    produce_new_keys(topic, keys, spark=spark)
    checkpoint = new_checkpoint(f"m08-restart-{keys}")
    writer = (_counts(topic).writeStream.format("noop").outputMode("update")
              .option("checkpointLocation", checkpoint.path))
    rows, seq = [], keys
    running = writer.start()                      # builds the state: every key, in one batch
    try:
        catch_up(running, timeout_s)
        for attempt in range(1, tries + 1):       # one new record at a time, the state store open
            produce_new_keys(topic, 1, first=seq, spark=spark)
            seq += 1
            last = max((p.get("batchId", -1) for p in _reports(running)), default=-1)
            with _state_store_log(spark) as log:
                catch_up(running, timeout_s)
                progress = _progress(running, after=last)
                copied = loaded_from_checkpoint(log(), str(running.runId)) or (0, 0)
            rows.append(first_batch_row(progress, keys=keys, mode="kept running", copied=copied,
                                        attempt=attempt))
    finally:
        running.stop()
    for attempt in range(1, tries + 1):           # the same query again: each time a new run, same checkpoint
        produce_new_keys(topic, 1, first=seq, spark=spark)
        seq += 1
        with _state_store_log(spark) as log:
            restarted = _restart_once(writer, timeout_s)
            copied = loaded_from_checkpoint(log(), str(restarted.runId))
        rows.append(first_batch_row(_progress(restarted), keys=keys, mode="restarted", copied=copied,
                                    attempt=attempt))
    return rows, checkpoint, topic


WARM_UP_KEYS = 1_000
"""The key count of the measurement ``restart_cost`` makes first and drops, so that no measured batch also pays
for a fresh JVM's warm-up (classes loaded, code generated and compiled on first use)."""


def restart_cost(n_keys: int | Iterable[int], *, tries: int = 3, spark=None, warm_up: bool = True,
                 timeout_s: float = 4 * WAIT_S) -> RestartCost:
    """For each key count N: build RocksDB state of N keys (N records, one per new user, counted per user
    in one batch), then time the batch that processes **one** new record in two ways: in the query that
    built the state and kept running (``"kept running"``), and in the same query started again on its
    checkpoint (``"restarted"``). Returns a ``RestartCost`` (``.table``, ``.wide()``, ``.plot()``).
    Each is measured ``tries`` times (one new record each time); ``.wide()`` and ``.plot()`` show the medians.
    ``warm_up``: first measure ``WARM_UP_KEYS`` keys the same way, and drop that measurement.

    Each query writes to Spark's ``noop`` sink and keeps its state in RocksDB (the session's provider
    setting is put back afterwards). Raises ``TimeoutError`` if a query is not done within ``timeout_s``."""
    counts = check_key_counts(n_keys)
    if isinstance(tries, bool) or not isinstance(tries, int) or not 1 <= tries <= 10:
        raise ValueError(f"tries is a whole number from 1 to 10, not {tries!r}")
    session = spark or get_spark()
    previous = session.conf.get(PROVIDER_CONF)
    use_state_store(session, "rocksdb")
    rows, checkpoints, topics = [], {}, {}
    try:
        if warm_up:
            _measure_one(session, WARM_UP_KEYS, 1, timeout_s)
        for keys in counts:
            measured, checkpoints[keys], topics[keys] = _measure_one(session, keys, tries, timeout_s)
            rows += measured
    finally:
        session.conf.set(PROVIDER_CONF, previous)
    return RestartCost(cost_table(rows), checkpoints, topics)
