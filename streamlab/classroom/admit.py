"""Admit a student (or the teacher) to the class's Kafka: run inside the broker's container by the hub, before it
starts the student's server (``docker exec streamlab-classroom-kafka python -m streamlab.classroom.admit NAME``).

It makes ``User:NAME`` with a new password (the grader's ``tenancy.Principal``: SCRAM credential, produce quota,
prefixed ACLs on ``NAME-``) and prints ``{"user", "password", "prefix"}`` as one JSON line for the hub, which puts
them in that student's container only. ``--teacher`` also lets the principal read every topic and group.
"""
from __future__ import annotations

import argparse
import json
import re
import sys

from ..grading.sandbox.tenancy import Principal
from . import ADMIN_SERVERS, NAME_PATTERN, topic_prefix


def admit(name: str, *, teacher: bool = False, servers: str = ADMIN_SERVERS) -> dict[str, str]:
    if not re.fullmatch(NAME_PATTERN, name):
        raise ValueError(f"{name!r} is not a roster name ({NAME_PATTERN})")
    principal = Principal(servers, name=name)
    if teacher:
        principal.allow_reading_all()
    else:
        principal.allow_only(topic_prefix(name))
    return {"user": principal.name, "password": principal.password, "prefix": principal.prefix}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamlab.classroom.admit")
    parser.add_argument("name")
    parser.add_argument("--teacher", action="store_true")
    args = parser.parse_args(argv)
    try:
        print(json.dumps(admit(args.name, teacher=args.teacher)))
    except Exception as err:  # noqa: BLE001 - the hub shows this line in its log and refuses the spawn
        print(f"could not admit {args.name} to the class's Kafka: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
