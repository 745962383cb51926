"""Mermaid, the library that draws the lessons' diagrams in the browser, kept next to the site so that
it reads offline.

It is the npm package ``mermaid`` at the version below (its ``dist/mermaid.min.js``: one script, no
further downloads), fetched once with ``npm pack`` into ``.cache/site/`` and checked against its hash.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from ..stack.paths import cache_dir

VERSION = "11.17.2"
SHA256 = "581ed7d74bd9048d0e3a91363927d72ef22942d7722546b27f7cc29e35390eb8"  # of dist/mermaid.min.js
MEMBER = "package/dist/mermaid.min.js"


class MermaidError(RuntimeError):
    pass


def cached() -> Path:
    return cache_dir() / "site" / f"mermaid-{VERSION}.min.js"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def mermaid_js() -> Path:
    """The pinned mermaid.min.js, fetched once (needs npm and the network the first time only)."""
    target = cached()
    if target.exists() and _sha256(target) == SHA256:
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise MermaidError(f"The site's diagrams need mermaid {VERSION}, fetched once with npm (Node.js), which is "
                           f"not installed here. Install Node.js, or put mermaid's dist/mermaid.min.js "
                           f"({VERSION}) at {target}.")
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([npm, "pack", f"mermaid@{VERSION}", "--silent", "--pack-destination", tmp],
                              capture_output=True, text=True, timeout=600)
        packs = sorted(Path(tmp).glob("mermaid-*.tgz"))
        if proc.returncode != 0 or not packs:
            raise MermaidError(f"`npm pack mermaid@{VERSION}` failed (the first site build needs the network): "
                               f"{(proc.stderr or proc.stdout).strip()[-500:]}")
        with tarfile.open(packs[0]) as archive:
            member = archive.extractfile(MEMBER)
            if member is None:
                raise MermaidError(f"mermaid {VERSION}'s package has no {MEMBER}")
            partial = Path(tmp) / "mermaid.min.js"
            partial.write_bytes(member.read())
        if _sha256(partial) != SHA256:
            raise MermaidError(f"mermaid {VERSION}'s {MEMBER} does not have the expected hash; not used")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(partial, target)
    return target
