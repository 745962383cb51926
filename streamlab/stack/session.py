"""`spark()`: the one way to get a SparkSession ready for the course.

* ``local[2]`` unless ``SPARK_MASTER`` names a cluster (``SPARK_REMOTE`` for Spark Connect); on a
  standalone cluster (``spark://...``, e.g. ``streamlab cluster start``) also 1-core executors, this
  Python on the executors, and (on other machines) temporary checkpoints in the shared data folder;
* 2 shuffle partitions, so the state of an aggregation lives in 2 state-store partitions;
* checkpoint files written through Hadoop's FileSystem rather than its FileContext (``CHECKPOINT_FILES``): the same
  files, a micro-batch about a third quicker; in local mode, Hadoop's local file system setting permissions without
  a ``chmod`` process per file (``streamlab.stack.local_files``), where a JDK's ``javac`` could compile it;
* the Spark Kafka connector on the classpath (resolved once, then from the cache);
* ``PYSPARK_PYTHON`` set to this interpreter (the Python workers must match the driver);
* a quick start: the driver JVM maps its class-data-sharing archive (``streamlab.stack.jvm_archives``; Janino's
  classes too, read from unsigned copies of its jars: ``jars.unsigned_spark_jars``) and
  compiles with the quick JIT only (``java.QUICK_JIT``), collecting with the serial collector
  (``java.SMALL_HEAP_GC``); a cluster's executors the same;
* quiet: no progress bars, and the JVM's log goes to ``driver_log()`` (``.streamlab/logs/``)
  instead of into notebook cells; UTC session time zone;
* ``state_store="rocksdb"`` picks the RocksDB state store for the queries started afterwards.

Environment: ``STREAMLAB_DRIVER_MEMORY`` (default 1g), ``STREAMLAB_SPARK_UI`` (true/false) and
``STREAMLAB_DRIVER_JAVA_OPTIONS`` (extra options for the driver JVM, after the course's own) and
``STREAMLAB_EXECUTOR_JAVA_OPTIONS`` (for the executors' JVMs on a cluster).
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

from . import cluster
from .jars import connector_jars, unsigned_spark_jars
from .java import QUICK_JIT, SMALL_HEAP_GC, require_java
from .jvm_archives import jvm_options
from .local_files import CLASS_NAME as LOCAL_FILES_CLASS
from .local_files import local_files_jar
from .paths import PACKAGE_DIR, data_dir

STATE_STORES = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
SHUFFLE_PARTITIONS = 2
# How a query writes its checkpoint's files (each one to a temporary name, then renamed into place). Spark's default
# goes through Hadoop's FileContext, whose rename on a local disk starts a `readlink` process (and each file made
# with a permission, a `chmod`): about 40 ms for each of a micro-batch's two log files. Hadoop's FileSystem writes
# the same files (the same .crc beside each) and renames them with the disk's own rename, which is atomic there too.
# A stateful count on this 2-core machine, 20 batches: 290-350 ms a batch before, 175-210 after (tests/stack/
# test_session.py keeps the files the same).
CHECKPOINT_FILES = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


def spark(state_store: str | None = None, *, app_name: str = "streamlab", **conf):
    """Return the course's SparkSession, creating it on first use.

    ``state_store``: "hdfs" (Spark's default: state in JVM memory, snapshots as files) or
    "rocksdb" (state in RocksDB on local disk; ``transformWithState`` needs it). It applies to
    queries started afterwards; a query restarted from a checkpoint keeps the provider the
    checkpoint was created with. Other Spark settings go in ``conf``:
    ``spark(**{"spark.sql.shuffle.partitions": "4"})``.

    On a session that is already running, only what you pass is changed: ``sl.spark()`` (which
    helpers such as ``sl.kafka_stream`` call) never undoes an earlier ``sl.spark("rocksdb")``.
    """
    if state_store is not None and state_store not in STATE_STORES:
        raise ValueError(f"state_store must be one of {sorted(STATE_STORES)}, not {state_store!r}")
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    requested = {k: str(v) for k, v in conf.items()}
    if state_store is not None:
        requested["spark.sql.streaming.stateStore.providerClass"] = STATE_STORES[state_store]
    settings = {
        "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.stateStore.providerClass": STATE_STORES["hdfs"],
        "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILES,
        **requested,
    }
    remote = os.environ.get("SPARK_REMOTE")
    active = SparkSession.getActiveSession()
    if active is None and not remote:
        # The JVM keeps the active session per thread: in a thread of our own (``sl.watch``) there is none, and
        # the builder below would re-apply the defaults (the HDFS state store) to the running session.
        made = getattr(SparkSession, "_instantiatedSession", None)
        if made is not None and getattr(made.sparkContext, "_jsc", None) is not None:
            active = made
    if active is None:
        builder = SparkSession.builder.appName(app_name)
        if remote:
            builder = builder.remote(remote)
        else:
            builder = _classic_builder(builder)
        for key, value in settings.items():
            builder = builder.config(key, value)
        if remote:
            return builder.getOrCreate()
        with _jvm_output_to(driver_log()):
            return builder.getOrCreate()
    for key, value in requested.items():
        if key.startswith("spark.sql."):
            active.conf.set(key, value)
    return active


@contextmanager
def session_settings(session, settings: dict):
    """Inside the block, ``session`` has these SQL settings (values as strings); after it, each is what it was
    (set again, or unset where it had none), whether the block ended or raised."""
    before = {key: session.conf.get(key, None) for key in settings}
    try:
        for key, value in settings.items():
            session.conf.set(key, str(value))
        yield
    finally:
        for key, value in before.items():
            if value is None:
                session.conf.unset(key)
            else:
                session.conf.set(key, value)


def driver_log() -> Path:
    """Where the Spark driver JVM writes its log and anything else it prints."""
    path = data_dir() / "logs" / "spark-driver.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def _jvm_output_to(path: Path):
    """Start the JVM with its stdout/stderr going to ``path`` instead of this process's.

    In a notebook, the kernel forwards everything written to file descriptors 1 and 2 into the
    running cell, so JVM start-up notices and log lines would land in whatever cell runs; in a graded
    lab a stray line on stderr fails a test cell. The JVM inherits the descriptors when it starts, so
    pointing them at a file just for that moment sends all of its output there for good. Errors still
    reach you: a failing Spark action raises a Python exception carrying the Java error.
    """
    from pyspark import SparkContext

    if SparkContext._gateway is not None:  # the JVM is already running
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(log, 1)
        os.dup2(log, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, log):
            os.close(fd)


def _classic_builder(builder):
    # The Java Spark's launcher will run, checked first: without it the gateway dies with an opaque
    # JAVA_GATEWAY_EXITED whose cause is only in the driver's log. JavaError says what to install.
    require_java()
    master = os.environ.get("SPARK_MASTER", "local[2]")
    if master.startswith("local") or cluster.on_this_machine(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log_conf = PACKAGE_DIR / "conf" / "log4j2.properties"
    java_opts = f"-Dlog4j2.configurationFile=file:{log_conf}"
    # The driver starts from its class-data-sharing archive (streamlab.stack.jvm_archives), or makes it, and
    # compiles with the quick JIT only: a lesson's driver does small work, and starts sooner (lesson 01:
    # 17-22 s instead of 22-24 s, 100 MB less memory; lesson 03 the same). It collects its garbage with the
    # serial collector (java.SMALL_HEAP_GC: about 10 % less CPU for a lab). STREAMLAB_DRIVER_JAVA_OPTIONS
    # comes last, so -XX:TieredStopAtLevel=4 there brings the optimising compiler back, and
    # "-XX:-UseSerialGC -XX:+UseG1GC" the default collector.
    connector = connector_jars()  # fetched now, so that the archive is the one for these jars
    unsigned = unsigned_spark_jars()  # made now, for the same reason: Janino's classes, which the archive can then hold
    local_files = local_files_jar()  # compiled now (once), for the same reason: Hadoop's local files without chmod
    driver_opts = " ".join([java_opts, QUICK_JIT, SMALL_HEAP_GC, *jvm_options("spark-driver"),
                            os.environ.get("STREAMLAB_DRIVER_JAVA_OPTIONS", "")]).strip()
    # The executors of a course's cluster are light JVMs too: the same quick JIT and collector. The cluster test's two
    # lessons, on the idle 2-core machine: executors 136 CPU-s with the optimising compiler and G1, 52 with these
    # (the whole test 241 CPU-s and 168 s against 140 and 111). STREAMLAB_EXECUTOR_JAVA_OPTIONS comes last, as above.
    executor_opts = " ".join([java_opts, QUICK_JIT, SMALL_HEAP_GC])
    if master.startswith("spark://"):  # a standalone cluster: streamlab.stack.cluster.cluster_conf() says what it adds
        for key, value in cluster.cluster_conf(SHUFFLE_PARTITIONS).items():
            builder = builder.config(key, value)
        if cluster.on_this_machine(master):  # the executors run this JDK and these jars: their archive
            # (mapped, never made here: the worker kills an executor 10 s after its application
            # ends, too soon to write one; `streamlab fetch` makes it with one executor)
            executor_opts = " ".join([executor_opts, *jvm_options("spark-executor", make=False)])
        else:  # on another machine (or container) /tmp is not shared
            driver_opts += f" -Djava.io.tmpdir={cluster.driver_tmp_dir()}"
    executor_opts = f"{executor_opts} {os.environ.get('STREAMLAB_EXECUTOR_JAVA_OPTIONS', '')}".strip()
    driver_jars = [*unsigned, *([local_files] if local_files else [])]  # in jvm_archives.classpath's order
    if driver_jars:
        builder = builder.config("spark.driver.extraClassPath", os.pathsep.join(str(j) for j in driver_jars))
    if local_files and master.startswith("local"):  # a cluster's executors have no such class: Hadoop's own there
        builder = builder.config("spark.hadoop.fs.file.impl", LOCAL_FILES_CLASS)
    # spark.jars: the driver serves the connector jars and every executor fetches them when it starts
    return (builder.master(master)
            .config("spark.jars", ",".join(str(j) for j in connector))
            .config("spark.driver.memory", os.environ.get("STREAMLAB_DRIVER_MEMORY", "1g"))
            .config("spark.driver.extraJavaOptions", driver_opts)
            .config("spark.executor.extraJavaOptions", executor_opts)
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.ui.enabled", os.environ.get("STREAMLAB_SPARK_UI", "true"))
            .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true"))


def stop_all_queries(session=None) -> int:
    """Stop every streaming query still running in this session; returns how many were stopped."""
    from pyspark.sql import SparkSession

    session = session or SparkSession.getActiveSession()
    if session is None:
        return 0
    queries = list(session.streams.active)
    for query in queries:
        query.stop()
    return len(queries)
