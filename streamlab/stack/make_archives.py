"""Make the JVMs' start-up archives (``jvm_archives``) by running each JVM through a representative start.

``streamlab fetch`` (and so ``make setup``, and the Docker image build) calls ``make_missing()``. In a
new Python process, with a data folder of its own that is deleted afterwards, it runs:

1. the native broker (its archive is written when it stops);
2. Kafka's console consumer, reading the records of a topic (the tools' archive);
3. ``sl.spark()`` reading that topic and counting per key with the HDFS state store, then again with
   RocksDB: the driver loads the Kafka connector's and both state stores' classes;
4. the local Spark cluster: a master, a worker and the same query in cluster mode (the master's,
   worker's and executors' archives).

Only what is missing runs (no Kafka jars, as in the Docker image: step 3 reads Spark's ``rate``
source instead). It takes about a minute and a half the first time, on a 2-core machine.

    python -m streamlab.stack.make_archives [--kinds spark-driver,kafka-broker]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import broker, cluster, console, jars, kafka, worker_bytecode
from .jvm_archives import KINDS, ArchiveState, enabled, folder, jvm_options, state
from .session import spark, stop_all_queries

WAIT_FOR_ARCHIVE_S = 120  # a JVM writes its archive when it exits: 100-200 MB, a few seconds


def states() -> list[ArchiveState]:
    """Each kind's archive: ready or missing (a kind whose jars are not fetched is left out)."""
    usable = {"kafka-broker": jars.is_cached("kafka"),
              "kafka-tools": jars.is_cached("kafka") and jars.is_cached("tools")}
    return [state(kind) for kind in KINDS if usable.get(kind, True)]


def make_for_quick_starts(kinds: list[str] | None = None, *, quiet: bool = False) -> list[ArchiveState]:
    """What ``streamlab fetch`` and ``streamlab lab`` make after the jars: the archives missing (``make_missing``),
    then PySpark compiled in the zips Spark's Python workers load (``worker_bytecode``). The Docker image makes them
    from the stack alone (``docker/Dockerfile``), before the rest of the package is copied."""
    made = make_missing(kinds, quiet=quiet)
    for line in worker_bytecode.compile_workers_zips():  # once: Spark's Python workers load bytecode
        print(f"PySpark for Spark's Python workers: {line}")
    return made


def make_missing(kinds: list[str] | None = None, *, quiet: bool = False) -> list[ArchiveState]:
    """Make the archives (of ``kinds``, default all) missing for this JDK and these jars; returns every
    kind's state. ``quiet`` (``make setup``, ``streamlab lab``): say only that they are being made (nothing
    when none is missing), and do not try again a kind that could not be made for this JDK and these jars
    (``<archive>.failed`` says why); ``streamlab fetch --archives`` does."""
    unknown = set(kinds or []) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown kinds of JVM: {', '.join(sorted(unknown))}; choose from {', '.join(KINDS)}")
    missing = [s for s in states() if not s.ready and s.path is not None and (kinds is None or s.kind in kinds)
               and not (quiet and failed_before(s.path))]
    if not missing or not enabled():
        return states()
    notes = {s.kind: s.path.with_suffix(".failed") for s in missing}
    missing = [s.kind for s in missing]
    print(f"Making the JVMs' start-up archives ({', '.join(missing)}); first run only, "
          "about a minute and a half ...", flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="streamlab-archives-") as tmp:
        env = {k: v for k, v in os.environ.items()
               if k not in ("KAFKA_BOOTSTRAP_SERVERS", "SPARK_MASTER", "SPARK_REMOTE")}
        env.update(STREAMLAB_DATA_DIR=tmp, STREAMLAB_SPARK_UI="true")
        proc = subprocess.run([sys.executable, "-m", "streamlab.stack.make_archives", "--kinds", ",".join(missing)],
                              env=env, capture_output=True, text=True, cwd=tmp)
    result = states()
    if not quiet:
        for s in result:
            print(f"  {s.kind:<15} {s.detail}")
        print(f"  ({time.monotonic() - started:.0f} s)")
    for s in result:
        if s.kind in notes and not s.ready:  # remembered, so that `make` does not try again each time
            notes[s.kind].write_text(proc.stdout + proc.stderr)
        elif s.kind in notes:
            notes[s.kind].unlink(missing_ok=True)
    if proc.returncode != 0:
        print("  Some archives could not be made; the JVMs start without them (just slower). "
              "`streamlab fetch --archives` tries again. What went wrong:\n" + _tail(proc.stdout + proc.stderr),
              flush=True)
    return result


def failed_before(archive: Path) -> Path | None:
    """The note left when ``archive`` could not be made (for this JDK and these jars), if there is one."""
    note = archive.with_suffix(".failed")
    return note if note.exists() else None


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


# --- what the new process runs -------------------------------------------------------------------

EXECUTOR_TRIES = 3  # runs of the cluster query until the executor's archive is written


def _wait_for(kinds: list[str], timeout: float = WAIT_FOR_ARCHIVE_S) -> None:
    """Wait until the JVMs that exited have finished writing the archives of ``kinds``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(state(kind).ready for kind in kinds):
            return
        time.sleep(0.5)


def _stateful_query(session, servers: str | None, topic: str, checkpoint: Path) -> None:
    """Count records per key from Kafka (or the rate source, without Kafka), to the end of the input."""
    if servers:
        source = (session.readStream.format("kafka").option("kafka.bootstrap.servers", servers)
                  .option("subscribe", topic).option("startingOffsets", "earliest").load())
        keys = source.selectExpr("CAST(key AS STRING) AS key")
    else:
        source = session.readStream.format("rate").option("rowsPerSecond", 50).load()
        keys = source.selectExpr("CAST(value % 7 AS STRING) AS key")
    counts = keys.groupBy("key").count()
    query = (counts.writeStream.format("memory").queryName(f"warm_{checkpoint.name}").outputMode("update")
             .option("checkpointLocation", str(checkpoint)))
    query = query.trigger(availableNow=True) if servers else query.trigger(processingTime="1 second")
    running = query.start()
    if servers:
        running.awaitTermination(120)
    else:
        running.processAllAvailable()
        time.sleep(2)
    running.stop()
    session.sql(f"SELECT * FROM warm_{checkpoint.name}").collect()


def _spark_run(servers: str | None, topic: str, work: Path, *, freeze_workers: bool = False, **conf) -> None:
    """Two stateful queries (HDFS and RocksDB state stores) in this process's Spark, then its JVM exits.
    ``freeze_workers``: on a cluster, stop (SIGSTOP) its workers before the application ends, so that no
    worker kills an executor while it writes its archive (Spark's worker does, 10 s after the end): the
    executor gets its stop from this driver and exits on its own. ``_cluster_run`` lets them go on."""
    from pyspark import SparkContext

    session = spark(**conf)
    _stateful_query(session, servers, topic, work / "hdfs")
    session = spark("rocksdb")
    _stateful_query(session, servers, topic, work / "rocksdb")
    stop_all_queries(session)
    if freeze_workers:
        for pid in cluster.worker_pids():
            os.kill(pid, signal.SIGSTOP)
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    session.stop()
    gateway.shutdown()
    if proc is not None:
        proc.terminate()  # the JVM writes its archive as it exits
        proc.wait(WAIT_FOR_ARCHIVE_S)


def _cluster_run(servers: str | None, topic: str, work: Path, kinds: list[str]) -> None:
    """A master and a worker, and the same query on them from a new driver process, with one executor.
    Spark's worker kills an executor 10 s after its application ends, which on a busy machine cut its
    archive short: the driver freezes the worker first (``_spark_run(freeze_workers=True)``), the
    executor exits on its own and writes its archive, then the worker goes on. Should the archive still
    be missing, the query runs again with a new executor and a new part file (``EXECUTOR_TRIES`` in all)."""
    port, ui = _free(cluster.CLUSTER_SETTINGS["master_port"]), _free(cluster.CLUSTER_SETTINGS["master_ui_port"])
    cluster.start(port, ui, quiet=True)
    code = ("import sys; from pathlib import Path; from streamlab.stack import make_archives as m; "
            "m._spark_run(sys.argv[1] or None, sys.argv[2], Path(sys.argv[3]), freeze_workers=sys.argv[4] == '1', "
            "**{'spark.cores.max': '1'})")
    try:
        wants_executor = "spark-executor" in kinds
        for attempt in range(EXECUTOR_TRIES if wants_executor else 1):
            env = dict(os.environ, SPARK_MASTER=f"spark://{cluster.HOST}:{port}")
            if wants_executor:  # a new part file each run
                env["STREAMLAB_EXECUTOR_JAVA_OPTIONS"] = " ".join(jvm_options("spark-executor"))
            try:
                subprocess.run([sys.executable, "-c", code, servers or "", topic, str(work / f"cluster-{attempt}"),
                                "1" if wants_executor else "0"], env=env, check=True, timeout=600)
                if wants_executor:
                    _wait_for(["spark-executor"], timeout=30)
            finally:
                for pid in cluster.worker_pids():  # frozen by the driver: let them go on (and be stopped)
                    os.kill(pid, signal.SIGCONT)
            if not wants_executor or state("spark-executor").ready:
                break
    finally:
        cluster.stop(quiet=True)


def _free(port: int) -> int:
    return next(p for p in range(port, port + 50) if broker.port_is_free(p, "127.0.0.1"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamlab.stack.make_archives", description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kinds of JVM (default: all)")
    kinds = [k for k in parser.parse_args(argv).kinds.split(",") if k]
    work = Path(tempfile.mkdtemp(prefix="work-", dir=os.environ.get("STREAMLAB_DATA_DIR")))
    topic, servers = "archive-warm-up", None
    try:
        if jars.is_cached("kafka"):
            servers = broker.start(_free(29092), quiet=True).bootstrap_servers  # the Kafka in use, from now on
            topic = kafka.new_topic("archive-warm-up")
            kafka.produce(topic, ({"n": i, "user": f"user-{i % 7}"} for i in range(200)), key="user")
            if "kafka-tools" in kinds and jars.is_cached("tools"):
                consumer = console.command("consumer", ["--topic", topic, "--from-beginning",
                                                        "--max-messages", "100", "--timeout-ms", "60000"],
                                           servers=servers)
                subprocess.run(consumer, capture_output=True, timeout=180, check=True)
        if "spark-driver" in kinds:
            _spark_run(servers, topic, work)
        if {"spark-master", "spark-worker", "spark-executor"} & set(kinds):
            _cluster_run(servers, topic, work, kinds)
    finally:
        if servers:
            broker.stop(quiet=True)
        shutil.rmtree(work, ignore_errors=True)
    _wait_for([s.kind for s in states() if s.kind in kinds and s.kind != "spark-executor"], timeout=60)
    print(json.dumps({s.kind: s.detail for s in states()}))
    return 0 if all(s.ready for s in states() if s.kind in kinds) else 1


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["folder", "make_for_quick_starts", "make_missing", "states"]
