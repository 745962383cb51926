"""The grading sandbox, from inside: what a submission's code can see, reach and use (no Spark; fast).

Each test runs a small program in a real sandbox (``Sandbox.command``), the way the kernelspec runs a
student's kernel, against a "broker" that is a listener of the test's own, and asserts what the
program could and could not do. Needs Linux namespaces (bubblewrap, installed by ``make setup``).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from intruders import Listener

from streamlab.grading.sandbox import box as sb
from streamlab.grading.sandbox.isolation import submission_topic_prefix
from streamlab.grading.sandbox.limits import ControlGroups, ControlGroupsRefused, Limits, cgroup_name

ROOT = Path(__file__).resolve().parents[3]
WHY_NOT = sb.unavailable_reason()
needs_sandbox = pytest.mark.skipif(WHY_NOT is not None, reason=f"no sandbox here: {WHY_NOT}")
needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="limits and a user of its own need root (the grader's CI runs as root)")


@pytest.fixture
def broker():
    listener = Listener(b"broker says hi\n")
    yield listener
    listener.close()


def make_box(tmp_path: Path, broker: Listener, limits: Limits | None = None) -> sb.Sandbox:
    work = tmp_path / "work"
    env = {"STREAMLAB_DATA_DIR": str(work / "data"), "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{broker.port}",
           "STREAMLAB_TOPIC_PREFIX": "t-"}
    return sb.Sandbox(env, limits)


def run_inside(box: sb.Sandbox, code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(box.command(sys.executable, "-c", textwrap.dedent(code)), capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "GRADER_SECRET": "canary-4711"})


@pytest.fixture
def box(tmp_path, broker):
    made = make_box(tmp_path, broker)
    yield made
    made.close()
    made.remove_work()


pytestmark = needs_sandbox


def test_identity_and_environment_are_the_sandboxes_own(box):
    done = run_inside(box, """
        import json, os
        print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "env": dict(os.environ), "cwd": os.getcwd()}))
    """)
    assert done.returncode == 0, done.stderr
    seen = __import__("json").loads(done.stdout)
    assert seen["uid"] not in (0, os.getuid()) or os.geteuid() != 0
    assert "GRADER_SECRET" not in seen["env"] and "canary-4711" not in done.stdout
    extra = set(seen["env"]) - set(box.spec["env"])
    assert extra <= {"PWD"}, extra
    assert seen["env"]["HOME"].startswith(str(box.work)) and seen["env"]["IPYTHONDIR"].startswith(str(box.work))
    assert seen["cwd"] == str(box.work)


def test_what_nbgrader_sets_for_the_kernel_reaches_it_inside(box):
    """nbgrader marks the kernels it grades with NBGRADER_EXECUTION=autograde (the labs skip their optional demos
    then); bubblewrap clears the environment, so the sandbox passes that one on, and nothing else of the grader's."""
    seen = "import os; print(os.environ.get('NBGRADER_EXECUTION'), os.environ.get('GRADER_SECRET'))"
    done = subprocess.run(box.command(sys.executable, "-c", seen), capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NBGRADER_EXECUTION": "autograde", "GRADER_SECRET": "canary-4711"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["autograde", "None"]
    assert "NBGRADER_EXECUTION" not in box.spec["env"]


def test_the_answer_key_the_repository_and_the_grader_are_absent(box, tmp_path):
    secret_out = tmp_path / "grading-output"
    secret_out.mkdir()
    (secret_out / "gradebook.db").write_text("secret")
    done = run_inside(box, f"""
        import os
        for path in [{str(ROOT / 'solutions')!r}, {str(ROOT / '.git')!r}, {str(ROOT / 'nbgrader_config.py')!r},
                     {str(ROOT / 'tests')!r}, {str(secret_out)!r}]:
            print(path, os.path.exists(path))
        print("visible", sorted(os.listdir({str(ROOT)!r})))
        print("home", sorted(os.listdir("/root")) if os.path.isdir("/root") else [])
    """)
    assert done.returncode == 0, done.stderr
    absent = [line for line in done.stdout.splitlines() if line.startswith("/")]
    assert len(absent) == 5 and all(line.endswith(" False") for line in absent), done.stdout
    visible = eval(done.stdout.split("visible ", 1)[1].splitlines()[0])
    # the package, and where the venv and the jar cache happen to live (read-only); nothing else
    assert set(visible) <= {"streamlab", ".venv", ".cache"} and "streamlab" in visible, visible
    home = eval(done.stdout.split("home ", 1)[1].splitlines()[0])
    assert all(str(Path("/root") / name) in sys.base_prefix for name in home), home  # at most Python's own folder


def test_only_the_work_folder_and_tmp_are_writable(box):
    done = run_inside(box, f"""
        import os, sys
        targets = [{str(ROOT / 'streamlab' / 'x.py')!r}, os.path.join(sys.prefix, "lib", "evil.pth"),
                   os.path.join(os.environ["STREAMLAB_CACHE_DIR"], "evil.jar"), "/etc/evil", "/usr/evil",
                   os.path.join(os.environ["STREAMLAB_CACHE_DIR"], "archives", "spark-driver-0.jsa")]
        for path in targets:
            try:
                open(path, "w").write("x")
                print("WROTE", path)
            except OSError as err:
                print("refused", path, err.errno)
        open("/tmp/mine", "w").write("ok")
        open(os.path.join(os.environ["STREAMLAB_DATA_DIR"], "mine"), "w").write("ok")
        print("own files ok")
    """)
    assert done.returncode == 0, done.stderr
    assert "WROTE" not in done.stdout and "own files ok" in done.stdout, done.stdout
    assert not (ROOT / "streamlab" / "x.py").exists()


def test_jvms_inside_map_the_courses_start_up_archives_and_make_none(box):
    """The cache is read-only inside: a kernel's JVMs map the archives `make setup` made (a JVM started
    with -Xshare:on refuses to start unless it does), and never try to write one."""
    done = run_inside(box, """
        import os, subprocess
        from streamlab.stack import jars
        from streamlab.stack.java import find_java
        from streamlab.stack.jvm_archives import jvm_options
        classpath = [*jars.jars("kafka"), *jars.jars("tools")]
        options = jvm_options("kafka-tools", classpath)
        print("OPTIONS", options)
        cp = os.pathsep.join(map(str, classpath))
        proc = subprocess.run([find_java(), *options, "-Xshare:on", "-cp", cp, "kafka.tools.StorageTool",
                               "random-uuid"], capture_output=True, text=True)
        print("RC", proc.returncode, proc.stderr)
    """)
    assert done.returncode == 0, done.stderr
    assert "-Xshare:auto" in done.stdout and "ArchiveClassesAtExit" not in done.stdout, done.stdout
    assert "RC 0 \n" in done.stdout, done.stdout


def test_no_network_but_the_broker(box, broker):
    other = Listener(b"you should not see this\n")
    try:
        done = run_inside(box, f"""
            import socket
            for port in ({broker.port}, {other.port}):
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
                        print(port, conn.recv(100).decode().strip() or "connected")
                except OSError as err:
                    print(port, "refused", type(err).__name__)
        """)
    finally:
        other.close()
    assert done.returncode == 0, done.stderr
    assert f"{broker.port} broker says hi" in done.stdout, done.stdout
    assert f"{other.port} refused" in done.stdout and other.accepted == 0, done.stdout


def test_the_graders_processes_are_invisible_and_everything_inside_dies_with_it(box):
    done = run_inside(box, f"""
        import os, subprocess
        pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        print("pids", pids)
        try:
            os.kill({os.getpid()}, 9)
            print("KILLED THE GRADER?")
        except ProcessLookupError:
            print("grader not found")
        subprocess.Popen(["sleep", "1000"], start_new_session=True, env={{}})
    """)
    assert done.returncode == 0, done.stderr
    assert "grader not found" in done.stdout
    assert max(eval(done.stdout.split("pids ", 1)[1].splitlines()[0])) < 20, done.stdout  # its own few processes
    if box.cgroups.dirs:
        box.stop()
        assert box.cgroups.pids() == set()
    left = subprocess.run(["pgrep", "-f", "sleep 1000"], capture_output=True, text=True).stdout.split()
    assert left == [], "the detached sleep outlived its sandbox"


@needs_root
def test_limits_are_enforced_and_named(tmp_path, broker):
    box = make_box(tmp_path, broker, Limits(memory_mb=300, processes=64, cpu_seconds=5, disk_mb=20))
    try:
        if not box.cgroups.dirs.keys() >= {"memory", "pids", "cpuacct"}:
            pytest.skip("this machine's control groups cannot be written: memory, process and CPU limits need them")
        run_inside(box, "import subprocess\n"
                        "[subprocess.Popen(['sleep', '30']) for _ in range(100)]")
        run_inside(box, "chunks = [bytearray(50 * 2**20) for _ in range(12)]")
        run_inside(box, "open('/tmp/big', 'wb').write(b'x' * 30 * 2**20)")
        hits = " ".join(box.limits_hit())
        for name in ("memory (300 MB)", "processes (64", "disk (20 MB)"):
            assert name in hits, hits
    finally:
        box.close()
        box.remove_work()


@needs_root
@pytest.mark.slow
def test_cpu_time_is_watched_on_the_whole_group(tmp_path, broker):
    box = make_box(tmp_path, broker, Limits(cpu_seconds=3))
    try:
        if "cpuacct" not in box.cgroups.dirs:
            pytest.skip("this machine's control groups cannot be written: the CPU limit needs them")
        with box.stopped_at_a_limit(every_s=0.2):  # as the worker watches a submission
            done = run_inside(box, "while True: pass", timeout=120)
        assert done.returncode != 0 and box.limits_hit() == ["CPU time (3 s)"], (done.returncode, box.limits_hit())
    finally:
        box.close()
        box.remove_work()


@needs_root
def test_two_sandboxes_whose_folders_share_a_name_each_get_control_groups_of_their_own(tmp_path, broker):
    """Two graders' ``worker1-1``, two tests' ``work``: the second sandbox once found the groups' name taken and ran
    without them (no memory, process or CPU limit of its own); this test's CPU limit skipped in such a run."""
    first, second = make_box(tmp_path / "a", broker), make_box(tmp_path / "b", broker)
    try:
        assert first.work.name == second.work.name
        assert first.cgroups.dirs and set(second.cgroups.dirs) == set(first.cgroups.dirs), second.cgroups.dirs
        assert not set(first.cgroups.dirs.values()) & set(second.cgroups.dirs.values())
    finally:
        for box in (first, second):
            box.close()
            box.remove_work()


@needs_root
def test_a_group_that_cannot_be_made_refuses_the_sandbox_and_an_empty_leftover_is_made_anew(tmp_path):
    """A sandbox once ran silently without a group it could not make (no memory, process or CPU limit of its own).
    Now: a group of the same name left empty by a killed run is made anew with this sandbox's limits; one that still
    holds a process refuses the sandbox (a grader error, graded again), and leaves no group of its own behind."""
    work = tmp_path / "work"
    leftover = ControlGroups(cgroup_name(work), Limits(memory_mb=100))
    if "memory" not in leftover.dirs:
        leftover.remove()
        pytest.skip("this machine's control groups cannot be written: memory, process and CPU limits need them")
    again = ControlGroups(cgroup_name(work), Limits(memory_mb=300))  # the leftover is empty
    try:
        limit = int((again.dirs["memory"] / "memory.limit_in_bytes").read_text())
        assert limit == 300 * 2**20, limit
        holder = subprocess.Popen(["sleep", "60"])
        try:
            again.join(holder.pid)
            with pytest.raises(ControlGroupsRefused, match="never run without its limits"):
                ControlGroups(cgroup_name(work), Limits())
            assert again.pids() == {holder.pid}, "the refusal touches no group it did not make"
        finally:
            again.kill_all()
            holder.wait(timeout=10)
    finally:
        again.remove()
    assert not any(folder.exists() for folder in again.dirs.values())


def test_a_fresh_sandbox_hits_no_limit(box):
    done = run_inside(box, "print(sum(range(10**6)))")
    assert done.returncode == 0 and box.limits_hit() == [], (done.stderr, box.limits_hit())


def test_what_a_submission_leaves_is_read_without_following_links(tmp_path):
    folder = tmp_path / "work"
    (folder / "data" / "ckpt").mkdir(parents=True)
    (folder / "data" / "ckpt" / "state").write_text("mine")
    (folder / "data" / "ckpt" / "key").symlink_to("/etc/shadow")
    (folder / "data" / "out").symlink_to(ROOT / "solutions", target_is_directory=True)
    os.mkfifo(folder / "data" / "pipe")
    removed = sb.untrusted_folder(folder)
    assert sorted(removed) == ["data/ckpt/key", "data/out", "data/pipe"]
    assert (folder / "data" / "ckpt" / "state").read_text() == "mine"
    assert (ROOT / "solutions").is_dir()


def test_topic_prefixes_never_collide():
    ids = ["Ann", "ann", "a_nn", "a@nn", "a nn", "a-nn"]
    assert len({submission_topic_prefix(f"run-{i}") for i in ids}) == len(ids)
    assert all(set(submission_topic_prefix(f"run-{i}")) <= set("abcdefghijklmnopqrstuvwxyz0123456789.-") for i in ids)


def test_a_path_inside_a_bound_folder_is_not_bound_again():
    """In the course image JAVA_HOME is /usr/lib/jvm/java-17, a symlink inside /usr: binding it again over the
    symlink failed ("Can't bind mount ... No such file or directory") and every graded kernel died in the
    grader container. A folder already bound shows what is inside it; each path is bound once."""
    from streamlab.grading.sandbox.box import outermost

    paths = ["/usr", "/lib", "/lib64", "/usr/local", "/usr/lib/jvm/java-17", "/work/main/.venv", "/usr",
             "/work/main/.venv/lib", "/opt/streamlab/cache"]
    assert outermost(paths) == ["/usr", "/lib", "/lib64", "/work/main/.venv", "/opt/streamlab/cache"]
