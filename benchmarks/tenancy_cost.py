"""What a grading slot's Kafka principal costs the grader (``grading.tenancy``). Reports numbers; asserts nothing.

    .venv/bin/python benchmarks/tenancy_cost.py [--runs 5]

Against the course's native broker (it has the SANDBOX listener): ``--runs`` times, make a slot's principal
(its SCRAM credential and produce quota, waited for until the broker shows them), let it onto one student's
prefix (the ACLs), open one authenticated connection as the grader's door does, and remove it. Printed: the
median of each step, and of the whole.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from streamlab.grading.sandbox.tenancy import Principal, sandbox_servers
from streamlab.stack.kafka import bootstrap_servers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    servers = bootstrap_servers()
    listener = sandbox_servers(servers)
    if listener is None:
        print(f"the Kafka at {servers} has no SANDBOX listener: start the course's broker (streamlab kafka start)")
        return 1
    steps: dict[str, list[float]] = {"make": [], "allow_only": [], "connect": [], "remove": []}
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
        principal.remove()
        steps["remove"].append(time.perf_counter() - started)
    medians = {name: statistics.median(times) for name, times in steps.items()}
    print(", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in medians.items())
          + f"; a slot in all {sum(medians.values()) * 1000:.0f} ms (median of {args.runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
