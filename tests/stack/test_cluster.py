"""The course on a native Spark standalone cluster (`streamlab cluster`), with SPARK_MASTER the only switch.

The ``cluster`` tests start a master and its worker (JVMs: part of ``make test``, not ``make check``) on free
ports and in a data folder of their own, so a cluster a learner started is left alone; they run lesson
notebooks on it unchanged. The other tests here check the command's messages and start nothing.
"""
from __future__ import annotations

import json
import os
import random
import re
import socket
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import nbformat
import psutil
import pytest
from nbformat.v4 import new_code_cell
from test_cli import streamlab
from test_notebooks import ROOT, _client

from streamlab.stack.broker import port_is_free
from streamlab.stack.cluster import CLUSTER_SETTINGS
from streamlab.stack.java import QUICK_JIT, SMALL_HEAP_GC

# Under pytest-xdist the whole module runs in one worker (tests/conftest.py's group_of: the group "cluster"): one
# cluster, notebooks one by one. (An xdist_group mark did this before the course's scheduler; without xdist, as in the
# docker tier's run, pytest called it an unknown mark.)

# The smallest set that covers the issue: 01 (required; a groupBy().count() restarted from its checkpoint, state
# partitions shown) and 02 (transformWithState with value/list/map state on RocksDB, row and pandas forms, processors
# defined in the notebook that the executors unpickle, state partitions shown). 02b (timers, TTL), 06 and 07 use the
# same operators; the check cell below adds one processor of the course package (07's PathStats) to 02's run.
NOTEBOOKS = ["01_stateless_vs_stateful", "02_keyed_state"]
# The query whose state partitions each notebook shows (a variable of the notebook's kernel).
STATE_QUERY = {"01_stateless_vs_stateful": "query.id", "02_keyed_state": "pages_run.query_id"}
APP_WAIT_S = 60


@dataclass
class Cluster:
    url: str
    ui: str
    env: dict
    home: Path
    started: str  # what `streamlab cluster start` printed


def _free_ports() -> tuple[int, int]:
    """A free port for the master, and one for its web UI whose next port (the worker's UI) is free too.

    Taken below Linux's ephemeral range (32768-60999 by default): a port the kernel hands out to any client's
    connection or to a server asking for port 0 (the broker's clients, Spark, other tests running beside this
    one) could be taken between this check and the cluster's start, and was once (the worker's UI port)."""
    low, high = _ephemeral_range()
    candidates = [p for p in range(20000, min(low, 32768) - 1)] or list(range(high + 1, 65000))
    random.shuffle(candidates)
    free = [p for p in candidates[:400] if port_is_free(p)]
    for master in free:
        for ui in free:
            if master not in (ui, ui + 1) and port_is_free(ui + 1):
                return master, ui
    raise RuntimeError("found no free ports for the cluster")


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _master(ui: str) -> dict:
    with urllib.request.urlopen(f"{ui}/json/", timeout=10) as response:
        return json.loads(response.read())


def _our_processes(home: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if f"-Dstreamlab.cluster={home / 'cluster'}" in (proc.info["cmdline"] or []):
            found.append(proc)
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("cluster-data")
    port, ui_port = _free_ports()
    env = dict(os.environ, STREAMLAB_DATA_DIR=str(home))
    proc = streamlab("cluster", "start", "--port", str(port), "--ui-port", str(ui_port), env=env)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        yield Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}", env, home, proc.stdout)
    finally:
        streamlab("cluster", "stop", env=env)


def _ensure_running(cluster: Cluster) -> None:
    """`start` on a running cluster only says so: the tests need no particular order."""
    proc = streamlab("cluster", "start", "--port", cluster.url.rsplit(":", 1)[1],
                     "--ui-port", cluster.ui.rsplit(":", 1)[1], env=cluster.env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- the command, no JVM started


def test_status_and_stop_when_no_cluster_runs(tmp_path):
    env = dict(os.environ, STREAMLAB_DATA_DIR=str(tmp_path))
    status = streamlab("cluster", "status", env=env)
    assert status.returncode == 1 and "not running" in status.stdout and "streamlab cluster start" in status.stdout
    stop = streamlab("cluster", "stop", env=env)
    assert stop.returncode == 0 and "was not running" in stop.stdout


def test_a_busy_port_gets_a_clear_message_and_nothing_starts(tmp_path):
    env = dict(os.environ, STREAMLAB_DATA_DIR=str(tmp_path))
    port, ui_port = _free_ports()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        proc = streamlab("cluster", "start", "--port", str(port), "--ui-port", str(ui_port), env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"Port {port} (the master) is taken by pid {os.getpid()}" in proc.stderr
    assert f"streamlab cluster start --port {port + 1}" in proc.stderr
    assert not _our_processes(tmp_path)
    assert streamlab("cluster", "status", env=env).returncode == 1


# --------------------------------------------------------------------------- a running cluster


@pytest.mark.cluster
def test_start_prints_the_master_url_and_its_web_ui(cluster):
    assert f"Spark master {cluster.url}, web UI {cluster.ui}" in cluster.started
    assert f"SPARK_MASTER={cluster.url}" in cluster.started
    info = _master(cluster.ui)
    assert info["status"] == "ALIVE" and info["url"] == cluster.url
    alive = [w for w in info["workers"] if w["state"] == "ALIVE"]
    assert len(alive) == CLUSTER_SETTINGS["workers"]
    assert all(w["cores"] == CLUSTER_SETTINGS["worker_cores"] and w["host"] == "127.0.0.1" for w in alive)
    assert all(w["memory"] * 1024**2 == _size(CLUSTER_SETTINGS["worker_memory"]) for w in alive)
    status = streamlab("cluster", "status", env=cluster.env)
    assert status.returncode == 0 and cluster.url in status.stdout and "ALIVE" in status.stdout
    daemons = [p.info["cmdline"] for p in _our_processes(cluster.home) if "java" in p.info["cmdline"][0]]
    assert len(daemons) == 1 + CLUSTER_SETTINGS["workers"], daemons  # light JVMs: they only pass messages
    assert all({QUICK_JIT, SMALL_HEAP_GC} <= set(cmd) for cmd in daemons), daemons


def _size(text: str) -> int:
    return int(text[:-1]) * 1024 ** "kmg".index(text[-1].lower()) * 1024


CHECK_CELL = """
import json as _json
import sys as _sys
from streamlab.stack.spark_ui import state_partition_executors as _placement
_sc = spark.sparkContext
_check = {{"app": _sc.applicationId, "master": _sc.master,
          "executor_python": sorted(set(_sc.parallelize(range(4), 2).map(lambda _: _sys.executable).collect())),
          "placement": _placement(spark, str({query})).to_dict(orient="records")}}
import psutil as _psutil
_check["executor_jvms"] = [_p.info["cmdline"] for _p in _psutil.process_iter(["cmdline"])
                           if "CoarseGrainedExecutorBackend" in str(_p.info["cmdline"])
                           and _check["app"] in (_p.info["cmdline"] or [])]
"""
# A StatefulProcessor of the course package (the one notebook 07 uses): the executors unpickle and run it.
PACKAGE_PROCESSOR = """
_topic, _log = sl.new_topic("cluster-path-stats"), sl.access_log(30, seed=5)
sl.produce(_topic, _log, key="path")
_stats = sl.kafka_stream(_topic, sl.ACCESS_LOG_SCHEMA, spark=spark).groupBy("path").transformWithState(
    statefulProcessor=sl.m07.PathStats(), outputStructType=sl.m07.PATH_STATS_OUTPUT, outputMode="Update",
    timeMode="None")
_run = sl.run_to_end(_stats, output_mode="update", checkpoint=sl.new_checkpoint("cluster-path-stats"))
_check["processor_counts"] = {k: int(v) for k, v in sl.latest(_run.rows, "path", "count").items()}
_check["expected_counts"] = {p: sum(e["path"] == p for e in _log) for p in {e["path"] for e in _log}}
"""
CHECK_PRINT = 'print("CLUSTER-CHECK " + _json.dumps(_check))'


@pytest.mark.cluster
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_unchanged_on_the_cluster(name, cluster, kafka_bootstrap, monkeypatch, record_property):
    _ensure_running(cluster)
    path = ROOT / "notebooks" / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    lesson_cells = len(nb.cells)
    # After the lesson: which application ran it, and which executor ran each state partition.
    extra = PACKAGE_PROCESSOR if name == "02_keyed_state" else ""
    nb.cells.append(new_code_cell(CHECK_CELL.format(query=STATE_QUERY[name]) + extra + CHECK_PRINT))
    monkeypatch.setenv("SPARK_MASTER", cluster.url)    # the only switch (the kernel inherits it)
    monkeypatch.setenv("STREAMLAB_SPARK_UI", "true")   # the check cell reads task placement from the UI's REST API
    started = time.monotonic()
    _client(nb, path).execute()
    record_property("seconds", round(time.monotonic() - started, 1))
    outputs = [o for c in nb.cells[:lesson_cells] if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    noise = [o.text for o in outputs if o.output_type == "stream" and o.name == "stderr"]
    assert not noise, f"JVM or library noise in the lesson's cells: {noise}"
    views = [o for o in outputs if o.get("metadata", {}).get("streamlab", {}).get("view") == "state-watch"]
    if name == "01_stateless_vs_stateful":  # sl.watch read the state as of each batch through the cluster
        assert views and all(", stopped)" in o.data["text/plain"] and o.data["image/png"] for o in views)
        assert re.search(r"added\s+updated\s+removed", views[-1].data["text/plain"])

    line = next(line for o in nb.cells[-1].outputs if o.output_type == "stream"
                for line in o.text.splitlines() if line.startswith("CLUSTER-CHECK "))
    check = json.loads(line.removeprefix("CLUSTER-CHECK "))
    assert check["master"] == cluster.url
    assert check["executor_python"] == [sys.executable], "executors must run the course's Python"
    assert len(check["executor_jvms"]) == 2 and all({QUICK_JIT, SMALL_HEAP_GC} <= set(cmd)
                                                    for cmd in check["executor_jvms"]), check["executor_jvms"]
    if "processor_counts" in check:
        assert check["processor_counts"] == check["expected_counts"]
    # State partitions 0 and 1 ran as tasks on two different executors (1 core each).
    placement = check["placement"]
    assert {p["partition"] for p in placement} == {0, 1}, placement
    by_partition = {p["partition"]: {q["executor"] for q in placement if q["partition"] == p["partition"]}
                    for p in placement}
    assert len(set().union(*by_partition.values())) == 2, placement
    print(f"{name}: state partition -> executors {by_partition}")

    # The kernel has stopped: the master's UI lists the application as finished.
    deadline = time.monotonic() + APP_WAIT_S
    while True:
        finished = {app["id"]: app for app in _master(cluster.ui)["completedapps"]}
        if check["app"] in finished or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert check["app"] in finished, f"{check['app']} not among the master's completed applications"
    app = finished[check["app"]]
    assert app["state"] == "FINISHED" and app["name"] == "streamlab"
    assert app["cores"] == 2 and app["memoryperexecutor"] * 1024**2 == _size(CLUSTER_SETTINGS["executor_memory"])


@pytest.mark.cluster
def test_stop_stops_the_master_the_worker_and_the_executors(cluster):
    _ensure_running(cluster)
    assert {p.info["cmdline"][-1] for p in _our_processes(cluster.home)} >= {cluster.url}  # the worker
    proc = streamlab("cluster", "stop", env=cluster.env)
    assert proc.returncode == 0, proc.stderr
    assert "Stopped the Spark worker" in proc.stdout and "Stopped the Spark master" in proc.stdout
    assert not _our_processes(cluster.home)
    assert not [p for p in psutil.process_iter(["cmdline", "cwd"])  # executors run in the worker's work dir
                if any("CoarseGrainedExecutorBackend" in arg for arg in p.info["cmdline"] or [])
                and str(cluster.home) in (p.info["cwd"] or "")]
    for port in (cluster.url, cluster.ui):
        assert port_is_free(int(port.rsplit(":", 1)[1]))
    status = streamlab("cluster", "status", env=cluster.env)
    assert status.returncode == 1 and "not running" in status.stdout
