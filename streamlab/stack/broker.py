"""The native Kafka broker: one real Apache Kafka 4.x node in KRaft mode, no Docker needed.

``start()`` resolves the broker's jars (once), formats its storage (once), launches it bound to
127.0.0.1 (on another port if 9092 is taken), and waits until it accepts clients.
``status()`` tells whether it runs; ``stop()`` shuts it down cleanly. Topics survive a restart.
Everything lives in ``data_dir()/kafka``: ``server.properties``, ``data/``, ``broker.log``.

Its settings a learner can notice (topic auto-creation, default partitions, retention, ...) are
``kafka_settings.BROKER_SETTINGS``, the same as in the Docker stack and the tests' Kafka container.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from . import jars
from .java import QUICK_JIT, require_java
from .jvm_archives import jvm_options
from .kafka_settings import BROKER_SETTINGS, KAFKA_VERSION, SANDBOX_LISTENER, differences, read_properties
from .paths import PACKAGE_DIR, data_dir

DEFAULT_PORT = 9092
HEAP = os.environ.get("STREAMLAB_KAFKA_HEAP", "512m")
START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 30

class BrokerError(RuntimeError):
    """The broker could not be started; the message says why and where its log is."""


@dataclass
class BrokerStatus:
    running: bool
    pid: int | None = None
    port: int | None = None
    detail: str = ""

    @property
    def bootstrap_servers(self) -> str | None:
        return f"127.0.0.1:{self.port}" if self.port else None


def home() -> Path:
    path = data_dir() / "kafka"
    path.mkdir(parents=True, exist_ok=True)
    return path


def log_file() -> Path:
    return home() / "broker.log"


def _state_file() -> Path:
    return home() / "broker.json"


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _free_port(preferred: int, avoid: set[int] = frozenset()) -> int:
    for port in [preferred, *range(preferred + 1, preferred + 20)]:
        if port not in avoid and port_is_free(port):
            return port
    with socket.socket() as s:  # let the OS choose
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _is_our_broker(pid: int | None) -> bool:
    import psutil

    if not pid:
        return False
    try:
        cmdline = psutil.Process(pid).cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    return "kafka.Kafka" in cmdline and str(home() / "server.properties") in cmdline


_STRAYS_RUN = ("a broker of this folder still runs (pid {pids}) that broker.json does not name (was {home} deleted "
               "while it ran?): `streamlab kafka stop` stops it; `streamlab kafka start` too, if its folder is gone")


def _strays() -> list[int]:
    """Brokers started from this folder that its broker.json does not name: the folder was deleted (or
    broker.json overwritten) while they ran. Each still holds a port and its heap, and no command found it."""
    import psutil

    named = (_read_state() or {}).get("pid")
    props = str(home() / "server.properties")
    return [proc.info["pid"] for proc in psutil.process_iter(["pid", "cmdline"])
            if proc.info["pid"] != named and "kafka.Kafka" in (proc.info["cmdline"] or ())
            and props in proc.info["cmdline"]]


def _folder_gone(pid: int) -> bool:
    """Whether the broker ``pid`` was started in a folder that is no longer this one (deleted, or moved): it runs in
    the folder it was started in (``cwd=home()``), and a folder made again at the same path is another inode. A
    broker started a moment ago by another process, which has not written broker.json yet, is in this one."""
    import psutil

    try:
        theirs, ours = os.stat(f"/proc/{pid}/cwd"), os.stat(home())
    except OSError:  # no /proc (macOS): by the path, which a deleted folder may keep
        try:
            return psutil.Process(pid).cwd() != str(home())
        except psutil.Error:
            return False
    return (theirs.st_dev, theirs.st_ino) != (ours.st_dev, ours.st_ino)


def _accepts_connections(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _read_state() -> dict | None:
    """What broker.json says about the last start (pid, ports), or None if it was never started."""
    try:
        return json.loads(_state_file().read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def saved_state() -> dict:
    """What broker.json says about the last start: pid, port, controller_port, sandbox_port ({} if none)."""
    return _read_state() or {}


def status() -> BrokerStatus:
    """Is the course's native broker running? Says so, and says when it died."""
    state = _read_state()
    pid, port = (state or {}).get("pid"), (state or {}).get("port")
    alive = _is_our_broker(pid)
    if not alive and (strays := _strays()):
        return BrokerStatus(False, None, port, _STRAYS_RUN.format(pids=", ".join(map(str, strays)), home=home()))
    if state is None:
        return BrokerStatus(False, detail="not started")
    if state.get("stopped"):
        return BrokerStatus(False, None, port, "stopped (`streamlab kafka start` starts it again)")
    if not alive:
        return BrokerStatus(False, pid, port,
                            f"not running: the broker (pid {pid}) has exited; see {log_file()} "
                            "(`streamlab kafka start` starts it again, keeping its topics)")
    if not _accepts_connections(port):
        return BrokerStatus(True, pid, port, "starting (process up, port not yet accepting)")
    note = " with older settings: `streamlab kafka start` restarts it" if stale_settings() else ""
    return BrokerStatus(True, pid, port, f"running on 127.0.0.1:{port} (pid {pid}){note}")


@dataclass(frozen=True)
class Network:
    """Where a broker listens and what it tells its clients: the only settings that depend on where it
    runs. Everything else is ``BROKER_SETTINGS``, the same for the native broker and the Docker stack."""
    listeners: str  # e.g. PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:10092,SANDBOX://127.0.0.1:9094
    advertised: str  # what clients are told to connect to (every listener but CONTROLLER)
    protocols: str  # listener name -> security protocol
    inter_broker: str  # the listener this broker talks to itself on
    voters: str  # controller.quorum.voters: 1@host:port of the CONTROLLER listener

    @classmethod
    def native(cls, port: int, controller_port: int, sandbox_port: int) -> Network:
        """The native broker's: every listener on 127.0.0.1."""
        return cls(
            listeners=f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port},"
                      f"{SANDBOX_LISTENER}://127.0.0.1:{sandbox_port}",
            advertised=f"PLAINTEXT://127.0.0.1:{port},{SANDBOX_LISTENER}://127.0.0.1:{sandbox_port}",
            protocols=f"PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,{SANDBOX_LISTENER}:SASL_PLAINTEXT",
            inter_broker="PLAINTEXT", voters=f"1@127.0.0.1:{controller_port}")


NETWORK_VARIABLES = {  # a container's network, from its environment (docker/compose.yaml, tests/conftest.py)
    "listeners": "STREAMLAB_KAFKA_LISTENERS", "advertised": "STREAMLAB_KAFKA_ADVERTISED_LISTENERS",
    "protocols": "STREAMLAB_KAFKA_PROTOCOLS", "inter_broker": "STREAMLAB_KAFKA_INTER_BROKER_LISTENER",
    "voters": "STREAMLAB_KAFKA_VOTERS",
}


def server_properties(network: Network, log_dirs: Path) -> str:
    """The broker's server.properties: a single KRaft node (broker and controller in one process) on
    ``network``, with ``BROKER_SETTINGS``."""
    settings = "".join(f"{key}={value}\n" for key, value in BROKER_SETTINGS.items())
    return f"""# Written by streamlab: a single-node KRaft broker for the course (broker + controller).
# The settings after log.dirs are streamlab.stack.kafka_settings.BROKER_SETTINGS, the same in the Docker stack.
process.roles=broker,controller
node.id=1
controller.quorum.voters={network.voters}
listeners={network.listeners}
advertised.listeners={network.advertised}
controller.listener.names=CONTROLLER
listener.security.protocol.map={network.protocols}
inter.broker.listener.name={network.inter_broker}
log.dirs={log_dirs}
{settings}"""


def _write_config(network: Network) -> Path:
    props = home() / "server.properties"
    props.write_text(server_properties(network, home() / "data"))
    return props


def _command(java: str, props: Path) -> list[str]:
    """The broker's JVM: the quick JIT only (a course broker's loads are small, and it starts about a
    second sooner), from its class-data-sharing archive (streamlab.stack.jvm_archives), or making it."""
    return [java, f"-Xmx{HEAP}", f"-Xms{HEAP}", "-XX:+UseG1GC", QUICK_JIT, "-Djava.awt.headless=true",
            *jvm_options("kafka-broker", java=java),
            f"-Dlog4j2.configurationFile={PACKAGE_DIR / 'conf' / 'kafka-broker-log4j2.yaml'}",
            f"-Dstreamlab.broker.log={log_file()}",
            "-cp", classpath(), "kafka.Kafka", str(props)]


def serve() -> None:
    """Run the broker in the foreground, in place of this process: the Docker stack's and the tests'
    Kafka container (the course image's ``kafka`` role, docker/entrypoint.sh). Its network comes from
    ``NETWORK_VARIABLES``; every other setting is the native broker's. The jars are the image's own."""
    missing = [v for v in NETWORK_VARIABLES.values() if not os.environ.get(v)]
    if missing:
        raise BrokerError(f"the broker's network is not given: set {', '.join(missing)}")
    network = Network(**{field: os.environ[v] for field, v in NETWORK_VARIABLES.items()})
    java = require_java()
    props = _write_config(network)
    _format_storage(java, props)
    command = _command(java, props)
    print(f"Kafka {KAFKA_VERSION}, the course's broker: {network.advertised} (data in {home() / 'data'})", flush=True)
    os.chdir(home())
    os.execv(java, command)


def classpath(*sets: str) -> str:
    """The Java classpath of the broker's jars (fetched the first time), plus those of ``sets``."""
    found = jars.fetch_all(["kafka", *sets])
    return os.pathsep.join(str(j) for jar_set in found.values() for j in jar_set)


def ping(servers: str, timeout_s: float = 10) -> tuple[bool, str]:
    """(True, 'Kafka answers; N topics') if a client can talk to the Kafka at ``servers``."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    try:
        admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=int(timeout_s * 1000),
                                 api_version_auto_timeout_ms=int(timeout_s * 1000))
    except (KafkaError, OSError, ValueError) as err:
        return False, f"unreachable ({type(err).__name__})"
    try:
        topics = admin.list_topics()
    except (KafkaError, OSError) as err:
        return False, f"connected but not answering ({type(err).__name__})"
    finally:
        admin.close()
    return True, f"Kafka answers; {len(topics)} topics"


def stale_settings() -> dict[str, tuple[str | None, str]]:
    """How the settings the broker was last started with differ from ``BROKER_SETTINGS``."""
    props = home() / "server.properties"
    return differences(read_properties(props)) if props.exists() else {}


def _format_storage(java: str, props: Path) -> None:
    if (home() / "data" / "meta.properties").exists():
        return
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    cp = classpath()  # the broker's archive, if there is one: formatting is not what it is made from
    proc = subprocess.run(
        [java, QUICK_JIT, *jvm_options("kafka-broker", java=java, make=False),
         "-cp", cp, "kafka.tools.StorageTool", "format",
         f"--cluster-id={cluster_id}",
         "-c", str(props), "--ignore-formatted"],
        capture_output=True, text=True, timeout=120,
    )
    if proc.returncode != 0:
        raise BrokerError("Formatting the broker's storage failed:\n" + proc.stdout + proc.stderr)


def start(port: int | None = None, *, quiet: bool = False, wait: bool = True) -> BrokerStatus:
    """Start the native broker (or return the running one) and wait until it accepts clients.

    It listens on ``port`` (default: the port of its previous run, else 9092), or on the next free
    port if that one is taken by another program. A running broker started with other settings than
    ``BROKER_SETTINGS`` (an older version of the course) is restarted with them; topics are kept.
    ``wait=False`` returns as soon as the process is launched (its address is known then): call
    ``wait_ready()`` before using it.
    """
    current = status()
    if current.running:
        stale = stale_settings()
        if not stale:
            return wait_ready(pid=current.pid, port=current.port)
        if not quiet:
            changes = ", ".join(f"{key}={old} -> {new}" for key, (old, new) in stale.items())
            print(f"The broker runs with older settings ({changes}); restarting it (its topics are kept).")
        stop(quiet=True)
    for pid in filter(_folder_gone, _strays()):  # it holds the port this one would take
        _end(pid)
        if not quiet:
            print(f"A broker of the course's was still running (pid {pid}) though its folder {home()} had been "
                  "deleted; stopped it.")
    java = require_java()
    previous = _read_state() or {}
    port = port or previous.get("port") or DEFAULT_PORT
    chosen = _free_port(port)
    controller = _free_port(previous.get("controller_port") or chosen + 1000, avoid={chosen})
    if chosen != port and not quiet:
        print(f"Port {port} is taken by another program; the course's broker uses {chosen} instead.")
    sandbox = _free_port(previous.get("sandbox_port") or chosen + 2, avoid={chosen, controller})
    props = _write_config(Network.native(chosen, controller, sandbox))
    _format_storage(java, props)
    cmd = _command(java, props)
    with open(home() / "broker.out", "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=home())
    _state_file().write_text(json.dumps({"pid": proc.pid, "port": chosen, "controller_port": controller,
                                         "sandbox_port": sandbox,
                                         "started": time.time()}))
    if not quiet:
        print(f"Starting Kafka {KAFKA_VERSION} on 127.0.0.1:{chosen} (log: {log_file()}) ...", flush=True)
    _launched[proc.pid] = proc
    return wait_ready() if wait else BrokerStatus(True, proc.pid, chosen, "starting")


_launched: dict[int, subprocess.Popen] = {}  # brokers started by this process, by pid


def wait_ready(timeout: float = START_TIMEOUT_S, *, pid: int | None = None, port: int | None = None,
               proc: subprocess.Popen | None = None) -> BrokerStatus:
    """Wait until the broker (say, one started with ``start(wait=False)``) accepts clients. A broker
    started by this process is asked whether it exited (``proc``): exact, where its command line is
    not (for a moment after the fork it is still Python's)."""
    if pid is None:
        state = _read_state() or {}
        if not state.get("pid") or state.get("stopped"):
            raise BrokerError("The broker is not started: `streamlab kafka start` starts it.")
        pid, port = state["pid"], state["port"]
    proc = proc or _launched.get(pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        exited = proc.poll() is not None if proc is not None else not _is_our_broker(pid)
        if exited:
            code = f" (exit status {proc.returncode})" if proc is not None else ""
            raise BrokerError(f"The broker exited during start-up{code}. Last lines of {log_file()}:\n"
                              f"{_log_tail()}")
        if _accepts_connections(port):
            ok, _ = ping(f"127.0.0.1:{port}", timeout_s=5)
            if ok:
                return status()
        time.sleep(0.5)
    raise BrokerError(f"The broker did not accept clients within {timeout:.0f}s. "
                      f"Last lines of {log_file()}:\n{_log_tail()}")


def _log_tail(lines: int = 20) -> str:
    texts = []
    for path in (log_file(), home() / "broker.out"):
        if path.exists():
            texts.extend(path.read_text(errors="replace").splitlines()[-lines:])
    return "\n".join(texts[-lines:]) or "(empty)"


def stop(*, quiet: bool = False) -> bool:
    """Stop the native broker cleanly (SIGTERM, then SIGKILL after 30 s), and any broker of this folder that
    broker.json no longer names (``_strays``). True if one was running."""
    named = (_read_state() or {}).get("pid")  # not status(): it would look for the strays a second time
    ended = [pid for pid in [named, *_strays()] if _is_our_broker(pid)]
    for pid in ended:
        _end(pid)
    _mark_stopped()
    if ended and not quiet:
        print(f"Stopped the broker (pid {', '.join(map(str, ended))}).")
    return bool(ended)


def _end(pid: int) -> None:
    """SIGTERM, then SIGKILL if the broker is still there after ``STOP_TIMEOUT_S``; returns once it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline and _is_our_broker(pid):
        time.sleep(0.2)
    if _is_our_broker(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _is_our_broker(pid):
            time.sleep(0.1)


def _mark_stopped() -> None:
    """Forget the process but remember the ports, so the next start keeps the same address."""
    state = _read_state()
    if state is None:
        return
    state.update(pid=None, stopped=True)
    _state_file().write_text(json.dumps(state))


def reset(*, quiet: bool = False) -> None:
    """Stop the broker and delete all its topics (the next start formats fresh storage)."""
    stop(quiet=quiet)
    shutil.rmtree(home() / "data", ignore_errors=True)
    if not quiet:
        print("Deleted the broker's data: all topics are gone.")
