"""streamlab.stack.jars: the Java jars, resolved once from Maven Central, then used offline."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from streamlab.stack import jars
from streamlab.stack.java import QUICK_JIT


def test_connector_is_of_the_spark_major_and_the_doctor_says_which_pair():
    import pyspark

    from streamlab.stack.doctor import examine_connector

    ours, spark = jars.CONNECTOR_VERSION.split("."), pyspark.__version__.split(".")
    assert ours[0] == spark[0] and int(ours[1]) in (int(spark[1]), int(spark[1]) - 1), "one minor line behind at most"
    detail = examine_connector().detail
    assert jars.CONNECTOR_VERSION in detail
    assert (jars.CONNECTOR_NOTE in detail) == (ours[:2] != spark[:2]), detail
    names = [j.name for j in jars.connector_jars()]
    assert any(n.startswith("spark-sql-kafka-0-10_2.13-") for n in names)
    assert not any(n.startswith("scala-library") for n in names), "pyspark already ships Scala"


def test_first_run_offline_says_what_to_do(tmp_path):
    """With an empty cache and no network, fetching fails with a message, not a stack trace."""
    env = dict(os.environ, STREAMLAB_CACHE_DIR=str(tmp_path / "cache"),
               JAVA_TOOL_OPTIONS="-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=9 "
                                 "-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=9 "
                                 f"{QUICK_JIT}")  # a short-lived JVM: the quick JIT is enough
    proc = subprocess.run([sys.executable, "-m", "streamlab", "fetch", "--connector"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "first run needs network access" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "cache" / "jars" / "connector").exists(), "nothing half-written is kept"


def test_later_runs_work_offline():
    """A cached jar set is used without running the resolver at all."""
    assert jars.is_cached("connector")
    env = dict(os.environ, JAVA_TOOL_OPTIONS="-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=9")
    proc = subprocess.run([sys.executable, "-m", "streamlab", "fetch", "--connector"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Resolving" not in proc.stdout


def test_artifact_names():
    assert jars._artifact(Path("kafka-clients-3.9.2.jar")) == "kafka-clients"
    assert jars._artifact(Path("spark-tags_2.13-4.2.0.jar")) == "spark-tags_2.13"


def test_the_tools_set_is_only_kafkas_tools_jar():
    """Kafka's console tools run on the broker's classpath: their set adds one jar, same version."""
    assert "transitive=\"false\"" in jars._SPECS["tools"] and jars.KAFKA_VERSION in jars._SPECS["tools"]
    if jars.is_cached("tools"):
        assert [j.name for j in jars.jars("tools")] == [f"kafka-tools-{jars.KAFKA_VERSION}.jar"]
