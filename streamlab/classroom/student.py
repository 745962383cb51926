"""What runs in a student's container: the Kafka door, and ``streamlab submit``.

The door listens on ``127.0.0.1:19094`` (``CLASS_PORT``), the address the class's broker advertises for its SASL
listener, so every Kafka client in the container, told ``KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:19094``, comes back to
it for every broker it is told about. Each connection is logged in as the student (``tenancy.login``, the grader's
own SCRAM login) to the broker at ``STREAMLAB_CLASSROOM_BROKER`` and then joined both ways by the grader's own
``KafkaDoor`` (requests pass unchanged, one frame at a time, each at most ``bounds.KAFKA_REQUEST_BYTES``; no topic
budget, the principal's ACLs and quota bound the student): the lessons need no Kafka option of their own.
"""
from __future__ import annotations

import os
import shutil
import socket
import sys
from datetime import UTC, datetime
from pathlib import Path

from ..grading.sandbox.door import KafkaDoor
from ..grading.sandbox.tenancy import login
from . import CLASS_PORT

WORK = Path(os.environ.get("STREAMLAB_CLASSROOM_WORK", str(Path.home() / "work")))


def serve_door(broker: str, user: str, password: str, *, port: int = CLASS_PORT, ready=None) -> None:
    """Join each connection to ``127.0.0.1:port`` to one logged in to ``broker`` as ``user`` (the grader's
    ``KafkaDoor``, on TCP, at most ``bounds.KAFKA_CONNECTIONS`` at once); forever."""
    door = KafkaDoor(None, lambda: login(broker, user, password), server=socket.create_server(("127.0.0.1", port)))
    if ready is not None:
        ready()
    door.wait()


def door_main() -> int:
    """``streamlab classroom door``: the door with the credentials the hub put in this container's environment."""
    missing = [v for v in ("STREAMLAB_CLASSROOM_BROKER", "STREAMLAB_KAFKA_USER", "STREAMLAB_KAFKA_PASSWORD")
               if not os.environ.get(v)]
    if missing:
        print(f"the Kafka door needs {', '.join(missing)}: it runs in a classroom's student container, "
              f"started by the hub", file=sys.stderr)
        return 2
    serve_door(os.environ["STREAMLAB_CLASSROOM_BROKER"], os.environ["STREAMLAB_KAFKA_USER"],
               os.environ["STREAMLAB_KAFKA_PASSWORD"])
    return 0


def submit(lab: str, *, work: Path = WORK) -> Path:
    """Hand in ``work/labs/LAB/LAB.ipynb``: a copy in ``work/submitted/LAB/`` with the time, which the teacher's
    ``streamlab classroom collect LAB`` takes. Submitting again replaces it. ``lab`` may be the start of the
    name of one lab handed out ("lab01"), as ``streamlab grade`` takes it."""
    handed = sorted(p.name for p in (work / "labs").iterdir() if p.is_dir()) if (work / "labs").is_dir() else []
    if lab and lab not in handed and len(fits := [name for name in handed if name.startswith(lab)]) == 1:
        lab = fits[0]
    source = work / "labs" / lab / f"{lab}.ipynb"
    if not source.is_file():
        raise FileNotFoundError(f"there is no {source.relative_to(work)} to submit"
                                + (f"; the labs handed out to you: {', '.join(handed)}" if handed
                                   else "; no lab has been handed out to you yet"))
    target = work / "submitted" / lab
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target / f"{lab}.ipynb")
    (target / "timestamp.txt").write_text(datetime.now(UTC).isoformat(timespec="seconds") + "\n")
    return target / f"{lab}.ipynb"
