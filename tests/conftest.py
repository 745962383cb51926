"""Shared fixtures: a real Kafka broker and one SparkSession for the whole test run.

Kafka, in this order: ``KAFKA_BOOTSTRAP_SERVERS`` if set; with ``STREAMLAB_TEST_KAFKA=docker``, a Kafka
container (testcontainers' generic container running the course image's ``kafka`` role, the Docker
stack's broker) when a Docker engine answers and the image is here; otherwise the course's native KRaft
broker (the default), started for the run in the run's own data folder (below) and stopped at the end.
The container is the native broker's jars and settings (``streamlab kafka serve``); the docker tier
(tests/docker) starts it through testcontainers. The chosen address is exported as
``KAFKA_BOOTSTRAP_SERVERS`` so that notebooks and graded labs, run in child processes, use it too.
"""
from __future__ import annotations

import ast
import functools
import os
import shutil
import socket
import subprocess
import time
import warnings
from contextlib import ExitStack

import pytest

from streamlab.stack import broker, docker_images
from streamlab.stack.paths import project_root

# A red run explains itself: each failing test's first error line, the grader's rows, the kept logs
pytest_plugins = ["red_run"]

os.environ.setdefault("STREAMLAB_SPARK_UI", "false")

# A test run keeps its broker, topics, checkpoints and logs in a data folder of its own (workers,
# notebooks and graded labs inherit it): a learner's broker and checkpoints in .streamlab/ never see
# the hundreds of topics a run creates, and each run starts an empty broker. Deleted after a run
# that passed; kept (and named) after one that failed. STREAMLAB_DATA_DIR, if set, is used as it is.
RUN_DIR_OWNED = "STREAMLAB_DATA_DIR" not in os.environ
if RUN_DIR_OWNED:
    os.environ["STREAMLAB_DATA_DIR"] = str(project_root() / ".streamlab" / "test-runs"
                                           / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")


def docker_engine_answers() -> tuple[bool, str]:
    try:
        proc = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, f"docker client unusable: {err}"
    if proc.returncode != 0:
        return False, (proc.stderr.strip().splitlines() or ["docker info failed"])[-1]
    return True, proc.stdout.strip()


# The test suite's Kafka container: the course image's `kafka` role, the broker of the Docker stack
# (docker/compose.yaml), which is the native broker's jars and settings (BROKER_SETTINGS) in a container.
KAFKA_IMAGE = docker_images.COURSE_IMAGE
CONTAINER_START_TIMEOUT_S = 120
# Which Kafka the run uses: "container", "native", or "configured" (KAFKA_BOOTSTRAP_SERVERS was set).
KAFKA_IN_USE = {"kind": None}


def kafka_container_env(host: str, host_port: int, sandbox_port: int) -> dict[str, str]:
    """The network of the tests' Kafka container (``broker.NETWORK_VARIABLES``): one KRaft node advertised at
    ``host:host_port``, and its grading listener, SANDBOX, at ``host:sandbox_port``. Every other setting is
    the image's own, the native broker's."""
    network = {
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093,SANDBOX://:9094",
        "advertised": f"PLAINTEXT://{host}:{host_port},SANDBOX://{host}:{sandbox_port}",
        "protocols": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SANDBOX:SASL_PLAINTEXT",
        "inter_broker": "PLAINTEXT",
        "voters": "1@localhost:9093",
    }
    return {broker.NETWORK_VARIABLES[field]: value for field, value in network.items()}


def container_class():
    """testcontainers' generic container (a function, so a test can put a fake in its place). Its reaper
    (Ryuk) is an image of its own, which a machine without a registry cannot pull: the run stops its
    container itself (the ExitStack), so the reaper is not used."""
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    from testcontainers.core.container import DockerContainer

    return DockerContainer


def start_kafka_container(stack: ExitStack) -> str:
    """Run KAFKA_IMAGE until it answers; ``stack`` removes it at the end. The image is built here
    (tests/docker, `make docker-base` and docker/compose.yaml), never pulled."""
    if docker_images.image_id(KAFKA_IMAGE) is None:
        raise LookupError(f"no {KAFKA_IMAGE} image here (the docker tier builds it)")
    host, port, sandbox_port = "127.0.0.1", _free_port(), _free_port()
    container = container_class()(KAFKA_IMAGE, env=kafka_container_env(host, port, sandbox_port)).with_command("kafka")
    # published on 127.0.0.1 only (with_bind_ports takes no address; its dict is passed to docker as it is)
    container.ports.update({"9092/tcp": (host, port), "9094/tcp": (host, sandbox_port)})
    servers = f"{host}:{port}"
    try:
        container.start()
        deadline = time.monotonic() + CONTAINER_START_TIMEOUT_S
        while not broker.ping(servers, timeout_s=5)[0]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{KAFKA_IMAGE} did not answer on {servers} within {CONTAINER_START_TIMEOUT_S}s")
            time.sleep(1)
    except BaseException:
        container.stop()
        raise
    # the grader's listener (tenancy), named only once the container answers: a container that could not
    # start leaves no address behind for the native broker's run to ask (it has a SANDBOX listener of its own)
    os.environ["STREAMLAB_KAFKA_SANDBOX_SERVERS"] = f"{host}:{sandbox_port}"
    stack.callback(container.stop)
    return servers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_test_kafka(stack: ExitStack, say, *, wait: bool = True) -> str:
    """Start the Kafka the test run uses and return its address; ``stack`` stops it at the end.

    The native broker (STREAMLAB_TEST_KAFKA=native, the default), or with STREAMLAB_TEST_KAFKA=docker a
    Kafka container when a Docker engine answers; if the container cannot be started (say, its image was
    never built here), ``say`` is told why and the native broker is used. ``wait=False``: a native broker
    may still be starting (``broker.wait_ready()``).
    """
    mode = os.environ.get("STREAMLAB_TEST_KAFKA", "native")
    if mode == "docker" and docker_engine_answers()[0]:
        try:
            servers = start_kafka_container(stack)
            KAFKA_IN_USE["kind"] = "container"
            return servers
        except Exception as err:  # noqa: BLE001 - any failure: fall back, and say why
            detail = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
            say(f"A Docker engine answers, but the {KAFKA_IMAGE} container could not be started "
                f"({type(err).__name__}: {detail}); the tests use the native broker instead.")
    already_running = broker.status().running
    state = broker.start(quiet=True, wait=wait)
    if not already_running:
        stack.callback(broker.stop, quiet=True)
    KAFKA_IN_USE["kind"] = "native"
    return state.bootstrap_servers


def _say(config, message: str) -> None:
    warnings.warn(message, UserWarning, stacklevel=2)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"\nkafka: {message}", yellow=True)


def _is_xdist_controller(config) -> bool:
    """This process hands tests out to pytest-xdist workers (``-n N`` with N > 0)."""
    return bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")


def pytest_configure(config):
    """Under pytest-xdist, the controller starts the one Kafka every worker uses (before the workers
    start, so they inherit KAFKA_BOOTSTRAP_SERVERS) and stops it at the very end. A native broker
    starts while the workers collect the tests; no test is handed out before it answers."""
    if not _is_xdist_controller(config) or os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        return
    stack = ExitStack()
    config.stash[_KAFKA_STACK] = stack
    servers = start_test_kafka(stack, say=lambda message: _say(config, message), wait=False)
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = servers
    os.environ[KAFKA_KIND_VARIABLE] = KAFKA_IN_USE["kind"]
    config.stash[_KAFKA_STARTING] = KAFKA_IN_USE["kind"] == "native"


@pytest.hookimpl(optionalhook=True)  # xdist's hooks: `-p no:xdist` still works
def pytest_xdist_node_collection_finished(node, ids):
    """In the controller, when a worker has collected its tests: wait for the broker (once), before
    any test is scheduled."""
    if node.config.stash.get(_KAFKA_STARTING, False):
        node.config.stash[_KAFKA_STARTING] = False
        try:
            broker.wait_ready()
        except broker.BrokerError as err:
            pytest.exit(f"The test run's Kafka broker did not start: {err}", returncode=3)


def pytest_sessionfinish(session, exitstatus):
    session.config.stash[_EXIT_STATUS] = exitstatus


def pytest_unconfigure(config):
    stack = config.stash.get(_KAFKA_STACK, None)
    if stack is not None:
        stack.close()
        os.environ.pop("KAFKA_BOOTSTRAP_SERVERS", None)
        os.environ.pop(KAFKA_KIND_VARIABLE, None)
    if RUN_DIR_OWNED and not hasattr(config, "workerinput"):
        # A course command run by a test (`streamlab grade` with no Kafka configured) starts the course's broker in
        # this run's data folder, as it would for a learner, and leaves it running: stopped here with the run. (The
        # docker tier's classroom test left one for 12 minutes after its tier ended.)
        broker.stop(quiet=True)
        run_dir = os.environ["STREAMLAB_DATA_DIR"]
        if config.stash.get(_EXIT_STATUS, 1) in (0, pytest.ExitCode.NO_TESTS_COLLECTED):
            shutil.rmtree(run_dir, ignore_errors=True)
        elif os.path.isdir(run_dir):
            _say(config, f"this run's broker log, checkpoints and Spark logs are kept in {run_dir}")


KAFKA_KIND_VARIABLE = "STREAMLAB_TEST_KAFKA_KIND"  # tells xdist workers which Kafka the controller started
_KAFKA_STACK = pytest.StashKey[ExitStack]()
_KAFKA_STARTING = pytest.StashKey[bool]()
_EXIT_STATUS = pytest.StashKey[int]()


# Running in parallel (`pytest -n N`, what `make test` does). Each group of tests goes to one worker as
# a whole, heaviest first: a lab's grading run (module-scoped, shared by that lab's tests; lab01's
# robustness run waits out a hanging submission, so it starts first, the one-at-a-time hostile-data run
# beside it), the Spark cluster (started once), each notebook on its own (the slowest first, with the
# modules as long as one), every test that uses the `spark` fixture (one SparkSession for the run),
# then each remaining test module, the slow ones first. (pytest-xdist's own `--dist loadgroup` cannot
# be used: it renames test ids in a way pytest 9.2 no longer sees.)

# The test modules that take longest without Spark (worker time limits, JVM tools, releasing labs),
# slowest first, as measured on two cores: started first, they don't leave one worker finishing alone
# at the end of `make check`. (A module missing here just runs after them; the order is only about speed.)
SLOW_MODULES = ("tests/grading/workers/test_warm.py", "tests/grading/test_labs.py",
                "tests/grading/sandbox/test_isolation.py",
                "tests/lessons/test_m05_offset_replay.py", "tests/stack/test_console.py", "tests/test_cli.py",
                "tests/grading/outputs/test_feedback.py", "tests/stack/test_jars.py")
# Heavy test modules that spend minutes waiting out a time limit (a hanging lab's 100 s in `streamlab check`): handed
# out among the grading runs (after lab04's), so that another worker's CPU work fills their wait. Last, they left the
# machine idle for the run's final minutes (the heavy tier of 29 November 2026: its last three minutes at 0-5 % CPU);
# right after lab07's run, the last, they met the short lessons at the end: 26-51 % idle for two minutes (48bfcc1).
WAITING_MODULES = ("tests/grading/test_selfcheck.py",)
# The lessons, slowest first (their heavy-tier times in the fresh clone of 091f020, 3 December 2026: 03 179 s,
# 08 132 s, 06 108 s, 04b 105 s, 02b 79 s, 05 77 s, 02 64 s, 04 63 s, 07b 61 s, 07 41 s, 01 39 s, 00 26 s): the
# longest no longer start last (08 began 20 s before the other worker's last lesson ended, and ran 132 s).
LESSONS_SLOWEST_FIRST = ("03_state_backends", "08_state_in_flink_2", "06_event_time_watermarks",
                         "04b_crashes_and_sinks", "02b_state_expiry", "05_offset_replay", "02_keyed_state",
                         "04_checkpoints_exactly_once", "07b_state_as_data", "07_savepoints_upgrades",
                         "01_stateless_vs_stateful", "00_setup")
# The slowest lessons go out among the labs' grading runs, one after each (lab02's run, lesson 03, lab03's run, lesson
# 08, ...): a lesson keeps about one core busy and leaves the rest idle, which a grading run beside it fills. After
# the grading runs, two lessons at a time left the machine 10-29 % idle for 12 minutes (the fresh clones of 55456fe
# and 2642a0e, 3 December 2026); the short ones stay at the end, where they pack the last minutes.
BESIDE_THE_GRADING_RUNS = 6
# Modules that take as long as a lesson, each handed out with the lesson named (the same fresh clone): the shards'
# grading runs (159 s, lab 01's reference graded three times), Gradescope's (89 s), the catalogue of mistakes (99 s).
# The first two came after the lessons, and ended the heavy tier with the machine 15-25 % idle.
AS_LONG_AS_A_LESSON = {"tests/grading/run/test_grade_shards.py": "08_state_in_flink_2",
                       "tests/grading/test_gradescope.py": "02b_state_expiry",
                       "tests/lessons/test_mistakes.py": "02b_state_expiry"}
ROOT = project_root()


@functools.cache
def spark_tests(path: str) -> frozenset[str]:
    """The test functions in the module at ``path`` (relative to the repository) that use the ``spark``
    fixture, directly or through a fixture of their module. They all run on one worker, so the suite
    starts one SparkSession (and warms one JVM up) instead of one per worker. Read from the source, as
    the scheduler sees only test ids; tests/test_suite_layout.py checks it against pytest's own view."""
    try:
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return frozenset()
    params = {node.name: {arg.arg for arg in node.args.args} for node in ast.walk(tree)
              if isinstance(node, ast.FunctionDef)}
    users = {"spark"}
    while True:  # fixtures of the module that use spark, and the fixtures that use those ...
        more = {name for name, args in params.items() if args & users} - users
        if not more:
            return frozenset(name for name in users if name.startswith("test"))
        users |= more


def _lab_rank(lab: str) -> float:
    """Lab 01's grading run goes first (0); the others from 1, lab02 to lab07, a tenth apart."""
    number = int(lab[3:5])
    return 0 if number == 1 else 1 + (number - 2) / 10


def _lesson_rank(lesson: str) -> float:
    """The ``BESIDE_THE_GRADING_RUNS`` slowest lessons each go out right after a lab's grading run (lab02's + 0.05,
    ...); the others between 2 and 2.5, the slowest first (``LESSONS_SLOWEST_FIRST``); anything else, after them."""
    at = LESSONS_SLOWEST_FIRST.index(lesson) if lesson in LESSONS_SLOWEST_FIRST else len(LESSONS_SLOWEST_FIRST)
    if at < BESIDE_THE_GRADING_RUNS:
        return _lab_rank(f"lab{at + 2:02d}") + 0.05
    return 2 + at / (len(LESSONS_SLOWEST_FIRST) + 1) / 2


def group_of(nodeid: str) -> tuple[float, str]:
    """(rank, group) of a test id: lower ranks are handed out first."""
    path, _, name = nodeid.partition("::")
    module = path.rsplit("/", 1)[-1]
    if name.split("[", 1)[0].rsplit("::", 1)[-1] in spark_tests(path):
        return 2.5, "spark"
    if module == "test_grade_labs.py":
        lab = name[name.index("[") + 1:name.rindex("]")] if "[" in name else "lab01"  # `robust`: lab01's run
        return _lab_rank(lab), f"grade {lab.split('_')[0]}"
    if module == "test_cluster.py":
        return 1, "cluster"
    # The hostile-data run grades one submission at a time (about one core): it starts first, beside lab 01's
    # robustness run, while the docker tier (beside the heavy tiers) keeps the machine busy. Handed out after the other
    # labs' runs, it met the self-check's waits: the machine 25-30 % idle for five minutes (the fresh clone of
    # 091f020, 3 December 2026; every earlier minute of the grading runs 0-3 %).
    if module == "test_grade_hostile_data.py":
        return 0.5, path
    if module == "test_grade_hostile.py":
        return 1.2, path
    if module == "test_notebooks.py" and name.startswith("test_notebook_runs"):
        return _lesson_rank(name[name.index("[") + 1:name.rindex("]")] if "[" in name else ""), nodeid
    if module == "test_notebooks.py" and name.startswith("test_setup_notebook_runs"):
        return _lesson_rank(""), nodeid  # after every lesson (33 s)
    if path in AS_LONG_AS_A_LESSON:
        return _lesson_rank(AS_LONG_AS_A_LESSON[path]), path
    if path in WAITING_MODULES:  # mostly waiting out a time limit: beside the CPU's work, never alone at the end
        return _lab_rank("lab04") + 0.02, path
    if path in SLOW_MODULES:
        return 3 + SLOW_MODULES.index(path) / len(SLOW_MODULES), path
    return 4, path


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: group_of(item.nodeid)[0])  # stable: each group keeps its own order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Hand out whole groups (``group_of``) in the order collected, not biggest-first."""
    from xdist.scheduler import LoadScopeScheduling

    class CourseGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)[1]

    config.option.loadscopereorder = False
    return CourseGroups(config, log)


@pytest.fixture(scope="session")
def kafka_bootstrap(request):
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if configured:
        KAFKA_IN_USE["kind"] = os.environ.get(KAFKA_KIND_VARIABLE, "configured")
        yield configured
        return
    with ExitStack() as stack:
        servers = start_test_kafka(stack, say=lambda message: _say(request.config, message))
        os.environ["KAFKA_BOOTSTRAP_SERVERS"] = servers
        try:
            yield servers
        finally:
            del os.environ["KAFKA_BOOTSTRAP_SERVERS"]


@pytest.fixture(scope="session")
def spark(kafka_bootstrap):
    import streamlab

    session = streamlab.spark()  # with the course's quick JIT and start-up archive, like every kernel's
    yield session
    streamlab.stop_all_queries(session)
    session.stop()
