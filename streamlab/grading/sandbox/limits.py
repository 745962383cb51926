"""A sandbox's limits: what one submission may use (``Limits``), and how this machine enforces them: control
groups for memory, processes and CPU time (cgroup v1, when the grader may write them), and a size-limited tmpfs
for the work folder's bytes and files (root only). ``enforced_limits`` says which of them hold here."""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .. import bounds

CONTROLLERS = ("memory", "pids", "cpuacct")  # the cgroup v1 controllers a sandbox gets a group in


@dataclass
class Limits:
    """What one submission may use. Defaults fit every lab's reference solution with room to spare
    (each result records what its submission used: ``usage`` in ``OUT/results/<student>.json``)."""
    memory_mb: int = bounds.SUBMISSION_MEMORY_MB
    processes: int = bounds.SUBMISSION_PROCESSES
    cpu_seconds: int = bounds.SUBMISSION_CPU_SECONDS  # measured on the control group while it runs; each process is
                                                      # also stopped by the kernel at twice this (a backstop)
    disk_mb: int = bounds.SUBMISSION_DISK_MB

    def describe(self) -> str:
        return (f"memory {self.memory_mb} MB, {self.processes} processes/threads, "
                f"CPU {self.cpu_seconds} s, disk {self.disk_mb} MB")


# -- control groups

def _own_cgroup_dir(controller: str) -> Path | None:
    """This process's cgroup v1 folder for ``controller``, if this machine has one we may write."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            folder = Path("/sys/fs/cgroup") / controller / path.lstrip("/")
            if folder.is_dir() and os.access(folder, os.W_OK):
                return folder
    return None


class ControlGroupsRefused(RuntimeError):
    """A control group this machine offers could not be made: the sandbox is not made, rather than run without it
    (before, it ran silently without that group's limit)."""


def _make_group(folder: Path, controller: str, limits: Limits) -> None:
    """Make the group ``folder`` of ``controller`` with its limit. A group of the same name left empty by a killed
    run is made anew; one that still holds a process cannot be removed, and its ``OSError`` (EBUSY) refuses it."""
    if folder.is_dir():
        folder.rmdir()  # EBUSY while it holds a process: refused below, as OSError
    try:
        folder.mkdir()
        if controller == "memory":
            (folder / "memory.limit_in_bytes").write_text(str(limits.memory_mb * 1024 * 1024))
            swap = folder / "memory.memsw.limit_in_bytes"
            if swap.exists():
                swap.write_text(str(limits.memory_mb * 1024 * 1024))
        elif controller == "pids":
            (folder / "pids.max").write_text(str(limits.processes))
    except OSError:
        try:
            folder.rmdir()
        except OSError:
            pass
        raise


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
                _make_group(folder, controller, limits)
            except OSError as error:
                self.remove()
                raise ControlGroupsRefused(
                    f"the sandbox's {controller} control group {folder} could not be made ({error}); a submission "
                    f"is never run without its limits, so it is not graded now (a grader error: grade again)"
                ) from error
            self.dirs[controller] = folder

    def join(self, pid: int) -> None:
        """Put the process ``pid`` into these groups (its children start in them)."""
        for folder in self.dirs.values():
            try:
                (folder / "cgroup.procs").write_text(str(pid))
            except OSError:
                pass

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
    found = {"disk"} if is_root() else set()
    if is_root():
        found |= {name for name, controller in zip(("memory", "processes", "CPU time"), CONTROLLERS)
                  if _own_cgroup_dir(controller) is not None}
    return found


def cgroup_name(work: Path) -> str:
    """The control groups' name for the sandbox whose work folder is ``work``: its name and a hash of its whole path,
    so that two sandboxes whose folders have the same name (two graders' ``worker1-1``, two tests' ``work``) never
    meet in one group, where the second found the name taken and ran without those groups' limits."""
    where = hashlib.sha256(str(Path(work).absolute()).encode()).hexdigest()[:10]
    return f"streamlab-{Path(work).name[:80]}-{where}"


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


# -- the work folder

def is_root() -> bool:
    return os.geteuid() == 0




def mount_limited(folder: Path, size_mb: int, uid: int) -> bool:
    """Make ``folder`` a tmpfs of ``size_mb`` (and ``bounds.FILES_PER_MB`` files a MB) owned by ``uid`` (root only);
    False where that cannot be done. The file count bounds what the grader walks through afterwards."""
    if not is_root():
        return False
    options = f"size={size_mb}m,nr_inodes={size_mb * bounds.FILES_PER_MB},mode=0700,uid={uid},gid={uid},nosuid,nodev"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options,
                           "streamlab-sandbox", str(folder)], capture_output=True)
    return done.returncode == 0


def unmount(folder: Path) -> None:
    if os.path.ismount(folder):
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
