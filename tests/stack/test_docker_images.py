"""streamlab.stack.docker_images without Docker: the mirror it makes the base from, what the course image's
content hash covers. The images themselves are built and run by the docker tier (tests/docker)."""
from __future__ import annotations

import fnmatch
import subprocess
import sys

from streamlab.stack import docker_images


def test_the_mirror_is_the_one_apt_uses_in_either_format(tmp_path):
    deb822 = tmp_path / "sources.list.d"
    deb822.mkdir()
    (deb822 / "other.sources").write_text("Types: deb\nURIs: http://mirror.example/other\nSuites: stable\n"
                                          "Components: main\n")
    (deb822 / "debian.sources").write_text("Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\n"
                                           "Types: deb\n# a comment\nURIs: http://mirror.example/debian\n"
                                           "Suites: bookworm bookworm-updates\nComponents: main\n")
    assert docker_images.debian_mirror((tmp_path / "none.list", deb822)) == "http://mirror.example/debian"
    one_line = tmp_path / "sources.list"
    one_line.write_text("# deb http://old.example/debian bookworm main\n"
                        "deb [signed-by=/k.gpg] http://mirror.example/one bookworm main\n")
    assert docker_images.debian_mirror((one_line,)) == "http://mirror.example/one"
    assert docker_images.debian_mirror((tmp_path / "none.list",)) is None, "debootstrap's default then"


def test_the_content_hash_covers_what_the_dockerignore_lets_in():
    allowed = [line[1:].rstrip("/") for line in (docker_images.ROOT / ".dockerignore").read_text().splitlines()
               if line.startswith("!")]
    files = {str(p.relative_to(docker_images.ROOT)) for p in docker_images.context_files()}
    for pattern in allowed:
        assert any(f == pattern or f.startswith(pattern + "/") or fnmatch.fnmatch(f, pattern) for f in files) \
            or not list(docker_images.ROOT.glob(pattern)), f"{pattern} is built from but not hashed"
    assert {"docker/Dockerfile", ".dockerignore", "requirements.txt", "streamlab/cli.py"} <= files
    assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)
    assert not any(f.startswith(("notebooks/", "solutions/", "tests/")) for f in files), "mounted, not built in"


def test_the_content_hash_changes_with_the_base_and_with_a_file(tmp_path, monkeypatch):
    first = docker_images.content_hash("sha256:base-a")
    assert first == docker_images.content_hash("sha256:base-a"), "the same content, the same hash"
    assert first != docker_images.content_hash("sha256:base-b"), "a new base, a new image"
    extra = tmp_path / "streamlab" / "new.py"
    extra.parent.mkdir()
    extra.write_text("x = 1\n")
    monkeypatch.setattr(docker_images, "context_files", lambda: [extra])
    monkeypatch.setattr(docker_images, "ROOT", tmp_path)
    before = docker_images.content_hash("sha256:base-a")
    extra.write_text("x = 2\n")
    assert docker_images.content_hash("sha256:base-a") != before


def test_one_maker_at_a_time(tmp_path, monkeypatch):
    """`.ci/run` makes the images in the background; the docker tier asking meanwhile waits for that maker."""
    lock, done = tmp_path / "images.lock", tmp_path / "first-maker-done"
    holder = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, pathlib, time
with open({str(lock)!r}, "a") as f:
    fcntl.flock(f, fcntl.LOCK_EX); print("held", flush=True); time.sleep(0.5)
    pathlib.Path({str(done)!r}).write_text("done")
"""], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    monkeypatch.setattr(docker_images, "LOCK_FILE", lock)
    with docker_images._one_maker():
        assert done.exists(), "the second maker got in only after the first had finished"
    assert holder.wait(timeout=10) == 0


def test_the_lock_is_taken_again_by_its_holder(tmp_path, monkeypatch):
    """prepare() holds the lock while it calls images(), which takes it again: no deadlock."""
    monkeypatch.setattr(docker_images, "LOCK_FILE", tmp_path / "images.lock")
    with docker_images._one_maker():
        with docker_images._one_maker():
            docker_images.wait_for_makers()
    assert docker_images._held["depth"] == 0
