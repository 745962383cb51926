"""A native Spark standalone cluster, from the Spark distribution that the pinned pyspark ships.

``start()`` launches a master and ``CLUSTER_SETTINGS["workers"]`` worker(s) bound to 127.0.0.1
(``bin/spark-class`` of the pyspark package, no Docker, no separate Spark download) and waits until
the workers have registered; ``status()`` says what runs (the master's ``/json/``: workers and
applications); ``stop()`` stops everything ``start()`` started. Everything lives in
``data_dir()/cluster``: ``cluster.json`` (pids and ports), ``master.log``, ``worker-1.log``, ``work/``
(the executors' jars and logs). Notebooks use it with ``SPARK_MASTER=spark://127.0.0.1:7077``;
``streamlab.spark()`` adds what cluster mode needs (``cluster_conf()``).

``CLUSTER_SETTINGS`` is the one place for ports, cores and memory: the Docker stack's ``cluster``
profile (docker/compose.yaml) uses the same values, and tests/test_docker_static.py checks it.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .broker import port_is_free
from .java import QUICK_JIT, SMALL_HEAP_GC, require_java
from .jvm_archives import jvm_options
from .paths import data_dir
from .spark_ui import get_json

HOST = "127.0.0.1"
CLUSTER_SETTINGS = {
    "master_port": 7077,           # spark://127.0.0.1:7077
    "master_ui_port": 8080,        # the master's web UI (and its /json/)
    "worker_ui_port": 8081,        # the first worker's web UI; the next worker's is one higher
    "workers": 1,
    "worker_cores": 2,             # the cores of a 2-core machine: one application at a time
    "worker_memory": "2g",         # what the worker's executors may use together
    "executor_cores": 1,           # 1-core executors: an application's 2 state partitions run on 2 executors
    "executor_memory": "1g",
    "master_daemon_memory": "512m",
    "worker_daemon_memory": "256m",
}
START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 30
ROLES = {"master": "org.apache.spark.deploy.master.Master", "worker": "org.apache.spark.deploy.worker.Worker"}


class ClusterError(RuntimeError):
    """The cluster could not be started; the message says why and where the logs are."""


@dataclass
class ClusterStatus:
    running: bool
    detail: str
    master_url: str | None = None
    ui_url: str | None = None
    master: dict = field(default_factory=dict)  # the master's /json/: workers, activeapps, completedapps


def home() -> Path:
    path = data_dir() / "cluster"
    path.mkdir(parents=True, exist_ok=True)
    return path


def spark_home() -> Path:
    """The Spark distribution inside the pyspark package (bin/spark-class, jars/), found without importing it."""
    return Path(importlib.util.find_spec("pyspark").origin).resolve().parent


def cluster_conf(state_partitions: int) -> dict[str, str]:
    """Spark settings an application on a standalone cluster needs and local mode does not
    (``streamlab.spark()`` applies them when ``SPARK_MASTER`` is ``spark://...``): 1-core executors,
    as many as state partitions, and this interpreter as the executors' Python."""
    python = os.environ.get("PYSPARK_PYTHON") or "python3"
    cores = CLUSTER_SETTINGS["executor_cores"]
    return {
        "spark.executor.cores": str(cores),
        "spark.executor.memory": CLUSTER_SETTINGS["executor_memory"],
        "spark.cores.max": str(state_partitions * cores),
        "spark.pyspark.python": python,
        "spark.executorEnv.PYSPARK_PYTHON": python,
    }


def driver_tmp_dir() -> Path:
    """The driver's ``java.io.tmpdir`` on a cluster of other machines (the Docker ``cluster`` profile):
    where Spark puts the checkpoint of a query started without one, so it must be a folder the
    executors reach too. The data folder is (a volume shared by the containers)."""
    path = data_dir().resolve() / "tmp"
    path.mkdir(parents=True, exist_ok=True)
    return path


def on_this_machine(master: str) -> bool:
    """True for spark://127.0.0.1:..., spark://localhost:...: the driver can bind to 127.0.0.1 too."""
    return bool(re.match(r"spark://(127\.0\.0\.1|localhost)(:\d+)?$", master))


def _state_file() -> Path:
    return home() / "cluster.json"


def _read_state() -> dict:
    try:
        return json.loads(_state_file().read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _is_ours(pid: int | None, role: str) -> bool:
    import psutil

    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        cmdline = proc.cmdline()
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    # spark-class (a bash script) execs the JVM, whose command line carries the marker
    launching = str(spark_home() / "bin" / "spark-class") in cmdline
    return ROLES[role] in cmdline and (launching or f"-Dstreamlab.cluster={home()}" in cmdline)


def master_json(ui_url: str) -> dict | None:
    """The master's ``/json/`` (workers, activeapps, completedapps), or None if it does not answer."""
    try:
        return get_json(f"{ui_url}/json/")
    except (OSError, ValueError):
        return None


def _processes(state: dict) -> list[tuple[str, int | None, str]]:
    """(role, pid, log) of every process in ``state``: the master first."""
    master = [("master", state.get("master_pid"), str(home() / "master.log"))]
    pids = state.get("worker_pids", [])
    workers = [("worker", pid, str(home() / f"worker-{i}.log")) for i, pid in enumerate(pids, 1)]
    return master + workers


def worker_pids() -> list[int]:
    """The process ids of the running cluster's workers (started by ``start``)."""
    return [pid for role, pid, _ in _processes(_read_state()) if role == "worker" and _is_ours(pid, role)]


def status() -> ClusterStatus:
    """Is the course's cluster running? Says what runs: workers, cores, applications."""
    state = _read_state()
    if not state.get("master_pid"):
        return ClusterStatus(False, "not running (`streamlab cluster start` starts it)")
    url, ui = f"spark://{HOST}:{state['port']}", f"http://{HOST}:{state['ui_port']}"
    dead = [(role, log) for role, pid, log in _processes(state) if not _is_ours(pid, role)]
    if dead:
        logs = ", ".join(log for _, log in dead)
        return ClusterStatus(False, f"not running: {len(dead)} of its processes exited (see {logs}); "
                                    "`streamlab cluster start` starts it again", url, ui)
    info = master_json(ui) or {}
    if info.get("status") != "ALIVE":
        return ClusterStatus(False, f"starting: the master at {ui} does not answer yet", url, ui, info)
    return ClusterStatus(True, describe(url, ui, info), url, ui, info)


def describe(url: str, ui: str, info: dict) -> str:
    lines = [f"Spark master {url}, web UI {ui}"]
    for worker in info.get("workers", []):
        lines.append(f"  worker {worker['id']} {worker['state']}: {worker['coresused']}/{worker['cores']} cores, "
                     f"{worker['memoryused']}/{worker['memory']} MiB in use, web UI {worker['webuiaddress']}")
    for kind, key in (("running", "activeapps"), ("finished", "completedapps")):
        apps = info.get(key, [])
        names = ", ".join(f"{a['id']} ({a['name']}, {a['state']})" for a in apps[-5:])
        lines.append(f"  {len(apps)} {kind} application(s)" + (f": {names}" if apps else ""))
    return "\n".join(lines)


def _port_user(port: int) -> str:
    """'pid 123 (java)' for the process listening on ``port``, if this user may see it."""
    import psutil

    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return f"pid {conn.pid} ({psutil.Process(conn.pid).name()})"
    except (psutil.Error, OSError):
        pass
    return "another program"


def _check_ports(ports: dict[str, int]) -> None:
    for what, port in ports.items():
        if not port_is_free(port, HOST):
            raise ClusterError(
                f"Port {port} ({what}) is taken by {_port_user(port)}. Stop that program, or start the cluster "
                f"on other ports, e.g. `streamlab cluster start --port {ports['the master'] + 1} "
                f"--ui-port {ports['the master web UI'] + 10}` (then SPARK_MASTER=spark://{HOST}:"
                f"{ports['the master'] + 1}).")


def _launch(role: str, args: list[str], daemon_memory: str, log: Path) -> subprocess.Popen:
    env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP=HOST, SPARK_DAEMON_MEMORY=daemon_memory,
               # the marker stop() recognises its processes by, the role's start-up archive, and the light JVM's
               # compiler and collector (the master and the worker only pass messages)
               SPARK_DAEMON_JAVA_OPTS=" ".join([f"-Dstreamlab.cluster={home()}", QUICK_JIT, SMALL_HEAP_GC,
                                                *jvm_options(f"spark-{role}")]),
               # the worker removes the work dirs of applications that finished a day ago
               SPARK_WORKER_OPTS="-Dspark.worker.cleanup.enabled=true -Dspark.worker.cleanup.appDataTtl=86400")
    env.pop("SPARK_CONF_DIR", None)
    with open(log, "ab") as out:
        proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), ROLES[role], *args], env=env,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=home())
    return proc


def start(port: int | None = None, ui_port: int | None = None, *, quiet: bool = False) -> ClusterStatus:
    """Start the master and worker(s) (or return the running cluster) and wait until the workers
    have registered. A port that is taken raises ``ClusterError`` saying which and what to do."""
    current = status()
    if current.running:
        return current
    stop(quiet=True)  # whatever is left of a cluster that partly exited
    require_java()
    port = port or CLUSTER_SETTINGS["master_port"]
    ui_port = ui_port or CLUSTER_SETTINGS["master_ui_port"]
    first_worker_ui = CLUSTER_SETTINGS["worker_ui_port"] - CLUSTER_SETTINGS["master_ui_port"] + ui_port
    worker_uis = [first_worker_ui + i for i in range(CLUSTER_SETTINGS["workers"])]
    _check_ports({"the master": port, "the master web UI": ui_port,
                  **{f"worker {i}'s web UI": p for i, p in enumerate(worker_uis, 1)}})
    url, ui = f"spark://{HOST}:{port}", f"http://{HOST}:{ui_port}"
    state = {"port": port, "ui_port": ui_port, "worker_pids": [], "started": time.time()}
    if not quiet:
        print(f"Starting a Spark master and {len(worker_uis)} worker(s) (logs: {home()}) ...", flush=True)
    launched = []  # (role, process, log): while starting, poll() says whether one exited
    try:
        log, args = home() / "master.log", ["--host", HOST, "--port", str(port), "--webui-port", str(ui_port)]
        launched.append(("master", _launch("master", args, CLUSTER_SETTINGS["master_daemon_memory"], log), log))
        state["master_pid"] = launched[0][1].pid
        _state_file().write_text(json.dumps(state))
        _wait(launched, ui, lambda info: info.get("status") == "ALIVE", "the master to answer")
        for i, worker_ui in enumerate(worker_uis, 1):
            args = ["--host", HOST, "--webui-port", str(worker_ui), "--cores", str(CLUSTER_SETTINGS["worker_cores"]),
                    "--memory", CLUSTER_SETTINGS["worker_memory"], "--work-dir", str(home() / "work"), url]
            log = home() / f"worker-{i}.log"
            launched.append(("worker", _launch("worker", args, CLUSTER_SETTINGS["worker_daemon_memory"], log), log))
            state["worker_pids"].append(launched[-1][1].pid)
            _state_file().write_text(json.dumps(state))
        _wait(launched, ui, lambda info: info.get("aliveworkers", 0) >= len(worker_uis), "the workers to register")
    except BaseException:
        for _, proc, _ in reversed(launched):  # by handle: a JVM still starting may not carry its marker yet
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
        stop(quiet=True)
        raise
    return status()


def _wait(launched: list, ui: str, ready, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        for role, proc, log in launched:
            if proc.poll() is not None:
                raise ClusterError(f"The Spark {role} exited during start-up. Last lines of {log}:\n{_tail(log)}")
        info = master_json(ui)
        if info is not None and ready(info):
            return
        time.sleep(0.5)
    raise ClusterError(f"Timed out after {START_TIMEOUT_S}s waiting for {what}; logs in {home()}.")


def _tail(path: Path, lines: int = 15) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(empty)"


def stop(*, quiet: bool = False) -> bool:
    """Stop the workers (their executors with them), then the master. True if any was running."""
    import psutil

    state = _read_state()
    procs = [(role, pid) for role, pid, _ in reversed(_processes(state)) if _is_ours(pid, role)]
    for role, pid in procs:
        try:
            children = psutil.Process(pid).children(recursive=True)  # a worker's executors
        except psutil.Error:
            children = []
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline and _is_ours(pid, role):
            time.sleep(0.2)
        if _is_ours(pid, role):
            os.kill(pid, signal.SIGKILL)
        for child in children:
            try:
                child.kill()  # the worker stops its executors; this is for one that did not
            except psutil.Error:
                pass
        if not quiet:
            print(f"Stopped the Spark {role} (pid {pid}).")
    if state:
        state.update(master_pid=None, worker_pids=[])
        _state_file().write_text(json.dumps(state))
    return bool(procs)
