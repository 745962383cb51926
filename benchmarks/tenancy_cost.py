"""What keeping submissions apart on Kafka costs the grader (``grading.sandbox``). Reports numbers; asserts nothing.

    .venv/bin/python benchmarks/tenancy_cost.py [--runs 5] [--own-broker]

Against the course's native broker (it has the SANDBOX listener): ``--runs`` times, make a slot's principal
(its SCRAM credential and produce quota, waited for until the broker shows them), let it onto one student's
prefix (the ACLs), open one authenticated connection as the grader's door does, probe the broker as the grader
does after each submission (``isolation.broker_problem``), delete the submission's topics and consumer groups
(``isolation.delete_prefixed``, here on one topic), and remove the principal. Printed: the median of each step,
and of the whole.

``--own-broker``: the other way to keep submissions apart, a broker of each submission's own: the median time
to start a fresh native broker (new storage, new port) until it answers, and to stop and delete it.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from streamlab.grading.sandbox.isolation import broker_problem, delete_prefixed
from streamlab.grading.sandbox.tenancy import Principal, sandbox_servers
from streamlab.stack.kafka import admin_client, bootstrap_servers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--own-broker", action="store_true", help="time a broker per submission instead")
    args = parser.parse_args()
    servers = bootstrap_servers()
    listener = sandbox_servers(servers)
    if listener is None:
        print(f"the Kafka at {servers} has no SANDBOX listener: start the course's broker (streamlab kafka start)")
        return 1
    if args.own_broker:
        return own_broker(args.runs)
    steps: dict[str, list[float]] = {"make": [], "allow_only": [], "connect": [], "probe": [], "clean_up": [],
                                     "remove": []}
    for run in range(args.runs):
        started = time.perf_counter()
        principal = Principal(servers)
        steps["make"].append(time.perf_counter() - started)
        started = time.perf_counter()
        principal.allow_only(f"bench-{run}-")
        steps["allow_only"].append(time.perf_counter() - started)
        started = time.perf_counter()
        principal.connect(listener).close()
        steps["connect"].append(time.perf_counter() - started)
        started = time.perf_counter()
        broker_problem(servers)
        steps["probe"].append(time.perf_counter() - started)
        new_topic_named(f"bench-{run}-topic")
        started = time.perf_counter()
        delete_prefixed(f"bench-{run}-")
        steps["clean_up"].append(time.perf_counter() - started)
        started = time.perf_counter()
        principal.remove()
        steps["remove"].append(time.perf_counter() - started)
    medians = {name: statistics.median(times) for name, times in steps.items()}
    print(", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in medians.items())
          + f"; a slot in all {sum(medians.values()) * 1000:.0f} ms (median of {args.runs})")
    return 0


def new_topic_named(name: str) -> None:
    from kafka.admin import NewTopic

    admin = admin_client()
    try:
        admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        admin.close()


def own_broker(runs: int) -> int:
    from streamlab.stack.private_broker import PrivateBroker

    start, stop = [], []
    for _ in range(runs):
        broker = PrivateBroker()
        started = time.perf_counter()
        broker.start()
        start.append(time.perf_counter() - started)
        started = time.perf_counter()
        broker.close()
        stop.append(time.perf_counter() - started)
    print(f"a broker of its own: start {statistics.median(start):.1f} s, "
          f"stop and delete {statistics.median(stop):.1f} s (median of {runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
