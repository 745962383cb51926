"""Hidden checks of Lab 07 (run by the grader in its own process, after the notebook ran).

Every expected value is computed here from the seeded generator; the checkpoints are read from
disk (offsets, commits, savepoint lineage) and their state through Spark's state data source.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import streamlab as sl
from streamlab.grading.hidden_checks import CheckFailed, check
from streamlab.lessons.m02_keyed_state import state_variable, state_variables
from streamlab.lessons.m07_upgrades.savepoints import initial_offsets, savepoint_info, starting_offsets

REQUESTS = sl.access_log(200, seed=70)
EARLY, LATE, AFTER = REQUESTS[:60], REQUESTS[60:120], REQUESTS[120:]
TOPIC = "lab07-requests"


def _counts(rows, keep=lambda r: True) -> Counter:
    return Counter(r["path"] for r in rows if keep(r))


def _path_counts(table) -> dict[str, int]:
    """{path: count} of a count query's state table (a path and one whole number per row), for the state trace."""
    values = [c for c in table.columns if c not in ("path", "partition_id")]
    if "path" not in table.columns or len(values) != 1:
        raise CheckFailed(f"the state should be a count per path; its columns are {list(table.columns)}")
    try:
        return {p: int(n) for p, n in zip(table["path"], table[values[0]])}
    except (TypeError, ValueError):
        raise CheckFailed("the state's counts should be whole numbers") from None


def _savepoint(run):
    """The savepoint the setup took from v0, checked to be a copy of v0 at its last batch."""
    v0 = run.checkpoint("lab07-v0")
    savepoint = run.checkpoint("lab07-savepoint")
    info = savepoint_info(savepoint)
    if not info or Path(info["taken_from"]).resolve() != Path(v0.path).resolve():
        raise CheckFailed("the savepoint is not a copy of v0's checkpoint: run the setup cell as it is")
    if sorted(v0.commits()["batch"]) != [0, 1]:
        raise CheckFailed("v0's checkpoint should hold exactly two committed batches (0 and 1)")
    return v0, savepoint


def _not_post(request) -> bool:
    return request["method"] != "POST"


@check("test_upgrade_output", "test_upgrade_state")
def upgrade(run):
    """Part A: v1 counts every request but the POSTs, each once, the ones v0 counted before the savepoint included:
    only a query that reads the topic again from its start, on a new checkpoint, can (a copy of the savepoint brings
    v0's counts, POSTs in)."""
    _savepoint(run)
    v1 = run.checkpoint("lab07-v1")
    run.require_reached_end(v1, TOPIC)
    expected = dict(_counts(REQUESTS, _not_post))
    read = run.inputs_by_batch(v1, TOPIC)
    diverged = run.trace_state("Part A, v1's count per path", v1,
                               {b: dict(_counts(rows, _not_post)) for b, rows in read.items()}, _path_counts)
    state = v1.state_dict(run.spark())
    why = ""
    if savepoint_info(v1):
        why = ("; v1 started from a copy of the savepoint, whose counts include the POSTs v0 counted, and no filter "
               "in v1 can take them out of a count")
    elif diverged is not None:
        why = f"; it first differed after batch {diverged}"
    assert state == expected, f"v1's state holds {state}, expected {expected} (every request but the POSTs){why}"
    out = run.output("lab07-v1-out")
    for column in ("path", "count"):
        assert column in out.columns, f"v1's output has no column {column!r}"
    assert sl.latest(out, "path", "count") == expected, "v1's output counts differ from the expected counts"


V0_METHOD = "(v0)"   # Part B: the map key of v0's counts in v2's state


def _v2(run):
    """v2's checkpoint, after checking that it is one transformWithState operator keeping the map state `requests`."""
    v2 = run.checkpoint("lab07-v2")
    try:
        declared = state_variables(v2, run.spark())
    except Exception as err:  # no readable state metadata: not a stateful query's checkpoint
        raise CheckFailed(f"v2's checkpoint holds no readable state ({type(err).__name__})") from None
    operators = set(declared["operator"])
    if len(operators) != 1 or "transformWithState" not in next(iter(operators)):
        raise CheckFailed(f"v2 should have one transformWithState operator, its checkpoint has {sorted(operators)}")
    found = declared[declared["variable"] == "requests"]
    if found.empty or found["type"].iloc[0] != "MapState":
        raise CheckFailed(f"v2's processor should keep a map state called `requests`; it keeps "
                          f"{dict(zip(declared['variable'], declared['type']))}")
    return v2


def _requests(table) -> dict[tuple[str, str], int]:
    """{(path, method): requests} of v2's map state `requests` as a table (path, map key, value)."""
    fields = [c for c in table.columns if c not in ("path", "partition_id")]
    if "path" not in table.columns or len(fields) != 2:
        raise CheckFailed(f"`requests` should map a method to a number of requests, per path; its columns are "
                          f"{list(table.columns)}")
    try:
        return {(p, m): int(n) for p, m, n in zip(table["path"], table[fields[0]], table[fields[1]])}
    except (TypeError, ValueError):
        raise CheckFailed("the values of `requests` should be whole numbers") from None


@check("test_bootstrap_counts")
def bootstrap_counts(run):
    _savepoint(run)
    v2 = _v2(run)
    got = _requests(state_variable(v2, "requests", run.spark()))
    from_v0 = {(p, V0_METHOD): n for p, n in _counts(EARLY + LATE).items()}
    expected = {**from_v0, **Counter((r["path"], r["method"]) for r in AFTER)}
    at_savepoint = Counter((r["path"], r["method"]) for r in EARLY + LATE)
    run.trace_state("Part B, requests ((path, method) -> requests)", v2,
                    {b: from_v0 | dict(Counter((r["path"], r["method"]) for r in read) - at_savepoint)
                     for b, read in run.inputs_by_batch(v2, TOPIC).items()}, _requests, stateVarName="requests")
    v0_part = {k: n for k, n in got.items() if k[1] == V0_METHOD}
    assert v0_part == {k: n for k, n in expected.items() if k[1] == V0_METHOD}, \
        f"v0's counts at the savepoint should be under {V0_METHOD!r}: expected {dict(_counts(EARLY + LATE))}"
    assert got == expected, ("the requests read after the savepoint should be counted under their methods, "
                             "each exactly once")
    out = run.output("lab07-v2-out")
    assert "requests" in out.columns and \
        sl.latest(out, "path", "requests") == {p: n for p, n in _counts(REQUESTS).items() if p in _counts(AFTER)}, \
        "v2's output should give, per path requested after the savepoint, its requests so far (v0's included)"


@check("test_bootstrap_offsets")
def bootstrap_offsets(run):
    _, savepoint = _savepoint(run)
    v2 = _v2(run)
    started = initial_offsets(v2)
    position = json.loads(starting_offsets(savepoint))
    assert started == position, f"v2 started reading at {started}, the savepoint is at {position}"
    run.require_reached_end(v2, TOPIC)
    read_up_to = v2.offsets().groupby("batch")["offset"].sum()
    read = int(read_up_to[max(v2.commits()["batch"])]) - sum(int(o) for p in position.values() for o in p.values())
    assert read == len(AFTER), f"v2 should read the {len(AFTER)} requests after the savepoint, it read {read}"


@check("test_report_columns", "test_report_values")
def report(run):
    v0, _ = _savepoint(run)
    before, after = _counts(EARLY), _counts(EARLY + LATE)
    spark = run.spark()
    assert v0.state_dict(spark, batchId=0) == dict(before) and v0.state_dict(spark, batchId=1) == dict(after), \
        "v0's checkpoint does not hold the expected state: run the setup cell as it is"
    out = run.output("lab07-report")
    for column in ("path", "before", "after", "growth"):
        assert column in out.columns, f"the report has no column {column!r}"
    assert out["path"].is_unique, "the report should have one row per path"
    got = {row["path"]: (row["before"], row["after"], row["growth"]) for row in out.to_dict("records")}
    want = {p: (before[p], after[p], after[p] - before[p]) for p in after}
    assert got == want, f"the report says {got}, expected {want}"


LIVE = sl.access_log(90, seed=71)
LIVE_PER_BATCH = range(18, 33)   # requests per micro-batch: the lab draws 20 to 30 on each run (Kafka rounds)


def _answer(value, moment: str) -> tuple[int, dict]:
    """(batch, {path: growth}) of a handed-out answer; paths that grew by 0 are left out."""
    if not (isinstance(value, dict) and isinstance(value.get("batch"), int) and isinstance(value.get("grew"), dict)):
        raise CheckFailed(f"the answer {moment} batch 2 should be a dict with an int batch and a dict grew")
    try:
        grew = {path: int(n) for path, n in value["grew"].items()}
    except (TypeError, ValueError):
        raise CheckFailed(f"the growths {moment} batch 2 should be whole numbers") from None
    return value["batch"], {path: n for path, n in grew.items() if n}


@check("test_live_state_during", "test_live_state_after")
def live_state(run):
    topic = run.topic("lab07-live-requests")
    records = sorted(run.records("lab07-live-requests"), key=lambda r: (r["partition"], r["offset"]))
    if sorted((r["value"]["ts"], r["value"]["path"]) for r in records) != sorted((r["ts"], r["path"]) for r in LIVE):
        raise CheckFailed("the topic lab07-live-requests does not hold the lab's 90 requests")
    ckpt = run.checkpoint("lab07-live")
    run.require_reached_end(ckpt, "lab07-live-requests")
    offsets = ckpt.offsets()
    offsets = offsets[offsets["topic"] == topic]
    read = offsets.groupby("batch")["offset"].sum()
    if int(read[0]) not in LIVE_PER_BATCH or int(read[1] - read[0]) not in LIVE_PER_BATCH:
        raise CheckFailed("batches 0 and 1 of the live query should read 20 to 30 requests each: "
                          "run the cells as they are")
    answers = {r["value"].get("moment"): r["value"] for r in run.records("lab07-live-answers")
               if isinstance(r["value"], dict)}
    if set(answers) != {"during", "after"}:
        raise CheckFailed("the live query's answers (during and after batch 2) are missing")
    spark = run.spark()

    def up_to(batch: int) -> Counter:
        if batch < 0:
            return Counter()
        ends = {int(p): int(o) for p, o in offsets[offsets["batch"] == batch][["partition", "offset"]].values}
        return Counter(r["value"]["path"] for r in records if r["offset"] < ends.get(r["partition"], 0))

    def growth(batch: int) -> dict:
        """What batch ``batch`` added per path: from the records it read, checked against the state it left."""
        from_records = dict(up_to(batch) - up_to(batch - 1))
        state_now = Counter(ckpt.state_dict(spark, batchId=batch))
        state_before = Counter(ckpt.state_dict(spark, batchId=batch - 1)) if batch > 0 else Counter()
        if dict(state_now - state_before) != from_records:
            raise CheckFailed(f"the live query's state at batch {batch} does not match what it read: "
                              "run the cells as they are")
        return from_records

    run.trace_state("Part D, the live query's count per path", ckpt,
                    {b: dict(up_to(b)) for b in sorted(int(b) for b in ckpt.commits()["batch"])}, _path_counts)
    batch, grew = _answer(answers["during"], "during")
    assert batch == 1, f"while batch 2 ran, the last committed batch was 1; the answer says {batch}"
    assert grew == growth(1), \
        f"batch 1 added {growth(1)} to the counts; the answer while batch 2 ran says {grew}"
    batch, grew = _answer(answers["after"], "after")
    last = ckpt.last_committed_batch()
    assert batch == last, f"once caught up, the last committed batch is {last}; the answer says {batch}"
    assert grew == growth(last), f"batch {last} added {growth(last)} to the counts; the answer says {grew}"
