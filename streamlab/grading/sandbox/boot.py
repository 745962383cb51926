"""The two steps of a sandboxed kernel's start, with Python's standard library only.

Run by path with ``python -I -S`` (no site-packages, no user files), so nothing a submission could
have touched is imported, and so it starts in milliseconds:

    boot.py launch SPEC -- KERNEL...   outside: join the control groups, become bubblewrap
    boot.py inside SPEC -- KERNEL...   inside (bubblewrap runs this): open the Kafka door on
                                               loopback, drop to the sandbox's user, set the limits,
                                               become the kernel with the spec's environment

SPEC is the JSON file ``sandbox.Sandbox`` writes (outside the sandbox; never bound into it).
"""
from __future__ import annotations

import ctypes
import json
import os
import socket
import sys
import threading

# names a kernel takes from the process that launches it: nbgrader sets them for the notebook's kernel
PASSTHROUGH = ("NBGRADER_EXECUTION", "NBGRADER_VALIDATING")


def pump(source: socket.socket, target: socket.socket) -> None:
    """Copy ``source`` to ``target`` until ``source`` ends; then close both directions."""
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        close_both(source, target)


def close_both(*sockets: socket.socket) -> None:
    """Shut down and close each socket (both directions: the other end sees the connection end)."""
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            sock.close()
        except OSError:
            pass


def join(a: socket.socket, b: socket.socket) -> None:
    """Join two connected sockets, both ways, in two threads."""
    for source, target in ((a, b), (b, a)):
        threading.Thread(target=pump, args=(source, target), daemon=True).start()


def listening(port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:``port``, inside the sandbox."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(64)
    return server


def serve_loopback(server: socket.socket, door: str) -> None:
    """Accept on ``server`` and join each connection to the socket file ``door``."""
    while True:
        inner, _ = server.accept()
        outer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            outer.connect(door)
        except OSError:
            inner.close()
            outer.close()
            continue
        join(inner, outer)


def launch(spec: dict, command: list[str]) -> None:
    for procs in spec["cgroup_procs"]:
        try:
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        except OSError:
            pass
    # bubblewrap clears the environment (--clearenv): what nbgrader set for this kernel is set again inside
    passed = [arg for name in PASSTHROUGH if name in os.environ for arg in ("--setenv", name, os.environ[name])]
    *options, end = spec["bwrap"]  # its options, then "--"
    args = [*options, *passed, end, sys.executable, "-I", "-S", os.path.abspath(__file__), "inside", spec["path"],
            "--", *command]
    os.execv(args[0], args)


def _no_new_privileges() -> None:
    if ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def inside(spec: dict, command: list[str]) -> None:
    import resource

    uid = spec["uid"]
    if os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    _no_new_privileges()
    limits = spec["limits"]
    for name, value in (("RLIMIT_CPU", 2 * limits["cpu_seconds"]), ("RLIMIT_NPROC", limits["processes"] + 64),
                        ("RLIMIT_FSIZE", limits["disk_mb"] * 1024 * 1024), ("RLIMIT_CORE", 0)):
        resource.setrlimit(getattr(resource, name), (value, value))
    for folder in spec["make_dirs"]:
        os.makedirs(folder, exist_ok=True)
    ready, told = os.pipe()
    if os.fork() == 0:  # the loopback end of the Kafka door, one thread per port; it dies with the sandbox
        try:
            os.close(ready)
            os.setsid()
            servers = [listening(port) for port in spec["broker_ports"]]
            os.close(told)  # every port listens: the command may connect from its first instruction on
            for server in servers[1:]:
                threading.Thread(target=serve_loopback, args=(server, spec["door"]), daemon=True).start()
            if servers:
                serve_loopback(servers[0], spec["door"])
        finally:
            os._exit(0)
    os.close(told)
    os.read(ready, 1)  # returns when the door's process closed its end: listening, or dead (then no door)
    os.close(ready)
    env = dict(spec["env"])
    env.update({name: os.environ[name] for name in PASSTHROUGH if name in os.environ})
    os.chdir(spec["work"])
    os.execve(command[0], command, env)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] not in ("launch", "inside") or argv[2] != "--":
        print("usage: boot.py launch|inside SPEC -- COMMAND...", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        spec = json.load(f)
    (launch if argv[0] == "launch" else inside)(spec, argv[3:])
    return 1  # not reached: both replace this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
