# The classroom's JupyterHub, as `streamlab classroom up` starts it (`jupyterhub -f` this file). The class's fixed
# names come from `streamlab.classroom`; what `up` was given, from the STREAMLAB_CLASSROOM_* variables it sets.
import asyncio
import json
import os

from streamlab.classroom import CLASS_PORT, KAFKA_ALIAS, KAFKA_CONTAINER, NETWORK
from streamlab.stack.jupyter import START_PAGES

c = get_config()  # noqa: F821 - JupyterHub's loader defines it
env = os.environ.get
state = env("STREAMLAB_CLASSROOM_DIR")
roster = [line.strip() for line in open(env("STREAMLAB_CLASSROOM_ROSTER")) if line.strip()]
teacher = env("STREAMLAB_CLASSROOM_TEACHER")

# the students' address (the proxy) and the hub's API, on the class's bridge so that the servers reach it
c.JupyterHub.ip = env("STREAMLAB_CLASSROOM_IP")
c.JupyterHub.port = int(env("STREAMLAB_CLASSROOM_PORT"))
c.JupyterHub.hub_ip = env("STREAMLAB_CLASSROOM_HUB_IP")
c.JupyterHub.hub_port = int(env("STREAMLAB_CLASSROOM_PORT")) + 1
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{int(env('STREAMLAB_CLASSROOM_PORT')) + 2}"
c.JupyterHub.db_url = f"sqlite:///{state}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = f"{state}/jupyterhub_cookie_secret"
c.ConfigurableHTTPProxy.pid_file = f"{state}/proxy.pid"

# a roster of users, each choosing a password at first sign-in; the teacher is the hub's admin
c.JupyterHub.authenticator_class = "firstuseauthenticator.FirstUseAuthenticator"
c.FirstUseAuthenticator.dbm_path = f"{state}/passwords.dbm"
c.FirstUseAuthenticator.create_users = False
c.Authenticator.allowed_users = set(roster)
c.Authenticator.admin_users = {teacher}

# the instructor's tools (hand out, collect, return) speak to the hub's REST API with this token
c.JupyterHub.services = [{"name": "streamlab-classroom", "api_token": env("STREAMLAB_CLASSROOM_TOKEN")}]
c.JupyterHub.load_roles = [{"name": "streamlab-classroom", "services": ["streamlab-classroom"],
                            "scopes": ["admin:users", "admin:servers", "access:servers", "list:users",
                                       "read:users"]}]

# each student's server: the course image in a container of its own, with limits, on the class's network
c.JupyterHub.spawner_class = "dockerspawner.DockerSpawner"
c.DockerSpawner.image = env("STREAMLAB_CLASSROOM_IMAGE")
c.DockerSpawner.network_name = NETWORK
c.DockerSpawner.use_internal_ip = True
c.DockerSpawner.prefix = "streamlab-classroom"
c.DockerSpawner.name_template = "{prefix}-{username}"
c.DockerSpawner.remove = True  # a stopped server's container goes; its files are on the student's volume
c.DockerSpawner.cmd = ["classroom-student"]
c.DockerSpawner.notebook_dir = "/home/student/work"
c.DockerSpawner.volumes = {"streamlab-classroom-work-{username}": "/home/student/work",
                           os.path.join(env("STREAMLAB_CLASSROOM_COURSE"), "notebooks"):
                               {"bind": "/course/notebooks", "mode": "ro"},
                           os.path.join(env("STREAMLAB_CLASSROOM_COURSE"), "streamlab"):
                               {"bind": "/course/streamlab", "mode": "ro"},
                           os.path.join(env("STREAMLAB_CLASSROOM_COURSE"), "zh", "notebooks"):
                               {"bind": "/course/zh/notebooks", "mode": "ro"}}
c.DockerSpawner.mem_limit = env("STREAMLAB_CLASSROOM_MEMORY").upper()  # "3G": JupyterHub's byte sizes
c.DockerSpawner.cpu_limit = float(env("STREAMLAB_CLASSROOM_CPUS"))
c.DockerSpawner.extra_host_config = {"pids_limit": 2048}
c.DockerSpawner.start_timeout = 180
c.DockerSpawner.http_timeout = 180
c.Spawner.default_url = START_PAGES[env("STREAMLAB_CLASSROOM_LANGUAGE") or "en"]  # lesson 00, in the class's language
c.Spawner.poll_interval = 15  # how soon the hub sees a server that died (JupyterHub's default: 30 s)


async def admit(spawner):
    """Before a server starts: its user's Kafka principal (a new password each start), into its environment."""
    name = spawner.user.name
    command = ["docker", "exec", KAFKA_CONTAINER, "python", "-m", "streamlab.classroom.admit", name]
    if name == teacher:
        command.append("--teacher")
    proc = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode:
        raise RuntimeError(err.decode(errors="replace").strip() or f"admit exited {proc.returncode}")
    principal = json.loads(out)
    spawner.environment.update({
        "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{CLASS_PORT}",  # the door (streamlab/classroom/student.py)
        "STREAMLAB_CLASSROOM_BROKER": f"{KAFKA_ALIAS}:{CLASS_PORT}",
        "STREAMLAB_KAFKA_USER": principal["user"],
        "STREAMLAB_KAFKA_PASSWORD": principal["password"],
        "STREAMLAB_TOPIC_PREFIX": principal["prefix"],
        "STREAMLAB_DATA_DIR": "/home/student/work/.streamlab",
        "STREAMLAB_DRIVER_MEMORY": "1g",
        **({"STREAMLAB_INSTRUCTOR": "1"} if name == teacher else {}),
    })


c.Spawner.pre_spawn_hook = admit
