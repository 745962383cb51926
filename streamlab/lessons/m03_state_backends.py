"""State backends: which state store a query uses, what it writes, and what it costs.

Spark has two state store providers (Flink would say *state backends*):

* ``"hdfs"``: ``HDFSBackedStateStoreProvider``, the default. Each state partition is a hash map
  in the JVM heap; every batch writes the rows it changed to ``<version>.delta`` and, now and then,
  the whole map to ``<version>.snapshot``.
* ``"rocksdb"``: ``RocksDBStateStoreProvider``. Each state partition is a RocksDB database on the
  executor's local disk (off the JVM heap); every batch uploads new SST files plus a small
  ``<version>.zip``, or, with *changelog checkpointing*, only a ``<version>.changelog`` of the
  changes (a zipped snapshot is then uploaded only now and then, in the background).

    sl.m03.use_state_store(spark, "rocksdb", changelog=True)   # for queries started afterwards
    sl.m03.provider_of(ckpt)                 # "rocksdb": what the checkpoint itself says
    sl.m03.state_files(ckpt)                 # one row per state file: version, kind, bytes
    sl.m03.state_bytes_per_batch(ckpt)       # bytes each batch added to the checkpoint's state
    sl.m03.heap_used(spark)                  # bytes used in the driver's JVM heap (after a GC)
    sl.m03.wait_for_snapshot(ckpt, 6)        # until every state partition has its 6.zip uploaded
    m = sl.m03.measure_state_store(frame, "rocksdb", checkpoint=ckpt)
    m.table                              # per batch: keys, batch time, state memory, bytes written
"""
from __future__ import annotations

import json
import re
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..stack.kafka import bootstrap_servers, end_offsets
from ..stack.session import STATE_STORES
from ..stack.session import spark as get_spark
from .checkpoint import Checkpoint
from .runs import progress_table

PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG_CONF = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
KEYS_SCHEMA = "user STRING, seq BIGINT"
"""The schema of the records ``produce_new_keys`` writes: one record per new user."""

_VERSIONED = re.compile(r"^(\d+)(?:_[0-9a-fA-F-]+)?\.(delta|snapshot|zip|changelog)$")
_KINDS = ["delta", "snapshot", "changelog", "zip", "sst"]


def _provider_name(class_name: str | None) -> str | None:
    for name, full in STATE_STORES.items():
        if class_name in (name, full, full.rsplit(".", 1)[-1]):
            return name
    return class_name


def use_state_store(spark, provider: str, *, changelog: bool = False) -> None:
    """Make queries started **afterwards** keep their state in ``provider`` ("hdfs" or "rocksdb").

    ``changelog=True`` turns on RocksDB's changelog checkpointing (ignored by "hdfs"). A query
    restarted on an existing checkpoint keeps the provider that checkpoint was created with,
    whatever this says (see ``provider_of``).
    """
    if provider not in STATE_STORES:
        raise ValueError(f"provider must be one of {sorted(STATE_STORES)}, not {provider!r}")
    spark.conf.set(PROVIDER_CONF, STATE_STORES[provider])
    spark.conf.set(CHANGELOG_CONF, "true" if changelog else "false")


def checkpoint_conf(checkpoint) -> dict:
    """The Spark settings a checkpoint recorded when its first batch was planned (``offsets/0``).

    These win over the session's settings when the query restarts on this checkpoint."""
    return Checkpoint(str(checkpoint)).conf(first=True)


def provider_of(checkpoint) -> str | None:
    """"hdfs" or "rocksdb": the state store provider recorded in the checkpoint's offsets log."""
    return _provider_name(checkpoint_conf(checkpoint).get(PROVIDER_CONF))


def snapshot_ssts(path: Path) -> list[tuple[str, int]]:
    """(SST file name, bytes) a RocksDB ``<version>.zip`` snapshot says it needs."""
    try:
        with zipfile.ZipFile(path) as archive:
            text = archive.read("metadata").decode()
    except (OSError, KeyError, zipfile.BadZipFile):
        return []
    lines = text.splitlines()
    meta = json.loads(lines[1] if lines and lines[0].startswith("v") else text)
    return [(f["dfsSstFileName"], int(f.get("sizeBytes", 0))) for f in meta.get("sstFiles", [])]


def state_files(checkpoint):
    """One row per file under the checkpoint's ``state/`` folder (hidden ``.crc`` files left out).

    Columns: ``operator``, ``partition`` (the state partition), ``file`` (relative to the
    checkpoint), ``kind`` (``delta``, ``snapshot``, ``changelog``, ``zip``, ``sst`` or ``other``),
    ``version`` (the state version the file belongs to; version v is written by batch v - 1) and
    ``bytes``. RocksDB's SST files carry no version in their name: each gets the first version
    whose ``.zip`` lists it (none if no snapshot lists it yet).
    """
    import pandas as pd

    root = Path(str(checkpoint))
    rows = []
    for path in sorted((root / "state").rglob("*")) if (root / "state").is_dir() else []:
        if not path.is_file() or path.name.startswith("."):
            continue
        parts = path.relative_to(root / "state").parts
        operator = int(parts[0]) if parts[0].isdigit() else None
        partition = int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else None
        match = _VERSIONED.match(path.name)
        kind = match.group(2) if match else ("sst" if path.suffix == ".sst" else "other")
        rows.append({"operator": operator, "partition": partition, "file": str(path.relative_to(root)),
                     "kind": kind, "version": int(match.group(1)) if match else None,
                     "bytes": path.stat().st_size, "abspath": path})
    frame = pd.DataFrame(rows, columns=["operator", "partition", "file", "kind", "version", "bytes", "abspath"])
    first_listed: dict[tuple, int] = {}
    zips = frame[frame["kind"] == "zip"].sort_values("version")
    for zip_row in zips.itertuples():
        for sst, _ in snapshot_ssts(zip_row.abspath):
            first_listed.setdefault((zip_row.operator, zip_row.partition, sst), zip_row.version)
    for index, row in frame[frame["kind"] == "sst"].iterrows():
        frame.at[index, "version"] = first_listed.get((row["operator"], row["partition"], Path(row["file"]).name))
    for column in ("operator", "partition", "version"):
        frame[column] = frame[column].astype("Int64")
    return frame.drop(columns="abspath").sort_values(["operator", "partition", "version", "file"],
                                                    na_position="last").reset_index(drop=True)


def state_bytes_per_batch(checkpoint, operator: int | None = 0):
    """Bytes each batch added to the checkpoint's state, summed over state partitions.

    One row per state version: ``batch`` (= version - 1), ``version``, one column of bytes per
    kind of file (``delta``, ``snapshot``, ``changelog``, ``zip``, ``sst``) and ``total``.
    ``operator=None`` sums over every stateful operator. Files that belong to no version (schema
    and metadata files, SSTs no snapshot lists yet) are left out.
    """
    import pandas as pd

    files = state_files(checkpoint)
    if operator is not None:
        files = files[files["operator"] == operator]
    files = files[files["version"].notna() & files["kind"].isin(_KINDS)]
    table = files.pivot_table(index="version", columns="kind", values="bytes", aggfunc="sum", fill_value=0)
    table = table.reindex(columns=[k for k in _KINDS if k in table.columns])
    table["total"] = table.sum(axis=1)
    table = table.reset_index()
    table.insert(0, "batch", table["version"] - 1)
    table.columns.name = None
    return table.astype("int64") if not table.empty else pd.DataFrame(columns=["batch", "version", "total"])


def heap_used(spark, *, gc: bool = True) -> int | None:
    """Bytes in use in the driver's JVM heap. With ``local[*]`` the executors run in that same JVM,
    so this includes every state store they keep in memory. ``gc=True`` asks the JVM to collect
    garbage first, so what is left is what is still referenced. ``None`` over Spark Connect
    (the client has no JVM to ask)."""
    jvm = getattr(spark, "_jvm", None) or getattr(getattr(spark, "sparkContext", None), "_jvm", None)
    if jvm is None:
        return None
    if gc:
        jvm.java.lang.System.gc()
    runtime = jvm.java.lang.Runtime.getRuntime()
    return int(runtime.totalMemory() - runtime.freeMemory())


def _partition_folders(root: Path) -> list[Path]:
    """The state partition folders (named by a number) in an operator's folder ``root``, in partition order."""
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))


def wait_for_snapshot(checkpoint, version: int, *, operator: int = 0, kind: str = "zip",
                      timeout: float = 60.0) -> list[int]:
    """Wait until every state partition folder of ``operator`` holds ``<version>.<kind>``; return the partitions.

    With RocksDB changelog checkpointing (``kind="zip"``), a batch only *makes* its snapshot on the
    executor's disk; the background maintenance uploads the latest one later, possibly after the
    query stopped. The HDFS provider (``kind="snapshot"``) writes its ``<version>.snapshot`` files in
    that maintenance too. Wait for the snapshot of a query's last version before reading its files,
    so that no upload changes them afterwards. Raises ``TimeoutError`` if one is still missing after
    ``timeout`` seconds (no snapshot was made at that version: see ``minDeltasForSnapshot``)."""
    if kind not in ("zip", "snapshot"):
        raise ValueError(f"kind must be 'zip' (RocksDB) or 'snapshot' (HDFS), not {kind!r}")
    root = Path(str(checkpoint), "state", str(operator))
    deadline = time.monotonic() + timeout
    while True:
        folders = _partition_folders(root)
        missing = [p.name for p in folders if not (p / f"{version}.{kind}").is_file()]
        if folders and not missing:
            return [int(p.name) for p in folders]
        if time.monotonic() >= deadline:
            raise TimeoutError(f"no {version}.{kind} in state partition(s) {missing or 'any'} of {root} "
                               f"after {timeout:g} s")
        time.sleep(0.2)


def wait_for_cleanup(checkpoint, *, operator: int = 0, timeout: float = 15.0) -> dict[int, int]:
    """Wait, at most ``timeout`` seconds, until the background maintenance has deleted version 1's state
    files from every state partition of ``operator``; return ``{partition: the oldest version it still holds}``.

    The HDFS provider deletes a partition's old files only once it holds a snapshot at or before the oldest
    version to keep (``minBatchesToRetain`` back): the rebuild of that version starts there. A partition whose
    snapshots all came later keeps everything, so after ``timeout`` the answer may still show version 1."""
    root = Path(str(checkpoint), "state", str(operator))
    deadline = time.monotonic() + timeout
    while True:
        oldest = {}
        for folder in _partition_folders(root):
            versions = [int(m.group(1)) for f in folder.iterdir() if (m := _VERSIONED.match(f.name))]
            if versions:
                oldest[int(folder.name)] = min(versions)
        if (oldest and all(v > 1 for v in oldest.values())) or time.monotonic() >= deadline:
            return oldest
        time.sleep(0.2)


def heap_max(spark) -> int | None:
    """The most the driver's JVM heap may grow to, in bytes (``spark.driver.memory``)."""
    jvm = getattr(spark, "_jvm", None)
    return None if jvm is None else int(jvm.java.lang.Runtime.getRuntime().maxMemory())


def produce_new_keys(topic: str, count: int, *, first: int = 0, spark=None) -> int:
    """Write ``count`` records to ``topic``, one per **new** user: ``{"user": "u0000042", "seq": 42}``
    for seq = first, first + 1, ..., spread evenly over the topic's partitions (seq modulo the
    number of partitions). Deterministic: the same arguments always give the same records.

    Spark's own Kafka writer does the work (``spark.range`` → ``write.format("kafka")``): for
    hundreds of thousands of records it is many times faster than sending them one by one from
    Python. Returns ``count``."""

    session = spark or get_spark()
    partitions = len(end_offsets(topic))
    (session.range(first, first + count)
     .selectExpr(f"CAST(pmod(id, {partitions}) AS INT) AS partition",
                 "to_json(named_struct('user', format_string('u%07d', id), 'seq', id)) AS value")
     .write.format("kafka")
     .option("kafka.bootstrap.servers", bootstrap_servers())
     .option("topic", topic)
     .save())
    return count


@dataclass
class Measurement:
    """What ``measure_state_store`` measured for one provider."""

    provider: str
    changelog: bool
    checkpoint: Any
    table: Any                       # pandas: one row per batch (see measure_state_store)
    heap_before: int | None          # bytes in the driver heap before the query started (after GC)
    heap_after: int | None           # ... and after its last batch (after GC)
    seconds: float                   # wall-clock time of the whole run
    progresses: list[dict] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.provider}{' + changelog' if self.changelog else ''}"

    def summary(self) -> dict:
        """The figures at the largest state: the last batch with input, and the run's totals."""
        last = self.table[self.table["input_rows"] > 0].iloc[-1]
        heap = (self.heap_after - self.heap_before) if None not in (self.heap_after, self.heap_before) else None
        return {"provider": self.label, "keys": int(last["state_rows"]), "batch_ms": int(last["batch_ms"]),
                "state_memory_mb": round(float(last["state_memory_bytes"]) / 2**20, 1),
                "heap_growth_mb": None if heap is None else round(heap / 2**20, 1),
                "checkpoint_mb": round(float(self.table["checkpoint_bytes"].sum()) / 2**20, 1),
                "last_batch_checkpoint_kb": round(float(last["checkpoint_bytes"]) / 2**10, 1),
                "run_s": round(self.seconds, 1)}


def measure_state_store(frame, provider: str, *, checkpoint, changelog: bool = False,
                        output_mode: str = "update", timeout_s: float = 600) -> Measurement:
    """Run the streaming aggregation ``frame`` over everything its source holds now, with its
    state in ``provider`` ("hdfs" or "rocksdb", ``changelog`` for RocksDB's changelog
    checkpointing), and measure it.

    The rows go to Spark's ``noop`` sink (computed, then dropped: only the state work is
    measured). Cap the batch size on the reader (``maxOffsetsPerTrigger``) to make the state grow
    batch by batch. ``table`` has one row per batch: ``batch``, ``input_rows``, ``state_rows``
    (keys in state), ``batch_ms``, ``state_memory_bytes`` (the provider's own figure),
    ``checkpoint_bytes`` (state bytes the batch added to the checkpoint) and the provider's
    custom metrics (``state_...``). Raises ``TimeoutError`` after ``timeout_s`` seconds.
    """

    spark = frame.sparkSession
    use_state_store(spark, provider, changelog=changelog)
    before = heap_used(spark)
    started = time.monotonic()
    query = (frame.writeStream.format("noop").outputMode(output_mode)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        if not query.awaitTermination(timeout_s):
            raise TimeoutError(f"the {provider} query did not finish within {timeout_s:g} s (it was stopped)")
    finally:
        query.stop()
    seconds = time.monotonic() - started
    after = heap_used(spark)
    progresses = list(query.recentProgress)
    table = progress_table(progresses)
    written = state_bytes_per_batch(checkpoint)
    by_batch = dict(zip(written["batch"], written["total"])) if not written.empty else {}
    table.insert(4, "checkpoint_bytes", [int(by_batch.get(b, 0)) for b in table["batch"]])
    table = table.drop(columns=[c for c in ("watermark", "max_event_time", "late_rows_dropped") if c in table])
    return Measurement(provider, changelog, checkpoint, table, before, after, seconds, progresses)
