"""Static checks of the files that run `streamlab grade --shard` on other engines: the Kubernetes Indexed Job
(docker/k8s/grade-job.yaml) and the GitHub Actions matrix (.github/workflows/grade.yml). No cluster or runner
is reached: the manifest is checked field by field against the Kubernetes API's own models (the official
Python client's, which list every field and type of each object and refuse a missing required one), and both
are checked against what the grader needs and against docker/compose.yaml's `grader` and `kafka` services."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from streamlab.grading import resolve_lab

ROOT = Path(__file__).resolve().parents[1]
JOB_FILE = ROOT / "docker" / "k8s" / "grade-job.yaml"
MERGE_FILE = ROOT / "docker" / "k8s" / "merge-job.yaml"
WORKFLOW_FILE = ROOT / ".github" / "workflows" / "grade.yml"
COMPOSE = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
LISTENER_KEYS = {"STREAMLAB_KAFKA_LISTENERS", "STREAMLAB_KAFKA_ADVERTISED_LISTENERS", "STREAMLAB_KAFKA_PROTOCOLS",
                 "STREAMLAB_KAFKA_VOTERS"}   # a pod's Kafka listens on localhost, compose's on its network


# --------------------------------------------------------------------------- Kubernetes' models as the schema

def model_problems(data, type_name: str, where: str) -> list[str]:
    """Where ``data`` does not fit the Kubernetes API type ``type_name`` (unknown fields, wrong types)."""
    from kubernetes import client

    if type_name.startswith("List["):
        if not isinstance(data, list):
            return [f"{where}: a list expected, not {type(data).__name__}"]
        return [p for i, item in enumerate(data) for p in model_problems(item, type_name[5:-1], f"{where}[{i}]")]
    if type_name.startswith("Dict["):
        if not isinstance(data, dict):
            return [f"{where}: a mapping expected"]
        value_type = type_name[5:-1].split(", ", 1)[1]
        return [p for k, v in data.items() for p in model_problems(v, value_type, f"{where}.{k}")]
    simple = {"str": str, "int": int, "bool": bool, "float": (int, float), "datetime": str}
    if type_name in simple:
        ok = isinstance(data, simple[type_name]) and not (type_name == "int" and isinstance(data, bool))
        return [] if ok else [f"{where}: {type_name} expected, not {data!r}"]
    if type_name == "object":
        return []
    model = getattr(client, type_name)
    if not isinstance(data, dict):
        return [f"{where}: a {type_name} object expected"]
    fields = {json_key: name for name, json_key in model.attribute_map.items()}
    found = []
    for key, value in data.items():
        if key not in fields:
            found.append(f"{where}: {type_name} has no field {key!r}")
        else:
            found += model_problems(value, model.openapi_types[fields[key]], f"{where}.{key}")
    return found


def as_model(data: dict, type_name: str):
    """Build the client's model from ``data``: a required field missing raises ValueError."""
    from kubernetes.client import ApiClient

    return ApiClient()._ApiClient__deserialize(data, type_name)


@pytest.fixture(scope="module")
def manifests() -> dict[str, dict]:
    pytest.importorskip("kubernetes", reason="pip install -r requirements.txt (the kubernetes client's models)")
    docs = [d for d in yaml.safe_load_all(JOB_FILE.read_text()) if d]
    return {d["kind"]: d for d in docs}


def test_the_manifests_fit_the_kubernetes_api(manifests):
    assert set(manifests) == {"Namespace", "Job", "NetworkPolicy"}
    assert (manifests["Job"]["apiVersion"], manifests["NetworkPolicy"]["apiVersion"]) == \
        ("batch/v1", "networking.k8s.io/v1")
    for kind, type_name in (("Namespace", "V1Namespace"), ("Job", "V1Job"), ("NetworkPolicy", "V1NetworkPolicy")):
        assert model_problems(manifests[kind], type_name, kind) == []
        assert as_model(manifests[kind], type_name).metadata.name
    merge = yaml.safe_load(MERGE_FILE.read_text())
    assert model_problems(merge, "V1Job", "merge Job") == [] and as_model(merge, "V1Job").metadata.name


def test_everything_is_in_a_namespace_that_admits_the_sandboxs_privileges(manifests):
    """The grading pods add SYS_ADMIN and run unconfined: Pod Security admits that only at "privileged". In a
    namespace enforcing "baseline" (a common default) the Job made no pod at all."""
    namespace = manifests["Namespace"]["metadata"]
    assert namespace["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    merge = yaml.safe_load(MERGE_FILE.read_text())
    for kind, doc in [("Job", manifests["Job"]), ("NetworkPolicy", manifests["NetworkPolicy"]), ("merge", merge)]:
        assert doc["metadata"]["namespace"] == namespace["name"], kind


# The fields the manifests use and the first Kubernetes version with them on by default.
FIELDS_SINCE = {"appArmorProfile": (1, 30), "backoffLimitPerIndex": (1, 29), "restartPolicy: Always": (1, 29)}


def test_the_stated_minimum_kubernetes_is_the_one_its_fields_need():
    text = JOB_FILE.read_text()
    used = [since for field, since in FIELDS_SINCE.items() if field in text]
    needed = max(used)
    stated = re.search(r"Kubernetes (\d+)\.(\d+) or later", text)
    assert stated and tuple(map(int, stated.groups())) == needed, f"the file must say Kubernetes {needed} or later"
    guide = (ROOT / "docs" / "instructors.md").read_text()
    assert f"**Kubernetes** ({needed[0]}.{needed[1]} or later)" in guide


def test_the_merge_job_merges_the_shards_of_the_grading_job(manifests):
    merge = yaml.safe_load(MERGE_FILE.read_text())
    pod = merge["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    _, grading_pod, grader, _, env = _job(manifests)
    assert container["image"] == grader["image"]
    assert {e["name"]: e["value"] for e in container["env"]}["LAB"] == env["LAB"]
    script = container["args"][2]
    assert script == 'exec streamlab grade merge /grades/"$LAB"/shard-* --out "/grades/$LAB/merged"'
    assert pod["volumes"][0] == grading_pod["volumes"][0], "the grading Job's volume"
    security = container["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"]} and security["allowPrivilegeEscalation"] is False
    assert merge["spec"]["template"]["metadata"]["labels"] == manifests["NetworkPolicy"]["spec"]["podSelector"][
        "matchLabels"], "no network for it either"


def test_the_schema_check_catches_mistakes():
    pytest.importorskip("kubernetes", reason="pip install -r requirements.txt")
    job = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"completionmode": "Indexed", "completions": "4",
                                                             "template": {"spec": {"containers": [{"image": "x"}]}}}}
    found = model_problems(job, "V1Job", "Job")
    assert any("no field 'completionmode'" in p for p in found) and any("int expected" in p for p in found)
    with pytest.raises(ValueError, match="name"):   # a container without its required name
        as_model(job, "V1Job")


def _job(manifests):
    job = manifests["Job"]
    pod = job["spec"]["template"]["spec"]
    grader = next(c for c in pod["containers"] if c["name"] == "grader")
    kafka = next(c for c in pod["initContainers"] if c["name"] == "kafka")
    return job, pod, grader, kafka, {e["name"]: e["value"] for e in grader["env"]}


def test_an_indexed_job_with_one_pod_per_shard(manifests):
    job, pod, grader, _, env = _job(manifests)
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == int(env["SHARDS"]) >= 1
    assert pod["restartPolicy"] == "Never"   # a failed shard is retried as a new pod, per index
    assert spec["backoffLimitPerIndex"] >= 1 and spec["maxFailedIndexes"] <= spec["completions"]
    assert resolve_lab(env["LAB"]) == env["LAB"], "LAB names a lab of this course"
    assert pod["automountServiceAccountToken"] is False


def test_the_pod_grades_its_shard(manifests):
    _, _, grader, _, env = _job(manifests)
    assert "command" not in grader, "the image's entrypoint runs the command, as in compose.yaml"
    assert grader["args"][:2] == ["/bin/sh", "-c"]
    script = grader["args"][2]
    assert "K=$((JOB_COMPLETION_INDEX + 1))" in script    # the completion index counts from 0, shards from 1
    words = shlex.split(script.split("exec ", 1)[1])
    assert words[:2] == ["streamlab", "grade"] and words[2:4] == ["$LAB", "/submissions/$LAB"]
    assert words[words.index("--shard") + 1] == "$K/$SHARDS"
    assert words[words.index("--out") + 1] == "/grades/$LAB/shard-$K"   # one folder per shard, for the merge


def test_submissions_and_grades_on_a_volume(manifests):
    _, pod, grader, kafka, _ = _job(manifests)
    volumes = {v["name"]: v for v in pod["volumes"]}
    for container in (grader, kafka):
        for mount in container["volumeMounts"]:
            assert mount["name"] in volumes, mount
    mounts = {m["mountPath"]: m for m in grader["volumeMounts"]}
    assert mounts["/course"].get("readOnly") and mounts["/submissions"].get("readOnly")
    assert not mounts["/grades"].get("readOnly")
    assert {mounts[p]["name"] for p in ("/course", "/submissions", "/grades")} == {"grading"}
    assert "persistentVolumeClaim" in volumes["grading"]
    env = {e["name"]: e["value"] for e in grader["env"]}
    assert mounts[env["STREAMLAB_DATA_DIR"]]["name"] in volumes


def test_the_sandbox_has_the_grader_profiles_privileges(manifests):
    _, _, grader, _, _ = _job(manifests)
    context, compose = grader["securityContext"], COMPOSE["services"]["grader"]
    assert compose["user"] == f"{context['runAsUser']}:{context['runAsGroup']}" == "0:0"
    assert context["capabilities"]["drop"] == compose["cap_drop"] == ["ALL"]
    assert sorted(context["capabilities"]["add"]) == sorted(compose["cap_add"])
    assert context["seccompProfile"]["type"] == context["appArmorProfile"]["type"] == "Unconfined"
    assert "seccomp=unconfined" in compose["security_opt"] and "apparmor=unconfined" in compose["security_opt"]
    assert context["allowPrivilegeEscalation"] is False and "no-new-privileges:true" in compose["security_opt"]
    memory = compose["deploy"]["resources"]["limits"]["memory"]
    assert grader["resources"]["limits"]["memory"] == memory.replace("m", "Mi")


def test_each_pod_has_the_courses_kafka(manifests):
    _, _, grader, kafka, env = _job(manifests)
    assert kafka["restartPolicy"] == "Always", "a native sidecar: started first, stopped when the grader ends"
    assert "startupProbe" in kafka, "the grader starts once Kafka answers"
    compose_kafka = COMPOSE["services"]["kafka"]
    assert kafka["image"] == compose_kafka["image"] == grader["image"], "the course image, as the grader's"
    assert kafka["args"] == compose_kafka["command"] == ["kafka"]
    pod_env = {e["name"]: str(e["value"]) for e in kafka["env"]}
    compose_env = {k: str(v) for k, v in compose_kafka["environment"].items()}
    assert {k: v for k, v in pod_env.items() if k not in LISTENER_KEYS} == \
        {k: v for k, v in compose_env.items() if k not in LISTENER_KEYS}
    listeners = dict(re.findall(r"(\w+)://([^,]+)", pod_env["STREAMLAB_KAFKA_ADVERTISED_LISTENERS"]))
    assert env["KAFKA_BOOTSTRAP_SERVERS"] == listeners["DOCKER"]
    assert env["STREAMLAB_KAFKA_SANDBOX_SERVERS"] == listeners["SANDBOX"]
    assert "SANDBOX:SASL_PLAINTEXT" in pod_env["STREAMLAB_KAFKA_PROTOCOLS"]
    shared = {k: v for k, v in COMPOSE["x-course-env"].items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    assert {k: env[k] for k in shared} == {k: str(v) for k, v in shared.items()}


def test_the_grading_pods_have_no_network(manifests):
    job, policy = manifests["Job"], manifests["NetworkPolicy"]
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert sorted(policy["spec"]["policyTypes"]) == ["Egress", "Ingress"]
    assert "egress" not in policy["spec"] and "ingress" not in policy["spec"]   # none allowed


# --------------------------------------------------------------------------- GitHub Actions

@pytest.fixture(scope="module")
def workflow() -> dict:
    data = yaml.safe_load(WORKFLOW_FILE.read_text())
    data["on"] = data.pop(True, data.get("on"))   # YAML 1.1 reads the key `on` as true
    return data


def test_the_workflow_is_started_by_hand_with_a_lab_and_a_folder(workflow):
    assert set(workflow["on"]) == {"workflow_dispatch"}, "grading starts when the instructor says so"
    inputs = workflow["on"]["workflow_dispatch"]["inputs"]
    assert inputs["lab"]["required"] and inputs["submissions"]["required"] and not inputs["roster"]["required"]
    assert resolve_lab(inputs["lab"]["default"])
    assert workflow["permissions"] == {"contents": "read"}


def test_one_matrix_job_per_shard(workflow):
    grade = workflow["jobs"]["grade"]
    shards = int(workflow["env"]["SHARDS"])
    assert grade["strategy"]["matrix"]["shard"] == list(range(1, shards + 1))
    assert grade["strategy"]["fail-fast"] is False
    run = next(s["run"] for s in grade["steps"] if "run" in s and "streamlab grade" in s["run"])
    assert "--profile grader run --rm grader" in run, "each shard runs in compose's grader (sandbox, own Kafka)"
    step = next(s for s in grade["steps"] if "run" in s and "streamlab grade" in s["run"])
    assert step["env"]["SHARD"] == "${{ matrix.shard }}"
    words = shlex.split(run.split("grader streamlab", 1)[1])
    assert words[words.index("--shard") + 1] == "$SHARD/$SHARDS"
    assert words[words.index("--out") + 1] == "/grades/shard-$SHARD"
    upload = next(s for s in grade["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "grades/shard-${{ matrix.shard }}"


def test_the_merge_job_takes_every_shard(workflow):
    merge = workflow["jobs"]["merge"]
    assert merge["needs"] == "grade"
    download = next(s for s in merge["steps"] if s.get("uses", "").startswith("actions/download-artifact@"))
    assert download["with"] == {"pattern": "shard-*", "path": "grades"}
    run = next(s["run"] for s in merge["steps"] if "run" in s and "grade merge" in s["run"])
    assert "streamlab grade merge /grades/shard-* --out /grades/merged" in run and "--no-deps" in run


def test_every_step_is_well_formed(workflow):
    services = COMPOSE["services"]
    assert "grader" in services["grader"]["profiles"]
    for name, job in workflow["jobs"].items():
        assert job["runs-on"] == "ubuntu-latest"
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), (name, step)
            if "uses" in step:
                assert re.fullmatch(r"actions/[\w-]+@v\d+", step["uses"]), step["uses"]


# Each action at the first major that runs on Node.js 24: GitHub's runners retired Node 20, and an action
# still on it stops working (or warns on every run). Composite actions (upload-pages-artifact) at the major
# whose nested actions do.
NODE24_MAJORS = {"checkout": 5, "setup-python": 6, "setup-java": 5, "setup-node": 5, "upload-artifact": 6,
                 "download-artifact": 7, "configure-pages": 6, "upload-pages-artifact": 5, "deploy-pages": 5}
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
SUBMISSION_NEEDS_MB = 2048  # a submission's kernel, its Spark and the grader's checks, measured (docs/instructors.md)


def _steps(path):
    for job in yaml.safe_load(path.read_text())["jobs"].values():
        yield from job["steps"]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_a_major_that_runs_on_node_24(path):
    for step in _steps(path):
        if "uses" in step:
            name, major = re.fullmatch(r"actions/([\w-]+)@v(\d+)", step["uses"]).groups()
            assert name in NODE24_MAJORS, f"{step['uses']}: which major runs on Node 24? add it to NODE24_MAJORS"
            assert int(major) >= NODE24_MAJORS[name], f"{step['uses']} runs on Node 20, which runners retired"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_form_inputs_reach_the_shell_through_env_never_pasted_in(path):
    """`${{ inputs.x }}` in a `run:` is pasted into the script before the shell reads it: a folder named
    `x"; curl ... #` would run. Through `env:` it is a value."""
    for step in _steps(path):
        assert not re.search(r"\$\{\{\s*(github\.event\.)?inputs\.", step.get("run", "")), step["run"]


def test_a_rerun_shard_replaces_its_artifact(workflow):
    """"Re-run failed jobs" uploads the shard's artifact under the same name; without `overwrite` the re-run
    fails on the name conflict (upload-artifact v4 and later)."""
    for name, job in workflow["jobs"].items():
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/upload-artifact@"):
                assert step["with"].get("overwrite") is True, (name, step["with"]["name"])


def test_the_grader_container_has_the_memory_for_its_jobs(workflow):
    """--jobs N runs N submissions at once in one grader container: each needs about 2 GB."""
    run = next(s["run"] for s in workflow["jobs"]["grade"]["steps"] if "run" in s and "streamlab grade" in s["run"])
    jobs = int(re.search(r"--jobs (\d+)", run).group(1))
    limit_mb = int(COMPOSE["services"]["grader"]["deploy"]["resources"]["limits"]["memory"].rstrip("m"))
    assert limit_mb >= jobs * SUBMISSION_NEEDS_MB, f"--jobs {jobs} in a {limit_mb} MB grader container"
