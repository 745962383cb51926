"""What `streamlab doctor` examines: that everything the course needs is here, and how to fix what isn't.

Each ``examine_*`` returns a ``Finding`` (name, ok, detail, fix). ``diagnose()`` makes them all; the CLI prints them
as a table (``report``) and notebook 00 shows them as a DataFrame. (A *check*, in this package, is only ever one of the
grader's hidden checks of a lab.)
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from . import broker, jars, jvm_archives, kafka
from .java import JAVA_FIX, SUPPORTED_JAVA, find_java, java_version, missing_java
from .make_archives import states as archive_states
from .pins import pinned_version
from .session import spark as get_spark


@dataclass
class Finding:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def examine_python() -> Finding:
    ok = sys.version_info >= (3, 11)
    return Finding("python", ok, f"{sys.version.split()[0]} at {sys.executable}",
                 "" if ok else "Use Python 3.11 (see environment.yml).")


def examine_java() -> Finding:
    java = find_java()  # the one Spark's launcher runs: $JAVA_HOME/bin/java if JAVA_HOME is set, else PATH's
    if java is None:
        return Finding("java", False, missing_java(), JAVA_FIX)
    version = java_version(java)
    if version is None or version < 17:
        return Finding("java", False, f"{java}: version {version}", JAVA_FIX)
    note = "" if version in SUPPORTED_JAVA else " (the course is tested on 17)"
    return Finding("java", True, f"Java {version} at {java}{note}")


def examine_pyspark() -> Finding:
    try:
        import pyspark
    except ImportError:
        return Finding("pyspark", False, "not installed", "Run `make setup` (or pip install -r requirements.txt).")
    want = pinned_version("pyspark")
    ok = pyspark.__version__ == want
    return Finding("pyspark", ok, pyspark.__version__,
                 "" if ok else f"The course pins pyspark=={want}: run `make setup`.")


def examine_connector() -> Finding:
    if not jars.is_cached("connector"):
        return Finding("kafka connector", False, "not downloaded yet",
                     "Run `streamlab fetch` once with network access (make lab does it).")
    import pyspark

    names = [j.name for j in jars.connector_jars()]
    detail = ", ".join(n for n in names if "kafka" in n)
    if jars.CONNECTOR_VERSION.split(".")[:2] != pyspark.__version__.split(".")[:2]:
        detail += f" ({jars.CONNECTOR_NOTE})"
    return Finding("kafka connector", True, detail)


def examine_archives() -> Finding:
    """The JVMs' start-up archives (``streamlab.stack.jvm_archives``): ready, or missing with the fix.
    Never a failure: without them every JVM works, only starts slower."""
    name = "start-up archives"
    if not jvm_archives.enabled():
        return Finding(name, True, "off (STREAMLAB_JVM_ARCHIVES=off): the JVMs start without them")
    found = archive_states()
    missing = [s.kind for s in found if not s.ready and s.path is not None]
    if not missing:
        size = sum(s.size_mb for s in found)
        return Finding(name, True, f"ready for {len(found)} kinds of JVM ({size:.0f} MB in {jvm_archives.folder()})")
    return Finding(name, True, f"missing for this JDK and these jars: {', '.join(missing)} (those JVMs start "
                 "about twice as slowly, and make theirs when they exit)",
                 "Run `streamlab fetch --archives` (about a minute and a half).")


def examine_memory() -> Finding:
    import psutil

    free_gb = psutil.virtual_memory().available / 2**30
    ok = free_gb >= 2
    return Finding("memory", ok, f"{free_gb:.1f} GiB available",
                 "" if ok else "Spark and Kafka need about 2 GiB: close other programs.")


def examine_broker() -> Finding:
    try:
        servers = kafka.bootstrap_servers(start=False)
    except kafka.NoBrokerError as err:
        return Finding("kafka broker", False, str(err), "Run `streamlab kafka start`.")
    ok, detail = kafka.ping(servers)
    return Finding("kafka broker", ok, f"{servers}: {detail}",
                 "" if ok else "Run `streamlab kafka status`; `streamlab kafka start` restarts a dead broker.")


def examine_port(port: int = 9092) -> Finding:
    state = broker.status()
    if state.running and state.port == port:
        return Finding(f"port {port}", True, "used by the course's broker")
    if broker.port_is_free(port):
        return Finding(f"port {port}", True, "free")
    return Finding(f"port {port}", True, "taken by another program: the course's broker will pick another port")


def examine_spark_reads_kafka(session=None) -> Finding:
    """The end-to-end check: Spark, through the connector, reads records a Python client wrote."""
    try:
        spark_session = session if session is not None else get_spark()
        topic = kafka.new_topic("doctor", partitions=1)
        kafka.produce(topic, [{"check": i} for i in range(3)])
        rows = (spark_session.read.format("kafka")
                .option("kafka.bootstrap.servers", kafka.bootstrap_servers())
                .option("subscribe", topic).load().count())
        kafka.delete_topic(topic)
    except Exception as err:  # noqa: BLE001 - the doctor reports any failure
        return Finding("spark reads kafka", False, f"{type(err).__name__}: {str(err).splitlines()[0][:200]}",
                     "Run `streamlab doctor` in a terminal for details.")
    ok = rows == 3
    return Finding("spark reads kafka", ok, f"read {rows} of 3 records")


def diagnose(*, with_spark: bool = False, session=None) -> list[Finding]:
    findings = [examine_python(), examine_java(), examine_pyspark(), examine_connector(), examine_archives(),
                examine_memory(), examine_port(), examine_broker()]
    if with_spark and all(f.ok for f in findings):
        findings.append(examine_spark_reads_kafka(session))
    return findings


def report(findings: list[Finding]) -> str:
    width = max(len(c.name) for c in findings)
    lines = []
    for c in findings:
        lines.append(f"{'ok ' if c.ok else 'FAIL'} {c.name:<{width}}  {c.detail}")
        if c.fix:  # a failure's fix, or advice on what is fine
            lines.append(f"     {'':<{width}}  -> {c.fix}")
    return "\n".join(lines)

