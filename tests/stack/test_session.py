"""streamlab.stack.session: the course's SparkSession."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import streamlab as sl
from streamlab.stack import session
from streamlab.stack.java import QUICK_JIT, SMALL_HEAP_GC
from streamlab.stack.jvm_archives import archive_file


def test_spark_session_is_ready_for_the_course(spark):
    assert spark.version == "4.3.0"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.streaming.checkpointFileManagerClass") == session.CHECKPOINT_FILES, \
        "checkpoint files written through Hadoop's FileSystem, not its FileContext (no readlink per rename)"
    assert "spark-sql-kafka-0-10" in spark.sparkContext.getConf().get("spark.jars")
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert sl.spark() is spark, "one session per process"
    driver_opts = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    assert "log4j2.configurationFile=" in driver_opts, "the driver's log goes to the course's log file"
    assert QUICK_JIT in driver_opts.split(), "a lesson's driver is a light JVM: the quick JIT"
    assert SMALL_HEAP_GC in driver_opts.split(), "and the serial collector"
    jvm = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    collectors = {bean.getName() for bean in jvm.getGarbageCollectorMXBeans()}
    assert collectors == {"Copy", "MarkSweepCompact"}, f"the driver runs the serial collector: {collectors}"
    executor_opts = spark.sparkContext.getConf().get("spark.executor.extraJavaOptions").split()
    assert QUICK_JIT in executor_opts and SMALL_HEAP_GC in executor_opts, "a cluster's executors are light JVMs too"


def test_unknown_state_store_is_refused_before_spark_starts():
    with pytest.raises(ValueError, match="state_store must be one of"):
        session.spark(state_store="leveldb")


def test_a_running_session_keeps_what_was_chosen(spark):
    """Helpers call sl.spark() with no arguments: that must not undo sl.spark("rocksdb") or a
    learner's own shuffle partitions (it did, and transformWithState then refused HDFS state)."""
    import streamlab as sl

    key, partitions = "spark.sql.streaming.stateStore.providerClass", "spark.sql.shuffle.partitions"
    try:
        sl.spark("rocksdb", **{partitions: "3"})
        sl.spark()
        assert spark.conf.get(key).endswith("RocksDBStateStoreProvider")
        assert spark.conf.get(partitions) == "3"
        sl.spark("hdfs")
        assert spark.conf.get(key).endswith("HDFSBackedStateStoreProvider")
    finally:
        sl.spark("hdfs", **{partitions: "2"})


def test_the_driver_starts_from_its_archive_and_says_nothing_of_it(spark):
    """The driver JVM maps the spark-driver archive (`make setup` made it: `streamlab fetch --archives`),
    and its log holds no class-data-sharing line."""
    from pyspark import SparkContext

    archive = archive_file("spark-driver")
    assert archive.exists(), "no archive for this JDK and these jars: run `streamlab fetch --archives`"
    driver = SparkContext._gateway.proc.pid
    assert str(archive) in Path(f"/proc/{driver}/maps").read_text(), "the driver maps its archive"
    log = session.driver_log().read_text(errors="replace")
    assert "[cds" not in log and "shared archive" not in log.lower()


def test_the_code_generators_classes_come_from_unsigned_copies_that_the_archive_holds(spark):
    """pyspark's Janino jars are signed, and class-data sharing leaves out every class of a signed jar: the driver
    reads Janino from unsigned copies first on its classpath (``jars.unsigned_spark_jars``), and its archive holds
    those classes."""
    from streamlab.stack import jars

    copies = {str(c) for c in jars.unsigned_spark_jars(make=False)}
    assert {jars._artifact(Path(c)) for c in copies} == {"janino", "commons-compiler"}
    spark.range(3).selectExpr("id * 2").collect()  # generated code: Janino at work
    unit_compiler = spark.sparkContext._jvm.java.lang.Class.forName("org.codehaus.janino.UnitCompiler")
    assert unit_compiler.getProtectionDomain().getCodeSource().getLocation().getPath() in copies
    assert unit_compiler.getSigners() is None
    assert b"org/codehaus/janino/UnitCompiler" in archive_file("spark-driver").read_bytes(), \
        "the driver's archive holds Janino's classes"


def test_in_local_mode_hadoop_sets_permissions_without_a_chmod_process(spark, tmp_path):
    """The driver's local files go through the course's file system (``streamlab.stack.local_files``): Hadoop's, with
    each file's and folder's permissions set in the JVM instead of by a ``chmod`` process, and set as asked."""
    from streamlab.stack import local_files

    assert local_files.local_files_jar(make=False) is not None, "make setup compiled it (a JDK is here)"
    jvm = spark.sparkContext._jvm
    fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark.sparkContext._jsc.hadoopConfiguration())
    assert fs.getClass().getName() == local_files.CLASS_NAME
    made = tmp_path / "made"
    fs.create(jvm.org.apache.hadoop.fs.Path(str(made)), True).close()
    assert oct(made.stat().st_mode & 0o777) == "0o644", "Hadoop's default for a new file, less the umask"
    assert (tmp_path / ".made.crc").is_file(), "its checksum beside it, as Hadoop's LocalFileSystem writes it"
    fs.setPermission(jvm.org.apache.hadoop.fs.Path(str(made)), jvm.org.apache.hadoop.fs.permission.FsPermission
                     .valueOf("-rw-r-----"))
    assert oct(made.stat().st_mode & 0o777) == "0o640"
    folder = tmp_path / "folder"
    fs.mkdirs(jvm.org.apache.hadoop.fs.Path(str(folder)),
              jvm.org.apache.hadoop.fs.permission.FsPermission.valueOf("drwxr-x---"))
    assert folder.is_dir() and oct(folder.stat().st_mode & 0o777) == "0o750"
