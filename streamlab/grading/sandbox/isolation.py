"""Keeping submissions apart, and cleaning up after each one.

Every process that grades one submission (the worker, nbgrader's kernel, the kernel's Spark JVM,
anything the student's code starts) inherits ``STREAMLAB_GRADE_TAG=<run tag>-<student>`` from the
worker's environment. Processes are found by that tag, not by parentage: the kernel runs in a
session of its own and the JVM may outlive it. Each submission also gets its own Kafka topic prefix
(``STREAMLAB_TOPIC_PREFIX``) and data folder (``STREAMLAB_DATA_DIR``, for checkpoints), so students
never see each other's data; its topics are deleted when it is done.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ...stack.kafka import admin_client, list_topics
from ...stack.kafka import delete_topics as delete_listed
from ...stack.paths import cache_dir
from .. import bounds
from ..labs import with_scripts_on_path

TAG = "STREAMLAB_GRADE_TAG"  # environment variable carried by every process grading one submission


def submission_topic_prefix(tag: str) -> str:
    """A Kafka topic prefix for ``tag``, different for different tags: topic names allow only
    [a-zA-Z0-9._-] and student ids may hold other characters (e-mail addresses), so the readable part
    is followed by a short hash of the exact tag (``Ann``, ``ann`` and ``a_nn`` get different prefixes)."""
    import hashlib

    readable = re.sub(r"[^a-z0-9.-]+", "-", tag.lower())[:120]
    return f"{readable}-{hashlib.sha256(tag.encode()).hexdigest()[:8]}-"


def submission_environment(tag: str, *, bootstrap: str, workdir: Path) -> dict[str, str]:
    """The worker's environment: the grader's own, plus the submission's tag, Kafka topic prefix,
    data and Spark folders (under ``workdir``), minus what nbgrader sets for the kernels it runs."""
    env = with_scripts_on_path(dict(os.environ))
    env.update({
        TAG: tag,
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "STREAMLAB_TOPIC_PREFIX": submission_topic_prefix(tag),
        "STREAMLAB_DATA_DIR": str(workdir / "data"),
        "STREAMLAB_CACHE_DIR": str(cache_dir()),
        "STREAMLAB_SPARK_UI": "false",
        "SPARK_LOCAL_DIRS": str(workdir / "spark"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONUNBUFFERED": "1",
    })
    for key in ("NBGRADER_EXECUTION", "NBGRADER_VALIDATING", "JPY_PARENT_PID"):
        env.pop(key, None)
    return env


def tagged_processes(tag: str, *, prefix: bool = False) -> list:
    """Living processes (zombies left out) whose grading tag is ``tag``, or starts with it."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            value = proc.environ().get(TAG)
            if value is not None and (value.startswith(tag) if prefix else value == tag):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return found


def kill_submission_processes(worker: subprocess.Popen | None, tag: str) -> int:
    """Kill the ``worker`` (if it still runs), everything below it and every process carrying
    ``tag`` (the kernel runs in its own session, and the JVM may outlive the kernel).
    Returns how many processes were killed."""
    import psutil

    victims = {}
    if worker is not None and worker.poll() is None:  # not reaped yet, so its pid is still its own
        try:
            root = psutil.Process(worker.pid)
            for proc in [root, *root.children(recursive=True)]:
                victims[proc.pid] = proc
        except psutil.NoSuchProcess:
            pass
    for proc in tagged_processes(tag):
        victims.setdefault(proc.pid, proc)
    victims.pop(os.getpid(), None)
    for proc in victims.values():
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    _wait_until_dead(list(victims.values()), timeout_s=10)
    return len(victims)


def _wait_until_dead(procs: list, timeout_s: float) -> None:
    """Wait until every process in ``procs`` has died. A dead process that is not our child stays a
    zombie until whoever adopted it reaps it (in some containers PID 1 takes a second or more):
    dead is dead, so zombies are not waited for. Our own children are reaped."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while procs and time.monotonic() < deadline:
        living = []
        for proc in procs:
            try:
                if proc.ppid() == os.getpid():
                    proc.wait(timeout=0)  # reaps it once it has died
                elif proc.status() != psutil.STATUS_ZOMBIE:
                    living.append(proc)
            except psutil.TimeoutExpired:
                living.append(proc)
            except psutil.NoSuchProcess:
                continue
        procs = living
        if procs:
            time.sleep(0.02)


def kill_tagged(tag_prefix: str) -> None:
    """Kill every process whose grading tag starts with ``tag_prefix`` (a whole run, on Ctrl-C)."""
    for proc in tagged_processes(tag_prefix, prefix=True):
        try:
            proc.kill()
        except Exception:  # already gone
            pass


def leftover_processes(tag_prefix: str) -> list[str]:
    """Living processes whose grading tag starts with ``tag_prefix`` (used by the tests)."""
    left = []
    for proc in tagged_processes(tag_prefix, prefix=True):
        try:
            left.append(f"{proc.pid} {proc.name()}")
        except Exception:  # gone meanwhile
            continue
    return left


@dataclass
class ChildOutcome:
    returncode: int | None
    hit_limit: bool     # still running after the time limit (then stopped)
    killed: int         # processes stopped afterwards: the worker's, or left behind by the notebook


def run_isolated(command: list[str], *, env: dict, cwd: Path, log_path: Path, timeout_s: float,
                 tag: str) -> ChildOutcome:
    """Run the worker ``command`` in a session of its own, its output in ``log_path``, for at most
    ``timeout_s``; then stop it and every process carrying ``tag``, whatever happened."""
    proc = None
    try:
        with log_path.open("wb") as log:
            proc = subprocess.Popen(command, env=env, cwd=str(cwd), stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            try:
                proc.wait(timeout=timeout_s)
                hit_limit = False
            except subprocess.TimeoutExpired:
                hit_limit = True
        killed = kill_submission_processes(proc, tag)
        return ChildOutcome(proc.returncode, hit_limit, killed)
    finally:
        if proc is not None and proc.poll() is None:
            kill_submission_processes(proc, tag)


def delete_prefixed(prefix: str) -> None:
    """Delete the Kafka topics and consumer groups whose names start with ``prefix`` (a submission's); returns
    once no such topic is listed. (Transactional ids cannot be deleted in Kafka: the door bounds how many a
    submission makes, ``bounds.KAFKA_TRANSACTIONAL_IDS``.) Best effort: when the broker is gone or a
    topic stays listed, it says so on stderr and grading goes on."""
    try:
        delete_listed([topic for topic in list_topics() if topic.startswith(prefix)])
        admin = admin_client()
        try:
            groups = [group for group, *_ in admin.list_consumer_groups() if group.startswith(prefix)]
            if groups:
                admin.delete_consumer_groups(groups)
        finally:
            admin.close()
    except Exception as err:  # noqa: BLE001 - cleaning up must not cost the student their grade
        print(f"streamlab: could not delete the topics and groups {prefix}*: {type(err).__name__}: {err}",
              file=sys.stderr)




def broker_problem(bootstrap: str, timeout_s: float = bounds.BROKER_PROBE_S) -> str | None:
    """The grader's own health probe of the broker: None when it answers a DescribeCluster within ``timeout_s``,
    else why not (then whatever was graded meanwhile is the grader's failure, graded again)."""
    from kafka import KafkaAdminClient

    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout_s * 1000),
                                 api_version_auto_timeout_ms=int(timeout_s * 1000))
        try:
            admin.describe_cluster()
        finally:
            admin.close()
    except Exception as err:  # noqa: BLE001 - any failure: the broker is not answering
        return f"{type(err).__name__}: {str(err).strip()[:200]}"
    return None
