"""Static checks of the Dockerized stack: docker/compose.yaml, docker/Dockerfile,
docker/entrypoint.sh and .dockerignore. They need no Docker engine.

tests/data/compose-spec.json is the Compose Specification schema, vendored verbatim
from compose-spec/compose-spec, schema/compose-spec.json at commit
00655e2222608fa6eaecdf12ac5195889ca2244a.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCKER_DIR = ROOT / "docker"
COMPOSE_FILE = DOCKER_DIR / "compose.yaml"
DOCKERFILE = DOCKER_DIR / "Dockerfile"
ENTRYPOINT = DOCKER_DIR / "entrypoint.sh"
DOCKER_README = DOCKER_DIR / "README.md"
DOCKERIGNORE = ROOT / ".dockerignore"
REQUIREMENTS = ROOT / "requirements.txt"
SCHEMA_FILE = Path(__file__).resolve().parent / "data" / "compose-spec.json"

KAFKA = "kafka"
COURSE_SERVICES = ("jupyter", "spark-master", "spark-worker", "jupyter-cluster", "grader")
DEFAULT_BUDGET = 4 * 1024**3  # the default stack must fit a 4 GB Docker VM


# --------------------------------------------------------------------------- helpers

_INTERPOLATION = re.compile(
    r"\$(?:(?P<escaped>\$)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<named>[A-Za-z_][A-Za-z0-9_]*))"
)


def interpolate(value, env: dict[str, str]):
    """Apply Compose variable interpolation (${VAR}, ${VAR:-d}, ${VAR-d}, $$) to every string."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def replace(m: re.Match) -> str:
        if m.group("escaped"):
            return "$"
        name = m.group("braced") or m.group("named")
        op, arg = m.group("op"), m.group("arg") or ""
        present = name in env
        current = env.get(name, "")
        if op in (":-", "-"):
            use_default = not present or (op == ":-" and current == "")
            return arg if use_default else current
        if op in (":?", "?"):
            if not present or (op == ":?" and current == ""):
                raise ValueError(f"required variable {name} is not set: {arg}")
            return current
        if op == "+":
            return arg if present else ""
        if op == ":+":
            return arg if current else ""
        return current

    return _INTERPOLATION.sub(replace, value)


def load_compose(env: dict[str, str] | None = None) -> dict:
    raw = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return interpolate(raw, env or {})


def env_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_size(text) -> int:
    """Bytes of a Docker/JVM size such as 1g, 2560m, 512M, 1GiB or a plain number."""
    m = _SIZE.match(str(text))
    assert m, f"not a memory size: {text!r}"
    number, unit = float(m.group(1)), m.group(2).lower()
    return int(number * 1024 ** "bkmgt".index(unit or "b"))


def jvm_max_heap(opts: str) -> int:
    m = re.search(r"-Xmx(\d+[kKmMgG]?)", opts)
    assert m, f"no -Xmx in {opts!r}"
    return parse_size(m.group(1))


def memory_limit(service: dict) -> int | None:
    limit = ((service.get("deploy") or {}).get("resources") or {}).get("limits", {}).get("memory")
    if limit is None:
        limit = service.get("mem_limit")
    return None if limit is None else parse_size(limit)


def image_is_pinned(ref: str) -> bool:
    """True for name:tag (tag not 'latest') or name@sha256:digest."""
    if not ref or "$" in ref:
        return False
    if "@sha256:" in ref:
        return bool(re.search(r"@sha256:[0-9a-f]{64}$", ref))
    last = ref.rsplit("/", 1)[-1]  # a registry host may carry a port: host:5000/name
    if ":" not in last:
        return False
    tag = last.rsplit(":", 1)[1]
    return bool(tag) and tag != "latest"


def parse_listeners(text: str) -> dict[str, tuple[str, int]]:
    """'NAME://host:port,...' -> {NAME: (host, port)}."""
    result = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        m = re.fullmatch(r"([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:]*):(\d+)", item)
        assert m, f"malformed listener {item!r}"
        result[m.group(1)] = (m.group(2), int(m.group(3)))
    return result


def parse_port(entry) -> dict:
    """Short ('[ip:]published:target[/proto]') or long port syntax -> dict."""
    if isinstance(entry, dict):
        return {
            "host_ip": entry.get("host_ip", ""),
            "published": int(entry["published"]) if entry.get("published") else None,
            "target": int(entry["target"]),
        }
    text = str(entry).split("/", 1)[0]
    parts = text.rsplit(":", 2)
    if len(parts) == 3:
        host_ip, published, target = parts
    elif len(parts) == 2:
        host_ip, (published, target) = "", parts
    else:
        host_ip, published, target = "", "", parts[0]
    return {"host_ip": host_ip, "published": int(published) if published else None, "target": int(target)}


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    instructions, current = [], ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        keyword, _, args = current.partition(" ")
        instructions.append((keyword.upper(), args.strip()))
        current = ""
    assert not current, "Dockerfile ends in a line continuation"
    return instructions


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, args in dockerfile_instructions():
        if keyword == "ENV":
            for token in shlex.split(args):
                if "=" in token:
                    key, value = token.split("=", 1)
                    env[key] = value
    return env


def shell_commands(run_args: str) -> list[list[str]]:
    """Split a RUN line into simple commands (on &&, ||, ;, |) and tokenize them."""
    commands = []
    for part in re.split(r"&&|\|\||;|\|", run_args):
        part = part.strip()
        if part:
            try:
                commands.append(shlex.split(part))
            except ValueError:  # unbalanced quotes across the split: keep it coarse
                commands.append(part.split())
    return commands


def requirement_names() -> set[str]:
    names = set()
    for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0].lower().replace("_", "-"))
    return names


def dockerignore_patterns() -> list[tuple[bool, str]]:
    patterns = []
    for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line[1:] if negate else line
        patterns.append((negate, pattern.strip().strip("/")))
    return patterns


def dockerignore_excludes(path: str, patterns: list[tuple[bool, str]]) -> bool:
    """Docker semantics: the last matching pattern wins; a pattern matching a directory
    matches everything below it; '**' matches any number of directories."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for negate, pattern in patterns:
        regex = re.escape(pattern).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*")
        regex = regex.replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        if any(re.fullmatch(regex, prefix) for prefix in prefixes):
            excluded = not negate
    return excluded


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def raw_compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def compose() -> dict:
    return load_compose({})


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def schema() -> dict:
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- helper self-tests


@pytest.mark.parametrize(
    ("ref", "pinned"),
    [
        ("apache/kafka:4.1.0", True),
        ("python:3.11.14-slim-bookworm", True),
        ("localhost:5000/course:1.0", True),
        ("apache/kafka@sha256:" + "a" * 64, True),
        ("apache/kafka", False),
        ("apache/kafka:latest", False),
        ("localhost:5000/course", False),
        ("${IMAGE}", False),
    ],
)
def test_image_pin_rule(ref, pinned):
    assert image_is_pinned(ref) is pinned


def test_interpolation_rules():
    assert interpolate("a${X:-d}b", {}) == "adb"
    assert interpolate("a${X:-d}b", {"X": ""}) == "adb"
    assert interpolate("a${X-d}b", {"X": ""}) == "ab"
    assert interpolate("${X:-d}", {"X": "v"}) == "v"
    assert interpolate("$$X $X", {"X": "v"}) == "$X v"
    with pytest.raises(ValueError):
        interpolate("${X:?missing}", {})


def test_dockerignore_matcher_semantics():
    patterns = [(False, "*"), (True, "src"), (False, "**/__pycache__")]
    assert dockerignore_excludes(".venv/bin/python", patterns)
    assert not dockerignore_excludes("src/a.py", patterns)
    assert dockerignore_excludes("src/__pycache__/a.pyc", patterns)


# --------------------------------------------------------------------------- compose file


def test_compose_file_parses_and_names_the_project(raw_compose):
    assert isinstance(raw_compose, dict)
    # Without a name the project would be called "docker" after the directory.
    assert raw_compose.get("name") == "streamlab"
    assert "version" not in raw_compose, "the top-level version key is obsolete"


def validate(document: dict, schema: dict) -> None:
    # The schema declares draft-07 (its $schema URI lacks the trailing '#', so
    # jsonschema would not recognise it on its own).
    jsonschema.Draft7Validator(schema).validate(document)


def test_vendored_schema_is_the_compose_specification(schema):
    jsonschema.Draft7Validator.check_schema(schema)
    assert schema["title"] == "Compose Specification"
    for definition in ("service", "network", "volume", "healthcheck", "deployment"):
        assert definition in schema["definitions"]


def test_compose_validates_against_compose_spec(raw_compose, compose, schema):
    validate(raw_compose, schema)
    validate(compose, schema)  # also after interpolation, as Compose does


def test_schema_validation_rejects_a_broken_compose_file(raw_compose, schema):
    broken = json.loads(json.dumps(raw_compose))
    broken["services"]["jupyter"]["depends_on"]["kafka"]["condition"] = "service_ready"
    with pytest.raises(jsonschema.ValidationError):
        validate(broken, schema)
    broken = json.loads(json.dumps(raw_compose))
    broken["services"]["kafka"]["healthcheck"]["intervall"] = "10s"
    with pytest.raises(jsonschema.ValidationError):
        validate(broken, schema)


def test_expected_services_and_profiles(services):
    assert set(services) == {KAFKA, *COURSE_SERVICES}
    default = {name for name, svc in services.items() if not svc.get("profiles")}
    assert default == {KAFKA, "jupyter"}
    for name in ("spark-master", "spark-worker", "jupyter-cluster"):
        assert services[name]["profiles"] == ["cluster"]
    assert services["grader"]["profiles"] == ["grader"]


def test_every_image_is_pinned(services):
    for name, svc in services.items():
        image = svc.get("image")
        if image is None:
            assert "build" in svc, f"{name} has neither image nor build"
            continue
        assert image_is_pinned(image), f"{name}: image {image!r} is not pinned to a tag or digest"
    assert services[KAFKA]["command"] == ["kafka"], "the course image's broker role (streamlab kafka serve)"


def test_no_latest_anywhere_in_compose_or_dockerfile():
    for path in (COMPOSE_FILE, DOCKERFILE):
        assert not re.search(r":latest\b", path.read_text(encoding="utf-8")), path


def test_course_services_share_one_image_built_from_the_dockerfile(services):
    images = {services[name]["image"] for name in COURSE_SERVICES}
    assert len(images) == 1, images
    for name in COURSE_SERVICES:
        build = services[name]["build"]
        assert (DOCKER_DIR / build["context"]).resolve() == ROOT, f"{name}: context must be the repo root"
        assert (ROOT / build["dockerfile"]).resolve() == DOCKERFILE


def test_image_user_is_a_build_argument_not_a_runtime_uid(services):
    """Spark looks the user's name up; a runtime `user:` with a UID the image does not know
    breaks that, so the UID is baked in at build time instead. The one exception is the grader,
    which runs as root (a user every image knows) to make the grading sandbox."""
    declared = {args.split("=", 1)[0] for kw, args in dockerfile_instructions() if kw == "ARG"}
    for name in COURSE_SERVICES:
        svc = services[name]
        if name == "grader":
            assert str(svc.get("user")) == "0:0", "the grader runs as root, or not as a runtime UID at all"
        else:
            assert "user" not in svc, f"{name}: set STREAMLAB_UID/STREAMLAB_GID (build args), not user:"
        build_args = svc["build"].get("args") or {}
        assert {"STREAMLAB_UID", "STREAMLAB_GID"} <= set(build_args), name
        assert set(build_args) <= declared, f"{name}: build args the Dockerfile does not declare"


# --------------------------------------------------------------------------- Kafka listeners


def kafka_env(services) -> dict[str, str]:
    return env_of(services[KAFKA])


def kafka_names(services) -> set[str]:
    """Names under which other containers reach the broker."""
    svc = services[KAFKA]
    names = {KAFKA, svc.get("hostname", KAFKA)}
    if svc.get("container_name"):
        names.add(svc["container_name"])
    return names


def test_kafka_runs_kraft_combined_single_node(services):
    env = kafka_env(services)
    voters = [v.strip() for v in env["STREAMLAB_KAFKA_VOTERS"].split(",")]
    assert len(voters) == 1
    voter_id, _, voter_address = voters[0].partition("@")
    assert voter_id == "1", "node.id=1 (streamlab.stack.broker.server_properties)"
    host, _, port = voter_address.rpartition(":")
    listeners = parse_listeners(env["STREAMLAB_KAFKA_LISTENERS"])
    assert host in kafka_names(services)
    assert int(port) == listeners["CONTROLLER"][1]


def test_kafka_listener_names_are_consistent(services):
    env = kafka_env(services)
    listeners = parse_listeners(env["STREAMLAB_KAFKA_LISTENERS"])
    advertised = parse_listeners(env["STREAMLAB_KAFKA_ADVERTISED_LISTENERS"])
    protocols = dict(item.split(":", 1) for item in env["STREAMLAB_KAFKA_PROTOCOLS"].split(","))
    inter_broker = env["STREAMLAB_KAFKA_INTER_BROKER_LISTENER"]

    assert set(listeners) <= set(protocols), "every listener needs a security protocol"
    assert "CONTROLLER" in listeners, "controller.listener.names=CONTROLLER"
    assert set(advertised) <= set(listeners), "advertised listeners must exist"
    assert "CONTROLLER" not in advertised, "the controller listener must not be advertised"
    assert inter_broker in advertised
    assert len({port for _, port in listeners.values()}) == len(listeners), "listener ports collide"
    assert set(advertised) == {"HOST", "DOCKER", "SANDBOX"}, "the host, the Docker network, the grader's SASL listener"
    assert protocols["SANDBOX"] == "SASL_PLAINTEXT"


@pytest.mark.parametrize("host_port", [None, "29092"])
def test_host_listener_is_published_on_the_advertised_port(host_port):
    env = {} if host_port is None else {"KAFKA_HOST_PORT": host_port}
    kafka = load_compose(env)["services"][KAFKA]
    kenv = env_of(kafka)
    listeners = parse_listeners(kenv["STREAMLAB_KAFKA_LISTENERS"])
    advertised = parse_listeners(kenv["STREAMLAB_KAFKA_ADVERTISED_LISTENERS"])
    host_side = {name: addr for name, addr in advertised.items() if addr[0] in ("localhost", "127.0.0.1")}
    assert len(host_side) == 1, f"exactly one listener must be advertised to the host: {advertised}"
    (name, (host, advertised_port)), = host_side.items()
    assert advertised_port == int(host_port or 9092)
    assert host == "127.0.0.1", "the address the port is published on (localhost may be ::1 first)"

    ports = [parse_port(p) for p in kafka["ports"]]
    matching = [p for p in ports if p["published"] == advertised_port]
    assert matching, f"advertised 127.0.0.1:{advertised_port} but published {ports}"
    assert matching[0]["target"] == listeners[name][1], "published port must reach the host listener"
    assert matching[0]["host_ip"] == "127.0.0.1"
    # Nothing else of Kafka (the in-network or controller listener) is published.
    assert len(ports) == 1


def test_bootstrap_servers_are_advertised_in_network_listeners(services):
    env = kafka_env(services)
    listeners = parse_listeners(env["STREAMLAB_KAFKA_LISTENERS"])
    advertised = parse_listeners(env["STREAMLAB_KAFKA_ADVERTISED_LISTENERS"])
    in_network = {(host, port): name for name, (host, port) in advertised.items() if host in kafka_names(services)}
    assert in_network, "no listener is advertised under the kafka service name"
    for name in COURSE_SERVICES:
        bootstrap = env_of(services[name]).get("KAFKA_BOOTSTRAP_SERVERS")
        assert bootstrap, f"{name} has no KAFKA_BOOTSTRAP_SERVERS"
        for server in bootstrap.split(","):
            host, _, port = server.strip().rpartition(":")
            listener = in_network.get((host, int(port)))
            assert listener, f"{name}: {server} is not an advertised in-network listener {in_network}"
            assert listeners[listener][1] == int(port), f"{name}: {server} is not the listener's port"


def test_kafka_data_is_on_a_named_volume(compose, services):
    env = kafka_env(services)
    log_dirs = f"{env['STREAMLAB_DATA_DIR']}/kafka"  # streamlab.stack.broker.home()
    mounts = {}
    for volume in services[KAFKA]["volumes"]:
        source, target = volume.split(":")[:2]
        mounts[target] = source
    assert log_dirs in mounts, f"{log_dirs} is not a mounted volume"
    assert mounts[log_dirs] in compose["volumes"], "the log dirs must be a named volume"
    assert '"$STREAMLAB_DATA_DIR/kafka"' in DOCKERFILE.read_text(), "the image makes it, owned by its user"


def test_kafka_heap_is_explicit_and_fits_its_limit(services):
    heap = jvm_max_heap("-Xmx" + kafka_env(services)["STREAMLAB_KAFKA_HEAP"])
    limit = memory_limit(services[KAFKA])
    assert heap <= 1024**3
    assert limit - heap >= 256 * 1024**2, "leave room for off-heap memory and the healthcheck's Python"


# --------------------------------------------------------------------------- health and order


def test_kafka_healthcheck_probes_the_broker(services):
    check = services[KAFKA]["healthcheck"]
    test = check["test"]
    assert test[0] == "CMD", test
    command = " ".join(test[1:])
    assert "broker.ping(" in command, "a Kafka client asks the broker (streamlab.stack.broker.ping)"
    m = re.search(r"ping\('([^']+)'", command)
    advertised = parse_listeners(kafka_env(services)["STREAMLAB_KAFKA_ADVERTISED_LISTENERS"])
    assert m.group(1) in {f"{h}:{p}" for h, p in advertised.values() if h in kafka_names(services)}, \
        "probe the in-network listener: 127.0.0.1 is advertised for the host port, not the container port"
    for key in ("interval", "timeout", "retries"):
        assert key in check


@pytest.mark.parametrize("name", ["jupyter", "jupyter-cluster", "grader"])
def test_kafka_clients_wait_for_a_healthy_broker(services, name):
    depends = services[name]["depends_on"]
    assert depends[KAFKA]["condition"] == "service_healthy"


def test_jupyter_has_a_healthcheck(services):
    for name in ("jupyter", "jupyter-cluster"):
        test = services[name]["healthcheck"]["test"]
        assert "8888" in " ".join(test)


# --------------------------------------------------------------------------- memory


def test_every_service_has_a_memory_limit(services):
    for name, svc in services.items():
        assert memory_limit(svc), f"{name} has no memory limit"


def test_default_stack_fits_in_four_gigabytes(services):
    default = [name for name, svc in services.items() if not svc.get("profiles")]
    total = sum(memory_limit(services[name]) for name in default)
    assert 2 * 1024**3 <= total < DEFAULT_BUDGET, f"default stack limits add up to {total / 1024**3:.2f} GiB"


def test_spark_heaps_fit_their_containers(services):
    for name in ("jupyter", "jupyter-cluster", "grader"):
        env = env_of(services[name])
        driver = parse_size(env["STREAMLAB_DRIVER_MEMORY"])
        assert memory_limit(services[name]) - driver >= 1024**3, f"{name}: driver heap leaves too little room"
    master = env_of(services["spark-master"])
    assert memory_limit(services["spark-master"]) > parse_size(master["SPARK_DAEMON_MEMORY"])
    worker = env_of(services["spark-worker"])
    assert "SPARK_WORKER_DIR" in worker, "the default work dir ($SPARK_HOME/work) is not writable"
    assert not worker["SPARK_WORKER_DIR"].startswith(dockerfile_env()["SPARK_HOME"])
    executors_and_daemon = parse_size(worker["SPARK_WORKER_MEMORY"]) + parse_size(worker["SPARK_DAEMON_MEMORY"])
    assert memory_limit(services["spark-worker"]) - executors_and_daemon >= 512 * 1024**2


# --------------------------------------------------------------------------- jupyter


def test_jupyter_is_published_on_localhost_only(services):
    for name, svc in services.items():
        for entry in svc.get("ports", []):
            assert parse_port(entry)["host_ip"] == "127.0.0.1", f"{name} publishes {entry} on all interfaces"
    targets = {parse_port(p)["target"]: parse_port(p)["published"] for p in services["jupyter"]["ports"]}
    assert targets[8888] == 8888


def test_jupyter_mounts_the_repository_at_the_work_dir(services):
    workdir = [args for kw, args in dockerfile_instructions() if kw == "WORKDIR"][-1]
    for name in ("jupyter", "jupyter-cluster", "grader"):
        svc = services[name]
        mounts = {v.split(":")[1]: v.split(":")[0] for v in svc["volumes"]}
        assert mounts.get(workdir) == "..", f"{name} must mount the repository at {workdir}"
        assert svc["working_dir"] == workdir
    assert dockerfile_env()["PYTHONPATH"] == workdir, "kernels must import the mounted streamlab package"


def test_jupyter_token_is_configurable(services):
    raw = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert raw["services"]["jupyter"]["environment"]["JUPYTER_TOKEN"].startswith("${JUPYTER_TOKEN")
    assert env_of(services["jupyter"])["JUPYTER_TOKEN"]


def test_local_jupyter_runs_spark_locally(services):
    assert env_of(services["jupyter"])["SPARK_MASTER"].startswith("local")


def test_runtime_environment_matches_the_image(services):
    image_env = dockerfile_env()
    for name in COURSE_SERVICES:
        env = env_of(services[name])
        assert env["STREAMLAB_CACHE_DIR"] == image_env["STREAMLAB_CACHE_DIR"], name
        assert env["PYSPARK_PYTHON"] == image_env["PYSPARK_PYTHON"], name
        assert env["STREAMLAB_DATA_DIR"], name


# --------------------------------------------------------------------------- cluster profile


def test_cluster_profile_points_at_the_master(services):
    master_env = env_of(services["spark-master"])
    url = f"spark://{services['spark-master']['hostname']}:{master_env['SPARK_MASTER_PORT']}"
    assert master_env["SPARK_MASTER_HOST"] == services["spark-master"]["hostname"]
    assert env_of(services["spark-worker"])["SPARK_MASTER"] == url
    assert env_of(services["jupyter-cluster"])["SPARK_MASTER"] == url
    assert services["spark-master"]["command"] == ["spark-master"]
    assert services["spark-worker"]["command"] == ["spark-worker"]
    assert services["spark-worker"]["depends_on"]["spark-master"]["condition"] == "service_healthy"


def test_cluster_shares_one_checkpoint_volume_at_the_same_path(compose, services):
    paths, sources = set(), set()
    for name in ("jupyter-cluster", "spark-master", "spark-worker"):
        data_dir = env_of(services[name])["STREAMLAB_DATA_DIR"]
        paths.add(data_dir)
        mounts = {v.split(":")[1]: v.split(":")[0] for v in services[name]["volumes"]}
        assert data_dir in mounts, f"{name}: {data_dir} is not a volume"
        sources.add(mounts[data_dir])
    assert len(paths) == 1 and len(sources) == 1, (paths, sources)
    assert sources.pop() in compose["volumes"]


def test_cluster_ports_do_not_collide_with_the_default_stack(services):
    published = {}
    for name, svc in services.items():
        for entry in svc.get("ports", []):
            port = parse_port(entry)["published"]
            assert port not in published, f"{name} and {published.get(port)} both publish {port}"
            published[port] = name


def test_cluster_profile_uses_the_native_clusters_settings(services):
    """docker/compose.yaml's cluster = `streamlab cluster start`'s: streamlab.stack.cluster.CLUSTER_SETTINGS."""
    from streamlab.stack.cluster import CLUSTER_SETTINGS as native

    master, worker = services["spark-master"], services["spark-worker"]
    master_env, worker_env = env_of(master), env_of(worker)
    url = f"spark://{master['hostname']}:{native['master_port']}"
    assert int(master_env["SPARK_MASTER_PORT"]) == native["master_port"]
    assert worker_env["SPARK_MASTER"] == env_of(services["jupyter-cluster"])["SPARK_MASTER"] == url
    assert int(master_env["SPARK_MASTER_WEBUI_PORT"]) == native["master_ui_port"]
    assert [parse_port(p)["target"] for p in master["ports"]] == [native["master_ui_port"]]
    assert str(native["master_ui_port"]) in " ".join(master["healthcheck"]["test"])
    assert int(worker_env["SPARK_WORKER_WEBUI_PORT"]) == native["worker_ui_port"]
    assert [parse_port(p)["target"] for p in worker["ports"]] == [native["worker_ui_port"]]
    workers = [svc for svc in services.values() if svc.get("command") == ["spark-worker"]]
    assert sum((svc.get("deploy") or {}).get("replicas", 1) for svc in workers) == native["workers"]
    assert int(worker_env["SPARK_WORKER_CORES"]) == native["worker_cores"]
    assert parse_size(worker_env["SPARK_WORKER_MEMORY"]) == parse_size(native["worker_memory"])
    assert parse_size(master_env["SPARK_DAEMON_MEMORY"]) == parse_size(native["master_daemon_memory"])
    assert parse_size(worker_env["SPARK_DAEMON_MEMORY"]) == parse_size(native["worker_daemon_memory"])
    # the worker holds one executor (streamlab.spark()'s size) per executor core it offers
    executors = native["worker_cores"] // native["executor_cores"]
    assert parse_size(native["worker_memory"]) >= executors * parse_size(native["executor_memory"])


# --------------------------------------------------------------------------- grader isolation


def test_grader_reaches_only_kafka_over_an_internal_network(compose, services):
    networks = compose["networks"]
    grader_networks = services["grader"]["networks"]
    grader_networks = list(grader_networks) if isinstance(grader_networks, (list, dict)) else []
    assert grader_networks, "the grader must name its networks (otherwise it joins the default one)"
    for net in grader_networks:
        assert (networks.get(net) or {}).get("internal") is True, f"grader network {net} is not internal"
        members = {name for name, svc in services.items() if net in (svc.get("networks") or [])}
        assert members == {"grader", KAFKA}, f"network {net} is shared with {members}"
    assert "ports" not in services["grader"]
    assert "network_mode" not in services["grader"]
    # Kafka itself must also be on a normal network, or its host port would not work.
    assert any(not (networks.get(n) or {}).get("internal") for n in services[KAFKA]["networks"])


def test_grader_runs_streamlab_grade_never_privileged(services):
    grader = services["grader"]
    assert grader["command"] == ["streamlab", "grade", "--help"]
    assert grader.get("cap_drop") == ["ALL"]
    assert "no-new-privileges:true" in grader.get("security_opt", [])
    assert "privileged" not in grader
    for key in ("pid", "ipc", "userns_mode", "devices", "network_mode", "cgroup"):
        assert key not in grader, f"the grader must not set {key}"


# What making streamlab's sandbox (bubblewrap, as root, without a user namespace) takes inside the
# grader's container; docker/compose.yaml and docker/README.md say why each one is needed.
GRADER_CAPABILITIES = {"SYS_ADMIN", "NET_ADMIN", "SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL"}
GRADER_SECURITY_OPT = {"seccomp=unconfined", "apparmor=unconfined", "no-new-privileges:true"}


def test_grader_has_exactly_what_the_sandbox_needs(services):
    grader = services["grader"]
    assert str(grader.get("user")) == "0:0", "bubblewrap makes the sandbox with real capabilities, as root"
    assert grader["cap_drop"] == ["ALL"]
    assert len(grader["cap_add"]) == len(set(grader["cap_add"]))
    assert {c.upper().removeprefix("CAP_") for c in grader["cap_add"]} == GRADER_CAPABILITIES
    assert set(grader["security_opt"]) == GRADER_SECURITY_OPT
    assert len(grader["security_opt"]) == len(GRADER_SECURITY_OPT)
    assert grader["deploy"]["resources"]["limits"]["pids"] and memory_limit(grader)


def test_only_the_grader_has_extra_privileges(services):
    for name, svc in services.items():
        if name == "grader":
            continue
        assert "cap_add" not in svc, f"{name} adds capabilities"
        assert "privileged" not in svc, name
        for option in svc.get("security_opt", []):
            assert "unconfined" not in option, f"{name}: {option}"


def test_docker_readme_explains_every_grader_privilege():
    section = DOCKER_README.read_text(encoding="utf-8").split("## Profile `grader`", 1)[1].split("\n## ", 1)[0]
    for cap in GRADER_CAPABILITIES:
        assert f"`{cap}`" in section, f"docker/README.md does not say why the grader needs {cap}"
    for option in ("seccomp=unconfined", "apparmor=unconfined", "no-new-privileges", '"0:0"', "--no-sandbox"):
        assert option in section, f"docker/README.md does not mention {option}"


def parse_volume(entry) -> tuple[str, str, bool]:
    """Short ('source:target[:options]') or long volume syntax -> (source, target, read_only)."""
    if isinstance(entry, dict):
        return str(entry.get("source", "")), str(entry["target"]), bool(entry.get("read_only"))
    parts = str(entry).split(":")
    if len(parts) == 1:
        return "", parts[0], False
    options = parts[2].split(",") if len(parts) > 2 else []
    return parts[0], parts[1], "ro" in options


def test_volume_parser():
    assert parse_volume("..:/course:ro") == ("..", "/course", True)
    assert parse_volume("../grades:/grades") == ("../grades", "/grades", False)
    assert parse_volume("data:/data:rw,z") == ("data", "/data", False)
    assert parse_volume({"type": "bind", "source": "..", "target": "/c", "read_only": True}) == ("..", "/c", True)


def under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def test_grader_mounts_the_course_read_only(services):
    workdir = [args for kw, args in dockerfile_instructions() if kw == "WORKDIR"][-1]
    mounts = [parse_volume(v) for v in services["grader"]["volumes"]]
    course = [m for m in mounts if m[0] == ".."]
    assert course == [("..", workdir, True)], "the grader must mount the repository, read-only, once"
    for source, target, read_only in mounts:
        if under(target, workdir):
            assert read_only, f"{source}:{target} makes part of the read-only course writable"


def test_grader_writes_to_a_separate_mount_in_the_ignored_grades_folder(services):
    grader = services["grader"]
    workdir = grader["working_dir"]
    writable = [(s, t) for s, t, read_only in map(parse_volume, grader["volumes"]) if not read_only]
    assert writable == [("../grades", "/grades")], writable
    assert "/grades/" in (ROOT / ".gitignore").read_text(encoding="utf-8").split(), "grades/ must stay out of git"
    env = env_of(grader)
    assert under(env["STREAMLAB_DATA_DIR"], "/grades"), "the grader's data folder must be writable"
    assert not under(env["STREAMLAB_DATA_DIR"], workdir)
    # the jars are baked into the image outside the read-only course, so they still resolve
    cache = env["STREAMLAB_CACHE_DIR"]
    assert cache == dockerfile_env()["STREAMLAB_CACHE_DIR"] and not under(cache, workdir)


def test_grader_examples_write_under_grades():
    examples = [line for path in (COMPOSE_FILE, DOCKER_README)
                for line in path.read_text(encoding="utf-8").splitlines() if "streamlab grade " in line
                and "--out" in line]
    assert len(examples) >= 2, "docker/README.md and compose.yaml must show how to run the grader"
    for line in examples:
        assert re.search(r"--out /grades/\S+", line), f"the grader can only write under /grades: {line.strip()}"


# --------------------------------------------------------------------------- Dockerfile


def test_dockerfile_from_is_pinned():
    args: dict[str, str] = {}
    stages: set[str] = set()
    froms = []
    for keyword, rest in dockerfile_instructions():
        if keyword == "ARG" and "=" in rest:
            key, value = rest.split("=", 1)
            args[key.strip()] = value.strip().strip('"')
        if keyword == "FROM":
            tokens = [t for t in rest.split() if not t.startswith("--platform")]
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), tokens[0])
            if len(tokens) >= 3 and tokens[1].upper() == "AS":
                stages.add(tokens[2])
            froms.append(image)
    assert froms, "no FROM"
    for image in froms:
        if image in stages:
            continue
        assert image_is_pinned(image), f"FROM {image} is not pinned"
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", froms[0]), "Python 3.11 on Debian bookworm"


def test_dockerfile_installs_python_packages_only_from_requirements():
    instructions = dockerfile_instructions()
    copies = [args for kw, args in instructions if kw == "COPY"]
    assert any(args.split()[0] == "requirements.txt" for args in copies), "COPY requirements.txt"
    pinned_names = requirement_names()
    installs = []
    for keyword, args in instructions:
        if keyword != "RUN":
            continue
        for cmd in shell_commands(args):
            if len(cmd) >= 2 and cmd[0] in ("pip", "pip3", "python", "python3", "uv"):
                words = cmd[cmd.index("install") :] if "install" in cmd else []
                if words:
                    installs.append(words[1:])
    assert installs, "no pip install in the Dockerfile"
    from_requirements = False
    for words in installs:
        options = [w for w in words if w.startswith("-")]
        operands = [w for w in words if not w.startswith("-")]
        if "-r" in words or "--requirement" in words:
            flag = "-r" if "-r" in words else "--requirement"
            target = words[words.index(flag) + 1]
            assert target.endswith("requirements.txt"), target
            operands.remove(target)
            from_requirements = True
        else:
            assert "--no-deps" in options, f"pip install {' '.join(words)} would resolve dependencies itself"
        for operand in operands:
            assert not re.search(r"[<>=!~]=|[<>]", operand), f"version pin {operand!r} duplicates requirements.txt"
            name = operand.lower().replace("_", "-")
            assert name not in pinned_names, f"{operand} is installed outside requirements.txt"
            assert operand.startswith(("/", ".")), f"pip install {operand}: only local paths besides -r"
    assert from_requirements, "pip install -r requirements.txt is missing"


def test_dockerfile_apt_hygiene():
    for keyword, args in dockerfile_instructions():
        if keyword == "RUN" and "apt-get install" in args:
            assert "--no-install-recommends" in args
            assert re.search(r"apt-get install -y|apt-get install .*-y\b", args)
            assert "apt-get update" in args, "update and install in the same layer"
            assert "rm -rf /var/lib/apt/lists" in args, "clean the apt lists in the same layer"
    assert "openjdk-17-jre-headless" in DOCKERFILE.read_text(encoding="utf-8")


def test_dockerfile_java_home_is_architecture_independent():
    java_home = dockerfile_env()["JAVA_HOME"]
    assert not re.search(r"amd64|arm64|x86_64|aarch64", java_home), java_home
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert re.search(rf"ln -s\b.*{re.escape(java_home)}", text), "JAVA_HOME must be a link to the real JRE"


def test_dockerfile_bakes_the_connector_and_runs_unprivileged():
    instructions = dockerfile_instructions()
    env = dockerfile_env()
    fetch_jars = next(i for i, (k, a) in enumerate(instructions) if k == "RUN" and "jars.fetch(" in a)
    assert "('connector', 'kafka', 'tools')" in instructions[fetch_jars][1], \
        "the connector, and the stack's Kafka (the image's kafka role): the broker's jars and its tools"
    copy_pins = instructions[fetch_jars - 1]
    assert copy_pins[0] == "COPY" and "streamlab/stack/jars.py" in copy_pins[1] and "streamlab/ " not in copy_pins[1], \
        "the jars are fetched from the pins alone: a change elsewhere in the package downloads nothing"
    package = next(i for i, (k, a) in enumerate(instructions) if k == "COPY" and a.startswith(". "))
    assert fetch_jars < package
    made = next(i for i, (k, a) in enumerate(instructions) if k == "RUN" and "make_for_quick_starts(" in a)
    archives = instructions[made][1]
    assert "(['spark-driver', 'kafka-broker'])" in archives, "the driver and the broker start from archives"
    assert "chmod -R a+rwX" in archives, "the cache is the image's user's too"
    copied = [a.split()[0] for k, a in instructions[fetch_jars + 1:made] if k == "COPY"]
    assert copied == ["streamlab/stack/", "streamlab/conf/"] and made < package, \
        "the archives are made from the stack alone: a change to the lessons, the grader or the classroom makes none"
    cache, workdir = env["STREAMLAB_CACHE_DIR"], [a for k, a in instructions if k == "WORKDIR"][-1]
    assert not cache.startswith(workdir + "/"), "the repository mount would hide a cache inside it"
    assert env["SPARK_HOME"].endswith("/site-packages/pyspark")
    assert env["PYSPARK_PYTHON"].startswith("/usr/local/bin/python")
    users = [args for kw, args in instructions if kw == "USER"]
    assert users and users[-1] not in ("root", "0"), "the image must end as a non-root user"


def test_entrypoint_roles_and_syntax():
    text = ENTRYPOINT.read_text(encoding="utf-8")
    assert "\r" not in text, "CRLF line endings break the shebang"
    assert os.access(ENTRYPOINT, os.X_OK), "docker/entrypoint.sh must be executable"
    for role in ("lab)", "kafka)", "spark-master)", "spark-worker)"):
        assert role in text
    assert "org.apache.spark.deploy.master.Master" in text
    assert "org.apache.spark.deploy.worker.Worker" in text
    bash = shutil.which("bash")
    if bash:
        subprocess.run([bash, "-n", str(ENTRYPOINT)], check=True)
    # JupyterLab opens on the course's first notebook.
    m = re.search(r'--LabApp\.default_url="?/lab/tree/([^"\s]+)', text)
    assert m and (ROOT / m.group(1)).exists(), "default_url must name a file of the course"
    assert "--ServerApp.allow_remote_access=False" in text
    entry = [args for kw, args in dockerfile_instructions() if kw == "ENTRYPOINT"][-1]
    assert "streamlab-entrypoint" in entry and "tini" in entry


# --------------------------------------------------------------------------- build context


def test_dockerignore_keeps_the_context_small_but_complete():
    patterns = dockerignore_patterns()
    for path in (".git/config", ".venv/bin/python", ".cache/jars/a.jar", ".streamlab/checkpoints/q/0",
                 "notebooks/01_stateless_vs_stateful.ipynb", "streamlab/__pycache__/cli.cpython-311.pyc"):
        assert dockerignore_excludes(path, patterns), f"{path} would be sent to the Docker daemon"
    # What building the image needs must survive .dockerignore ...
    for path in ("requirements.txt", "pyproject.toml", "README.md", "streamlab/__init__.py",
                 "streamlab/cli.py", "docker/entrypoint.sh"):
        assert not dockerignore_excludes(path, patterns), f"{path} is excluded by .dockerignore"
    # ... in particular every file the Dockerfile names in a COPY.
    for keyword, args in dockerfile_instructions():
        if keyword != "COPY" or "--from" in args:
            continue
        sources = [s for s in args.split()[:-1] if not s.startswith("--")]
        for source in sources:
            path = source.rstrip("/")
            if "*" in path or path in ("", "."):
                continue
            probe = f"{path}/__init__.py" if (ROOT / path).is_dir() or path == "streamlab" else path
            assert not dockerignore_excludes(probe, patterns), f"COPY {source} is excluded by .dockerignore"


# --------------------------------------------------------------------------- docker compose itself


def test_docker_compose_accepts_the_file():
    """`docker compose config` needs the CLI plugin but no engine."""
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("docker CLI not installed")
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True)
    if probe.returncode != 0:
        detail = (probe.stderr or probe.stdout).strip().splitlines()
        pytest.skip("docker compose plugin not installed: " + (detail[0] if detail else ""))
    for profile_args in ([], ["--profile", "cluster", "--profile", "grader"]):
        result = subprocess.run(
            [docker, "compose", "-f", str(COMPOSE_FILE), *profile_args, "config", "--quiet"],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert result.returncode == 0, result.stderr
