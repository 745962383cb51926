"""The instructor's side of the classroom: ``streamlab classroom up|down|status|hand-out|collect|return``.

``up`` makes (or finds) the class's Docker network and Kafka container, then starts JupyterHub on this machine
(``jupyterhub -f jupyterhub_config.py``, its proxy ``configurable-http-proxy``) with DockerSpawner: each student's
server is the course image in a container of its own, with a memory and CPU limit, the student's files on a volume
of their own (``streamlab-classroom-work-<name>``). Its state (the hub's database, log, pid and the token of the
instructor's tools) is in ``.streamlab/classroom/`` (``--dir``). Run twice, it says where the class already runs.

Labs go out and come in through the hub: ``hand-out`` writes the released lab into each running student's
``labs/LAB/`` with the Jupyter contents API (never over a file the student has), ``collect`` reads each student's
``submitted/LAB/LAB.ipynb`` (what ``streamlab submit LAB`` copies there) into ``DIR/submitted/<student>/LAB/``,
the layout ``streamlab grade`` reads; ``return`` writes each feedback page into the student's ``feedback/``. No
folder is shared between students' containers (nbgrader's file exchange would need one, writable by all).
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

from websocket import WebSocketTimeoutException, create_connection

from ..stack import translations
from ..stack.docker_images import COURSE_IMAGE
from ..stack.paths import data_dir, project_root
from . import ADMIN_SERVERS, CLASS_PORT, KAFKA_ALIAS, KAFKA_CONTAINER, NAME_PATTERN, NETWORK

CONFIG = Path(__file__).with_name("jupyterhub_config.py")
KAFKA_VOLUME = "streamlab-classroom-kafka"
STUDENT_MEMORY = "3g"   # measured: see docs/instructors.md, "A classroom on one server"
STUDENT_CPUS = 1.0
HUB_START_S = 60
SERVER_START_S = 240
CELL_S = 600  # at most, for one cell of a notebook run through a student's server
KERNEL_READY_S = 120  # at most, for a student's kernel to answer its first request (a restarted one included)


class ClassroomError(RuntimeError):
    """Something the instructor can fix; the message says what."""


def state_dir(given: Path | None = None) -> Path:
    return Path(given) if given else data_dir() / "classroom"


def _docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    if not shutil.which("docker"):
        raise ClassroomError("the classroom runs each student's server in a Docker container, and `docker` is not "
                             "installed (Debian: apt-get install -y docker.io)")
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode:
        raise ClassroomError(f"docker {' '.join(args[:2])} failed: {(proc.stderr or proc.stdout).strip()[-800:]}")
    return proc


def read_roster(path: Path) -> list[str]:
    """The names in a roster file: one per line, ``#`` comments; each a hub user and a Kafka principal."""
    names = [line.split("#")[0].strip() for line in Path(path).read_text().splitlines()]
    names = [n for n in names if n]
    wrong = [n for n in names if not re.fullmatch(NAME_PATTERN, n)]
    if wrong:
        raise ClassroomError(f"{path}: names must be lowercase letters, digits and _ , starting with a letter "
                             f"(they name containers and Kafka principals): {', '.join(map(repr, wrong[:5]))}")
    if len(set(names)) != len(names):
        raise ClassroomError(f"{path}: a name appears twice")
    return names


def _saved(directory: Path) -> dict:
    try:
        return json.loads((directory / "state.json").read_text())
    except (OSError, ValueError):
        return {}


def _hub_running(saved: dict) -> bool:
    pid = saved.get("pid")
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    cmdline = Path(f"/proc/{pid}/cmdline")
    return not cmdline.exists() or b"jupyterhub" in cmdline.read_bytes()


def _port_free(ip: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: a closed connection's is free
        try:
            sock.bind((ip, port))
            return True
        except OSError:
            return False


def free_port(ip: str = "127.0.0.1") -> int:
    """A PORT on ``ip`` with PORT+1 and PORT+2 free too: the three ports a classroom uses (``up``)."""
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind((ip, 0))
            port = sock.getsockname()[1]
        if all(_port_free(ip, port + k) for k in range(3)):
            return port
    raise ClassroomError("no three free ports in a row")


def _network_gateway() -> str:
    if _docker("network", "inspect", NETWORK, check=False).returncode:
        _docker("network", "create", "--label", "streamlab.classroom=network", NETWORK)
    config = json.loads(_docker("network", "inspect", NETWORK).stdout)[0]["IPAM"]["Config"]
    return config[0]["Gateway"]


def _start_kafka(image: str, say) -> None:
    state = _docker("inspect", "-f", "{{.State.Running}}", KAFKA_CONTAINER, check=False)
    if state.returncode:
        say("The class's Kafka: a new container (its topics on the volume streamlab-classroom-kafka) ...")
        listeners = f"PLAINTEXT://{ADMIN_SERVERS},CONTROLLER://127.0.0.1:9093,SANDBOX://0.0.0.0:{CLASS_PORT}"
        _docker("run", "-d", "--name", KAFKA_CONTAINER, "--network", NETWORK, "--network-alias", KAFKA_ALIAS,
                "--label", "streamlab.classroom=kafka", "--memory", "1g", "--restart", "unless-stopped",
                "-v", f"{KAFKA_VOLUME}:/data/streamlab/kafka",
                "-v", f"{project_root() / 'streamlab'}:/course/streamlab:ro",  # the instructor's code, as the hub's
                "-e", "STREAMLAB_KAFKA_HEAP=512m",
                "-e", f"STREAMLAB_KAFKA_LISTENERS={listeners}",
                "-e", f"STREAMLAB_KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://{ADMIN_SERVERS},"
                      f"SANDBOX://127.0.0.1:{CLASS_PORT}",
                "-e", "STREAMLAB_KAFKA_PROTOCOLS=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SANDBOX:SASL_PLAINTEXT",
                "-e", "STREAMLAB_KAFKA_INTER_BROKER_LISTENER=PLAINTEXT",
                "-e", "STREAMLAB_KAFKA_VOTERS=1@127.0.0.1:9093",
                image, "kafka")
    elif state.stdout.strip() != "true":
        say("The class's Kafka: starting its container again ...")
        _docker("start", KAFKA_CONTAINER)
    wait_for_kafka()


def wait_for_kafka(timeout_s: float = 120) -> None:
    """Return once the class's broker answers (asked inside its container), or say why not."""
    deadline = time.monotonic() + timeout_s
    probe = "import sys; from streamlab.stack import broker; sys.exit(0 if broker.ping('%s', 5)[0] else 1)"
    while _docker("exec", KAFKA_CONTAINER, "python", "-c", probe % ADMIN_SERVERS, check=False).returncode:
        if time.monotonic() > deadline:
            logs = _docker("logs", "--tail", "30", KAFKA_CONTAINER, check=False)
            raise ClassroomError(f"the class's Kafka did not answer within {timeout_s:g} s; its last lines:\n"
                                 f"{(logs.stdout + logs.stderr)[-2000:]}")
        time.sleep(2)


def up(roster: Path, *, teacher: str = "teacher", ip: str = "0.0.0.0", port: int = 8000,
       memory: str = STUDENT_MEMORY, cpus: float = STUDENT_CPUS, image: str = COURSE_IMAGE,
       directory: Path | None = None, language: str = "en", say=print) -> dict:
    """Start the classroom (or say where it runs). Returns its state: url, pid, token, dir. ``language``: the class's,
    "en" or "zh" (Simplified Chinese: each server opens on zh/notebooks/00_setup.ipynb, and the labs handed out are
    zh/labs/, graded as the English are)."""
    directory = state_dir(directory)
    saved = _saved(directory)
    if _hub_running(saved):
        say(f"The classroom is already running at {saved['url']} (hub pid {saved['pid']}, since {saved['since']}); "
            f"nothing was started again. `streamlab classroom down` stops it.")
        return saved
    names = read_roster(roster)
    if not re.fullmatch(NAME_PATTERN, teacher):
        raise ClassroomError(f"the teacher's name {teacher!r} must be lowercase letters, digits and _")
    for what, number in (("the students' address", port), ("the hub's API", port + 1), ("the proxy's API", port + 2)):
        if not _port_free(ip if what == "the students' address" else "127.0.0.1", number):
            raise ClassroomError(f"port {number} ({what}) is in use on this machine: choose another with --port "
                                 f"(the classroom uses PORT, PORT+1 and PORT+2)")
    if not shutil.which("configurable-http-proxy"):
        raise ClassroomError("JupyterHub's proxy is not installed: npm install -g configurable-http-proxy@5.3.0")
    if _docker("image", "inspect", image, check=False).returncode:
        raise ClassroomError(f"there is no image {image}: build it with `docker compose -f docker/compose.yaml "
                             f"build` (or `python3 streamlab/stack/docker_images.py images`)")
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)  # the token of the instructor's tools and the hub's database
    (directory / "roster.txt").write_text("".join(f"{n}\n" for n in sorted({*names, teacher})))
    gateway = _network_gateway()
    _start_kafka(image, say)
    token = saved.get("token") or secrets.token_hex(32)
    environment = {**os.environ,
                   "STREAMLAB_CLASSROOM_DIR": str(directory),
                   "STREAMLAB_CLASSROOM_ROSTER": str(directory / "roster.txt"),
                   "STREAMLAB_CLASSROOM_TEACHER": teacher, "STREAMLAB_CLASSROOM_IP": ip,
                   "STREAMLAB_CLASSROOM_PORT": str(port), "STREAMLAB_CLASSROOM_HUB_IP": gateway,
                   "STREAMLAB_CLASSROOM_TOKEN": token, "STREAMLAB_CLASSROOM_IMAGE": image,
                   "STREAMLAB_CLASSROOM_MEMORY": memory, "STREAMLAB_CLASSROOM_CPUS": str(cpus),
                   "STREAMLAB_CLASSROOM_COURSE": str(project_root()), "STREAMLAB_CLASSROOM_LANGUAGE": language}
    hub = shutil.which("jupyterhub", path=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    if not hub:
        raise ClassroomError("JupyterHub is not installed here: pip install -r requirements.txt")
    log = open(directory / "hub.log", "ab")
    process = subprocess.Popen([hub, "-f", str(CONFIG)], cwd=directory, env=environment, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://{'127.0.0.1' if ip in ('0.0.0.0', '') else ip}:{port}"
    deadline = time.monotonic() + HUB_START_S
    while not _answers(f"{url}/hub/health"):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            tail = (directory / "hub.log").read_text(errors="replace")[-2500:]
            raise ClassroomError(f"JupyterHub did not start (its log, {directory / 'hub.log'}, ends):\n{tail}")
        time.sleep(0.5)
    saved = {"url": url, "pid": process.pid, "token": token, "teacher": teacher, "port": port, "language": language,
             "since": time.strftime("%Y-%m-%d %H:%M:%S"), "dir": str(directory)}
    (directory / "state.json").write_text(json.dumps(saved))
    os.chmod(directory / "state.json", 0o600)
    say(f"The classroom runs at {url} for {len(names)} students and the teacher {teacher!r}. Each signs in with "
        f"their roster name and chooses a password the first time. Each server: {memory} of memory, {cpus:g} CPU.")
    return saved


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3):
            return True
    except (urllib.error.URLError, OSError):
        return False


def down(*, directory: Path | None = None, say=print) -> None:
    """Stop the hub, every student's server and the class's Kafka. The students' volumes and the class's
    topics stay (``docker volume ls``); ``up`` again finds them."""
    directory = state_dir(directory)
    saved = _saved(directory)
    if _hub_running(saved):
        os.killpg(saved["pid"], signal.SIGTERM)
        deadline = time.monotonic() + 30
        while _hub_running(saved) and time.monotonic() < deadline:
            time.sleep(0.3)
        if _hub_running(saved):
            os.killpg(saved["pid"], signal.SIGKILL)
    proxy = directory / "proxy.pid"
    if proxy.exists():
        try:
            os.kill(int(proxy.read_text().strip()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
        proxy.unlink(missing_ok=True)
    if shutil.which("docker"):
        names = _docker("ps", "-aq", "--filter", "name=^streamlab-classroom-", check=False).stdout.split()
        if names:
            _docker("rm", "-f", *names, timeout=180)
        _docker("network", "rm", NETWORK, check=False)
    (directory / "state.json").unlink(missing_ok=True)
    say("The classroom is stopped. The students' files (volumes streamlab-classroom-work-<name>) and the class's "
        "topics (streamlab-classroom-kafka) are kept.")


class Hub:
    """The hub's REST API and the students' servers through it, as the instructor's tools."""

    def __init__(self, directory: Path | None = None):
        saved = _saved(state_dir(directory))
        if not _hub_running(saved):
            raise ClassroomError("the classroom is not running: start it with `streamlab classroom up`")
        self.url, self.token, self.teacher = saved["url"], saved["token"], saved["teacher"]
        self.language = saved.get("language", "en")  # the class's: the labs it hands out

    def request(self, method: str, path: str, body: dict | None = None, timeout: float = 60):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Authorization": f"token {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as answer:
                text = answer.read()
                return answer.status, (json.loads(text) if text else None)
        except urllib.error.HTTPError as err:
            return err.code, None

    def users(self) -> dict[str, dict]:
        status, users = self.request("GET", "/hub/api/users")
        if status != 200:
            raise ClassroomError(f"the hub refused its users' list ({status})")
        return {u["name"]: u for u in users}

    def running(self) -> list[str]:
        return sorted(name for name, u in self.users().items() if (u.get("servers") or {}).get("", {}).get("ready"))

    def start(self, name: str) -> None:
        """Start ``name``'s server (making the user if need be) and wait until it is ready."""
        if self.request("GET", f"/hub/api/users/{name}")[0] == 404:
            self.request("POST", f"/hub/api/users/{name}")
        status, _ = self.request("POST", f"/hub/api/users/{name}/server")
        if status not in (201, 202, 400):  # 400: it runs already
            raise ClassroomError(f"the hub could not start {name}'s server ({status}): see its log, hub.log")
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            status, user = self.request("GET", f"/hub/api/users/{name}")
            server = (user or {}).get("servers", {}).get("", {})
            if server.get("ready"):
                return
            if status == 200 and not server and not user.get("pending"):
                raise ClassroomError(f"{name}'s server stopped while starting: see the hub's log")
            time.sleep(1)
        raise ClassroomError(f"{name}'s server was not ready within {SERVER_START_S} s")

    def contents(self, name: str, path: str, body: dict | None = None):
        quoted = urllib.parse.quote(path)
        return self.request("PUT" if body else "GET", f"/user/{name}/api/contents/{quoted}", body)

    def kernel(self, name: str, path: str) -> ServerKernel:
        """A new kernel in ``name``'s server, for the notebook at ``path`` (its folder is the kernel's)."""
        return ServerKernel(self, name, path)

    def put_file(self, name: str, path: str, content, *, notebook: bool) -> int:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            self.contents(name, "/".join(parts[:depth]), {"type": "directory"})
        body = {"type": "notebook", "format": "json", "content": content} if notebook else \
            {"type": "file", "format": "text", "content": content}
        return self.contents(name, path, body)[0]


class ServerKernel:
    """A kernel in a student's server, reached through the hub's proxy with the instructor's token: code run in
    it runs as the student, with the student's Kafka principal (the class's tests and its load benchmark)."""

    def __init__(self, classroom: Hub, user: str, path: str):
        self.user = user
        status, session = classroom.request("POST", f"/user/{user}/api/sessions",
                                            {"path": path, "type": "notebook", "kernel": {"name": "python3"}})
        if status != 201:
            raise ClassroomError(f"{user}'s server did not start a kernel for {path} ({status})")
        # A session id of its own, as JupyterLab sends: without one the server takes every connection for the same
        # client and may hand a new one the message streams it kept for the last (its log: "No session ID
        # specified", then "Starting buffering").
        self.session = uuid.uuid4().hex
        url = (classroom.url.replace("http", "ws", 1) +
               f"/user/{user}/api/kernels/{session['kernel']['id']}/channels?session_id={self.session}")
        self.ws = create_connection(url, header=[f"Authorization: token {classroom.token}"], timeout=CELL_S)
        self._wait_until_ready()

    def _send(self, msg_type: str, content: dict) -> str:
        msg_id = uuid.uuid4().hex
        self.ws.send(json.dumps({
            "header": {"msg_id": msg_id, "username": self.user, "session": self.session, "date": "",
                       "msg_type": msg_type, "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [], "content": content}))
        return msg_id

    def _next(self, deadline: float) -> dict | None:
        """The next message from the kernel, or None when ``deadline`` (time.monotonic()) has passed. The server's
        pings, every 30 s, are answered inside ``recv`` and never end a wait: the deadline does."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        self.ws.settimeout(min(remaining, 5))
        try:
            return json.loads(self.ws.recv())
        except WebSocketTimeoutException:
            return {}

    def _wait_until_ready(self) -> None:
        """Until the kernel answers a kernel_info_request, asked again every 2 s, on both of its channels: the reply
        (shell) and the status it publishes about the request (IOPub). A request sent to a kernel that is still
        (re)starting can be lost with no answer ever coming (a kernel restarted after its memory limit, connected to
        44 ms after the restart began: the test's next cell waited 38 minutes, until stopped by hand); and the
        server's IOPub connection to a restarted kernel can come up after its shell one (a fresh clone's fast tier,
        4 December: the next cell's reply and idle status came, its printed 42 did not). Jupyter's server waits for
        both the same way before it opens a connection (``nudge``, jupyter_server/services/kernels/connection/
        channels.py), but not for a kernel it last saw busy, as the one killed under a cell."""
        deadline, asked, answered = time.monotonic() + KERNEL_READY_S, set(), set()
        while time.monotonic() < deadline:
            asked.add(self._send("kernel_info_request", {}))
            again = min(time.monotonic() + 2, deadline)
            while (message := self._next(again)) is not None:
                if message.get("parent_header", {}).get("msg_id") in asked:
                    answered.add("shell" if message.get("msg_type") == "kernel_info_reply" else
                                 "iopub" if message.get("msg_type") == "status" else "other")
                if {"shell", "iopub"} <= answered:
                    return
        raise ClassroomError(f"{self.user}'s kernel did not answer within {KERNEL_READY_S} s: see the log of "
                             f"{self.user}'s server (`docker logs streamlab-classroom-{self.user}`)")

    def run(self, code: str, timeout: float = CELL_S) -> tuple[str, str]:
        """(status, what it printed, or the error): one cell, to its reply. Status "died" when the kernel died
        under it (its memory limit, or it was stopped), "timeout" when no reply came within ``timeout`` seconds."""
        msg_id = self._send("execute_request", {"code": code, "silent": False, "store_history": True,
                                                "user_expressions": {}, "allow_stdin": False,
                                                "stop_on_error": True})
        deadline = time.monotonic() + timeout
        printed, status, idle = [], None, False
        while status is None or not idle:
            message = self._next(deadline)
            if message is None:
                return "timeout", "".join(printed) + f"\nno reply from the kernel within {timeout:.0f} s"
            if not message:
                continue
            if message["msg_type"] == "status" and message["content"]["execution_state"] in ("dead", "restarting"):
                return "died", "".join(printed) + "\nthe kernel died (its memory limit, or it was stopped)"
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = message["msg_type"]
            if kind == "stream":
                printed.append(message["content"]["text"])
            elif kind == "error":
                printed.append("\n".join(message["content"]["traceback"])[-3000:])
            elif kind == "execute_reply":
                status = message["content"]["status"]
            elif kind == "status" and message["content"]["execution_state"] == "idle":
                idle = True
        return status, "".join(printed)

    def run_notebook(self, notebook: Path) -> str:
        """Each code cell of ``notebook`` in turn: "ok", or which cell failed and its error."""
        cells = [cell["source"] for cell in json.loads(Path(notebook).read_text())["cells"]
                 if cell["cell_type"] == "code"]
        for number, source in enumerate(cells, 1):
            status, printed = self.run("".join(source) if isinstance(source, list) else source)
            if status != "ok":
                return f"cell {number} failed:\n{printed}"
        return "ok"

    def close(self) -> None:
        self.ws.close()


def released_lab(lab: str, language: str = "en") -> Path:
    """The lab as students get it: labs/LAB/LAB.ipynb, or in Chinese zh/labs/LAB/LAB.ipynb (the same cells)."""
    path = project_root() / "labs" / lab / f"{lab}.ipynb"
    if language == translations.LANGUAGE:
        path = translations.target_of(path)
    if not path.is_file():
        raise ClassroomError(f"there is no released lab {path}: `streamlab release-labs` writes labs/")
    return path


def hand_out(lab: str, *, directory: Path | None = None, say=print) -> dict[str, str]:
    """The released lab into ``labs/LAB/LAB.ipynb`` of every running student's server; a file the student
    already has is left as it is. Returns {student: what happened}."""
    hub = Hub(directory)
    notebook = json.loads(released_lab(lab, hub.language).read_text())
    done = {}
    for name in hub.running():
        if name == hub.teacher:
            continue
        path = f"labs/{lab}/{lab}.ipynb"
        if hub.contents(name, path)[0] == 200:
            done[name] = "already has it (kept)"
            continue
        status = hub.put_file(name, path, notebook, notebook=True)
        done[name] = "handed out" if status in (200, 201) else f"refused ({status})"
    missing = sorted(set(hub.users()) - set(done) - {hub.teacher})
    for name, what in sorted(done.items()):
        say(f"  {name}: {what}")
    if missing:
        say(f"  not running, so not handed out (run hand-out again when they are): {', '.join(missing)}")
    return done


def collect(lab: str, out: Path, *, directory: Path | None = None, say=print) -> dict[str, str]:
    """Each student's ``submitted/LAB/LAB.ipynb`` into ``out/submitted/<student>/LAB/LAB.ipynb`` (with its
    time); a student whose server is stopped is started for it and stopped again."""
    hub = Hub(directory)
    running = set(hub.running())
    done = {}
    for name in sorted(set(hub.users()) - {hub.teacher}):
        if name not in running:
            hub.start(name)
        status, model = hub.contents(name, f"submitted/{lab}/{lab}.ipynb")
        if status == 200:
            target = Path(out) / "submitted" / name / lab
            target.mkdir(parents=True, exist_ok=True)
            (target / f"{lab}.ipynb").write_text(json.dumps(model["content"]))
            stamp = hub.contents(name, f"submitted/{lab}/timestamp.txt")[1]
            if stamp:
                (target / "timestamp.txt").write_text(stamp["content"])
            done[name] = "collected"
        else:
            done[name] = "nothing submitted"
        if name not in running:
            hub.request("DELETE", f"/hub/api/users/{name}/server")
        say(f"  {name}: {done[name]}")
    return done


def return_feedback(lab: str, grades: Path, *, directory: Path | None = None, say=print) -> dict[str, str]:
    """Each student's feedback page (``GRADES/feedback/<student>.html``, what ``streamlab grade`` wrote) into
    their ``feedback/LAB.html``."""
    hub = Hub(directory)
    running = set(hub.running())
    done = {}
    for page in sorted((Path(grades) / "feedback").glob("*.html")):
        name = page.stem
        if name not in running:
            done[name] = "not running (return again when it is)"
        else:
            status = hub.put_file(name, f"feedback/{lab}.html", page.read_text(), notebook=False)
            done[name] = "returned" if status in (200, 201) else f"refused ({status})"
        say(f"  {name}: {done[name]}")
    return done


def status(*, directory: Path | None = None, say=print) -> int:
    saved = _saved(state_dir(directory))
    if not _hub_running(saved):
        say("The classroom is not running.")
        return 1
    running = Hub(directory).running()
    say(f"The classroom runs at {saved['url']} (hub pid {saved['pid']}, since {saved['since']}); "
        f"servers running: {', '.join(running) or 'none'}")
    return 0
