"""The Docker stack's images, built on this machine: the base image and the course image.

``docker/Dockerfile`` builds on ``python:3.11.14-slim-bookworm``. On a machine where no image registry
serves it, ``make docker-base`` (``base()``) makes an equivalent here, from Debian's own packages:
Debian 12 from ``debootstrap`` (the mirror apt already uses), Debian's Python 3.11 in a virtual
environment at ``/usr/local`` (so ``python``, ``pip`` and ``site-packages`` are where the official image
has them), trusting the certificate authorities this machine trusts. It is tagged with the official
name, so the Dockerfile and the learner's guide's ``docker compose -f docker/compose.yaml up --build`` run
unchanged. What differs: Python's patch release (Debian's 3.11.2, not 3.11.14) and the extra
certificate authorities of this machine, which is why such a base is never published.

``build()`` builds the course image (``streamlab-course:local``) once per content hash: the Dockerfile,
the files of its build context and the base image's id. A second call with nothing changed tags the
image it built before instead (``streamlab-course:<hash>``). ``images()`` (``... docker_images.py images``)
does what the docker tier needs: the base, pulled where a registry serves it, else made; then the course
image. One maker at a time per machine (a file lock).

Standard library only: ``python3 streamlab/stack/docker_images.py base`` works before any set-up.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE_IMAGE = "python:3.11.14-slim-bookworm"
COURSE_IMAGE = "streamlab-course:local"
COURSE_REPOSITORY = COURSE_IMAGE.split(":")[0]
SUITE = "bookworm"  # Debian 12, the official image's Debian
ROOT = Path(__file__).resolve().parents[2]
# The Debian packages of the base: what debootstrap's minbase lacks of the official image's
# (certificates, Python 3.11 and its venv/ensurepip for pip), installed by apt in the new system
# (debootstrap's own dependency resolution leaves python3.11-venv unconfigured)
BASE_PACKAGES = ["python3.11", "python3.11-venv"]
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    # says which base an image was built on (`docker run IMAGE env`); the official one has no such variable
    "STREAMLAB_BASE": "debootstrap bookworm, Debian's python3.11",
}
PULL_TIMEOUT_S = 120  # where a registry answers, the official base is pulled instead of made
EXTRA_CAS = Path("/usr/local/share/ca-certificates")  # where Debian keeps a machine's own authorities
BUILD_TIMEOUT_S = 40 * 60
# One maker at a time on a machine: `.ci/run` starts making the images while the suite sets up, and the docker
# tier, asking for them later, waits for that instead of building the same thing a second time.
LOCK_FILE = Path(tempfile.gettempdir()) / "streamlab-docker-images.lock"


class ImageError(RuntimeError):
    """An image could not be made; the message says why and what to do."""


def docker(*args: str, timeout: float = 120, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and proc.returncode != 0:
        raise ImageError(f"docker {' '.join(args[:3])} failed: {proc.stderr.strip()[-800:]}")
    return proc


def image_id(name: str) -> str | None:
    """The local image's id, or None when there is no such image here (nothing is pulled)."""
    proc = docker("image", "inspect", "--format", "{{.Id}}", name, check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def compose_command() -> list[str] | None:
    """How to run Compose here: the v2 plugin (``docker compose``), else v1 (``docker-compose``)."""
    for command in (["docker", "compose"], ["docker-compose"]):
        try:
            if subprocess.run([*command, "version"], capture_output=True, timeout=30).returncode == 0:
                return command
        except (OSError, subprocess.TimeoutExpired):
            continue
    return None


def debian_mirror(sources: tuple[Path, ...] = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
                  ) -> str | None:
    """The Debian mirror apt uses on this machine (its first ``deb`` source with the main archive), or
    None (debootstrap then uses its default)."""
    files = []
    for path in sources:
        files.extend(sorted(path.glob("*.sources")) + sorted(path.glob("*.list")) if path.is_dir() else [path])
    for path in files:
        try:
            text = path.read_text()
        except OSError:
            continue
        for stanza in text.split("\n\n"):  # deb822 (.sources): URIs: and Suites: lines
            fields = dict(line.split(":", 1) for line in stanza.splitlines()
                          if ":" in line and not line.startswith("#") and not line.startswith(" "))
            uris, suites = fields.get("URIs", "").split(), fields.get("Suites", "").split()
            if uris and SUITE in suites and fields.get("Types", "deb").strip() == "deb":
                return uris[0]
        for line in text.splitlines():  # one-line form: deb [OPTIONS] URI SUITE COMPONENTS
            words = line.split("#", 1)[0].split()
            if words[:1] == ["deb"] and words[1:2] and words[1].startswith("["):
                words = [words[0], *" ".join(words[1:]).split("]", 1)[1].split()]
            if len(words) >= 3 and words[0] == "deb" and words[2] == SUITE:
                return words[1]
    return None


def _chroot(rootfs: Path, *command: str) -> None:
    proc = subprocess.run(["chroot", str(rootfs), *command], capture_output=True, text=True, timeout=600,
                          env={"PATH": BASE_ENV["PATH"], "LANG": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive"})
    if proc.returncode != 0:
        raise ImageError(f"in the base image, {' '.join(command)} failed: {(proc.stdout + proc.stderr)[-800:]}")


_held = {"depth": 0}


@contextlib.contextmanager
def _one_maker():
    """Hold the machine's image-making lock (again, if this process holds it already)."""
    if _held["depth"]:
        _held["depth"] += 1
        try:
            yield
        finally:
            _held["depth"] -= 1
        return
    with open(LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when its process dies
        _held["depth"] = 1
        try:
            yield
        finally:
            _held["depth"] = 0


def wait_for_makers() -> None:
    """Return once no other process is making Compose or the images (``.ci/run``'s ``prepare``)."""
    with _one_maker():
        pass


def prepare(*, say=print) -> tuple[str, bool]:
    """What `.ci/run` starts in the background: Compose v2 where there is none (docker/install-compose.sh),
    then ``images()``, all under the lock, so the docker tier waits for it."""
    with _one_maker():
        if compose_command() != ["docker", "compose"]:
            say("Building Compose v2 (docker/install-compose.sh) ...")
            subprocess.run(["bash", str(ROOT / "docker" / "install-compose.sh")], check=True, timeout=1800)
        return images(say=say)


def base(*, force: bool = False, say=print) -> str:
    """Make ``BASE_IMAGE`` here (unless there is one already): see the module's docstring."""
    with _one_maker():
        return _base(force=force, say=say)


def _base(*, force: bool, say) -> str:
    if not force and image_id(BASE_IMAGE):
        say(f"{BASE_IMAGE} is here already (`make docker-base FORCE=1` makes it again).")
        return BASE_IMAGE
    if os.geteuid() != 0:
        raise ImageError("making the base image needs root (debootstrap and chroot): sudo make docker-base")
    if not shutil.which("debootstrap"):
        raise ImageError("debootstrap is not installed: apt-get install -y debootstrap")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="streamlab-base-", dir="/var/tmp") as work:
        rootfs = Path(work) / "rootfs"
        mirror = debian_mirror()
        say(f"Debian 12 ({SUITE}) from {'the mirror apt uses' if mirror else 'debootstrap default mirror'} ...")
        proc = subprocess.run(["debootstrap", "--variant=minbase", "--include=ca-certificates", SUITE,
                               str(rootfs), *([mirror] if mirror else [])],
                              capture_output=True, text=True, timeout=1200)
        if proc.returncode != 0:
            raise ImageError(f"debootstrap failed: {(proc.stdout + proc.stderr)[-800:]}")
        sources = rootfs / "etc/apt/sources.list"
        first = sources.read_text().splitlines()[0]
        sources.write_text(f"{first}\n{first.replace(f' {SUITE} ', f' {SUITE}-updates ')}\n")
        _chroot(rootfs, "apt-get", "update", "-qq")
        _chroot(rootfs, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *BASE_PACKAGES)
        # this machine's own certificate authorities (a proxy's, say): pip and Maven in a build need them
        extra = sorted(EXTRA_CAS.glob("*.crt")) if EXTRA_CAS.is_dir() else []
        if extra:
            target = rootfs / str(EXTRA_CAS).lstrip("/")
            target.mkdir(parents=True, exist_ok=True)
            for ca in extra:
                shutil.copy2(ca, target / ca.name)
            _chroot(rootfs, "update-ca-certificates")
        # python, pip and site-packages where the official image has them (/usr/local)
        _chroot(rootfs, "python3.11", "-m", "venv", "/usr/local")
        (rootfs / "usr/local/pip.conf").write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")
        _chroot(rootfs, "apt-get", "clean")
        for cache in ("var/lib/apt/lists", "var/cache/apt"):
            for item in (rootfs / cache).glob("*"):
                if item.is_file():
                    item.unlink()
        say(f"Importing it as {BASE_IMAGE} ...")
        changes = [arg for key, value in BASE_ENV.items() for arg in ("--change", f'ENV {key}="{value}"')]
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        docker("import", *changes, "--change", 'CMD ["python3"]', "-", BASE_IMAGE, stdin=tar.stdout, timeout=600)
        tar.stdout.close()
        tar.wait(timeout=60)
    say(f"Made {BASE_IMAGE} from Debian's packages in {time.monotonic() - started:.0f}s.")
    return BASE_IMAGE


def context_files() -> list[Path]:
    """The files the course image is built from: the Dockerfile, .dockerignore and its allow-list."""
    found = [ROOT / "docker/Dockerfile", ROOT / ".dockerignore", ROOT / "requirements.txt",
             ROOT / "pyproject.toml", ROOT / "docker/entrypoint.sh"]
    found += sorted(ROOT.glob("README*")) + sorted(ROOT.glob("LICENSE*"))
    found += sorted(p for p in (ROOT / "streamlab").rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
                    and ".ipynb_checkpoints" not in p.parts)
    return [p for p in found if p.is_file()]


def content_hash(base_id: str | None = None) -> str:
    """What the course image is made of: its files' paths and bytes, and the base image's id."""
    digest = hashlib.sha256((base_id or image_id(BASE_IMAGE) or "no base").encode())
    for path in context_files():
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build(*, say=print) -> tuple[str, bool]:
    """Build ``COURSE_IMAGE`` unless an image of the same content hash is here: (hash, built?)."""
    with _one_maker():
        return _build(say=say)


def _build(*, say) -> tuple[str, bool]:
    tag = f"{COURSE_REPOSITORY}:{content_hash()}"
    if image_id(tag):
        docker("tag", tag, COURSE_IMAGE)
        say(f"{COURSE_IMAGE}: reusing {tag} (nothing it is built from changed).")
        return tag, False
    compose = compose_command()
    if compose is None:
        raise ImageError("no Docker Compose here: see docker/README.md, 'Compose'")
    started = time.monotonic()
    say(f"Building {COURSE_IMAGE} (about 10 minutes the first time) ...")
    uid, gid = (os.getuid(), os.getgid()) if os.getuid() != 0 else (1000, 1000)
    proc = subprocess.run([*compose, "-f", str(ROOT / "docker/compose.yaml"), "build", "kafka"],
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                          env=dict(os.environ, STREAMLAB_UID=str(uid), STREAMLAB_GID=str(gid)))
    if proc.returncode != 0:
        raise ImageError(f"building {COURSE_IMAGE} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    docker("tag", COURSE_IMAGE, tag)
    say(f"Built {COURSE_IMAGE} ({tag}) in {time.monotonic() - started:.0f}s.")
    return tag, True


def images(*, say=print) -> tuple[str, bool]:
    """The base (pulled where a registry serves it, else made here), then the course image: (hash, built?)."""
    if not image_id(BASE_IMAGE):
        try:
            pulled = subprocess.run(["docker", "pull", BASE_IMAGE], capture_output=True,
                                    timeout=PULL_TIMEOUT_S).returncode == 0
        except subprocess.TimeoutExpired:
            pulled = False
        if not pulled:
            base(say=say)
    return build(say=say)


def main(argv: list[str]) -> int:
    commands = {"base": lambda: base(force=os.environ.get("FORCE") == "1"), "build": build, "images": images,
                "prepare": prepare}
    if len(argv) != 1 or argv[0] not in commands:
        print(f"usage: python3 {Path(__file__).name} base|build|images|prepare", file=sys.stderr)
        return 2
    try:
        commands[argv[0]]()
    except (ImageError, OSError, subprocess.SubprocessError) as err:
        print(f"streamlab: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
