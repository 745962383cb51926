"""streamlab.stack.jars: the Java jars, resolved once from Maven Central, then used offline."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.slow
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


def test_missing_sets_are_resolved_at_the_same_time_and_a_failure_is_raised_after(monkeypatch):
    """`streamlab fetch` on a first run resolves its sets at once (each Ivy run waits on Maven Central): two fakes
    that each wait for the other pass a barrier only together. A set that fails raises its own error, after the
    others are done and cached."""
    import threading

    both = threading.Barrier(2, timeout=30)
    cached: set[str] = set()

    def fake_fetch(name, *, quiet=False):
        if name not in cached:
            both.wait()  # BrokenBarrierError if the other set is not being resolved meanwhile
            if name == "tools":
                raise jars.FetchError("tools: no network")
            cached.add(name)
        return [Path(f"/cache/{name}.jar")]

    monkeypatch.setattr(jars, "fetch", fake_fetch)
    monkeypatch.setattr(jars, "is_cached", lambda name: name in cached)
    assert jars.fetch_all(["connector", "kafka"]) == {"connector": [Path("/cache/connector.jar")],
                                                      "kafka": [Path("/cache/kafka.jar")]}
    cached.clear()
    both.reset()
    try:
        jars.fetch_all(["kafka", "tools"])
    except jars.FetchError as err:
        assert "tools" in str(err)
    else:
        raise AssertionError("a set that could not be resolved must fail the fetch")
    assert cached == {"kafka"}, "the set that was resolved stays cached"


def _jar(path: Path, entries: dict[str, bytes]) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return path


def test_signed_jars_get_copies_without_their_signatures_made_once(tmp_path, monkeypatch):
    """Class-data sharing leaves out every class of a signed jar (pyspark's Janino): the driver's classpath starts
    with copies that are the same jar less its signature files; an unsigned jar gets none."""
    import zipfile

    shipped = tmp_path / "pyspark-jars"
    shipped.mkdir()
    classes = {"org/codehaus/janino/UnitCompiler.class": b"\xca\xfe\xba\xbe one",
               "org/codehaus/janino/Java.class": b"\xca\xfe\xba\xbe two"}
    manifest = b"Manifest-Version: 1.0\r\n\r\nName: org/codehaus/janino/Java.class\r\nSHA-256-Digest: x\r\n"
    _jar(shipped / "janino-3.1.9.jar", {"META-INF/MANIFEST.MF": manifest, "META-INF/DUMMY.SF": b"sig",
                                        "META-INF/DUMMY.DSA": b"block", "META-INF/maven/pom.xml": b"<p/>", **classes})
    _jar(shipped / "spark-core_2.13-4.3.0.jar", {"META-INF/MANIFEST.MF": b"Manifest-Version: 1.0\r\n",
                                                "org/apache/spark/SparkContext.class": b"\xca\xfe\xba\xbe"})
    monkeypatch.setattr(jars, "pyspark_jars_dir", lambda: shipped)
    monkeypatch.setenv("STREAMLAB_CACHE_DIR", str(tmp_path / "cache"))
    assert jars.unsigned_spark_jars(make=False) == [], "nothing is made unless asked"

    (copy,) = jars.unsigned_spark_jars()
    assert copy.name == "janino-3.1.9.jar" and copy.parent.parent == tmp_path / "cache" / "jars"
    with zipfile.ZipFile(copy) as made, zipfile.ZipFile(shipped / "janino-3.1.9.jar") as original:
        assert sorted(made.namelist()) == sorted(set(original.namelist()) - {"META-INF/DUMMY.SF", "META-INF/DUMMY.DSA"})
        assert all(made.read(name) == original.read(name) for name in made.namelist()), "the same bytes"
    assert oct(copy.parent.stat().st_mode & 0o777) == "0o755", "readable by a sandboxed kernel's user"
    made_at = copy.stat().st_mtime_ns
    assert jars.unsigned_spark_jars() == [copy] == jars.unsigned_spark_jars(make=False)
    assert copy.stat().st_mtime_ns == made_at, "made once"

    _jar(shipped / "janino-3.1.9.jar", {"META-INF/MANIFEST.MF": manifest, **classes})  # a pyspark whose Janino is not
    assert jars.unsigned_spark_jars() == [], "signed, as a later one could be: no copies, and no stale ones either"


def test_without_a_writable_cache_the_driver_goes_without_the_copies(tmp_path, monkeypatch):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "jars").write_text("a file where the folder would go")  # fails even for root
    monkeypatch.setenv("STREAMLAB_CACHE_DIR", str(tmp_path / "cache"))
    assert jars.unsigned_spark_jars() == []


def test_a_damaged_jar_in_pyspark_leaves_the_driver_as_it_was(tmp_path, monkeypatch):
    shipped = tmp_path / "pyspark-jars"
    shipped.mkdir()
    (shipped / "janino-3.1.9.jar").write_bytes(b"not a zip")
    monkeypatch.setattr(jars, "pyspark_jars_dir", lambda: shipped)
    monkeypatch.setenv("STREAMLAB_CACHE_DIR", str(tmp_path / "cache"))
    assert jars.unsigned_spark_jars() == []
