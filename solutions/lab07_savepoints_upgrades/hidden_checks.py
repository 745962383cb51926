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
from streamlab.lessons.m07_upgrades.savepoints import initial_offsets, savepoint_info, starting_offsets

REQUESTS = sl.access_log(200, seed=70)
EARLY, LATE, AFTER = REQUESTS[:60], REQUESTS[60:120], REQUESTS[120:]
TOPIC = "lab07-requests"


def _counts(rows, keep=lambda r: True) -> Counter:
    return Counter(r["path"] for r in rows if keep(r))


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


def _from(savepoint_ckpt, copy, what: str) -> None:
    info = savepoint_info(copy)
    if not info or Path(info["taken_from"]).resolve() != Path(savepoint_ckpt.path).resolve():
        raise CheckFailed(f"{what} did not start from a copy of the savepoint")


@check("test_upgrade_output", "test_upgrade_state")
def upgrade(run):
    v0, savepoint = _savepoint(run)
    v1 = run.checkpoint("lab07-v1")
    _from(savepoint, v1, "v1")
    run.require_reached_end(v1, TOPIC)
    expected = dict(_counts(EARLY + LATE) + _counts(AFTER, lambda r: r["method"] != "POST"))
    state = v1.state_dict(run.spark())
    assert state == expected, \
        f"v1's state holds {state}, expected {expected} (v0's counts plus the non-POST requests after the savepoint)"
    out = run.output("lab07-v1-out")
    for column in ("path", "count", "busy"):
        assert column in out.columns, f"v1's output has no column {column!r}"
    assert sl.latest(out, "path", "count") == expected, "v1's output counts differ from the expected counts"
    assert sl.latest(out, "path", "busy") == {p: c >= 50 for p, c in expected.items()}, "busy must be count >= 50"
    batches = sorted(v1.commits()["batch"])
    start = savepoint_info(v1)["batch"]
    assert batches[-1] > start, "v1 ran no batch of its own after the savepoint"
    read_up_to = v1.offsets().groupby("batch")["offset"].sum()
    read = int(read_up_to[batches[-1]]) - int(read_up_to[start])
    assert read == len(AFTER), f"v1 should read only the {len(AFTER)} requests after the savepoint, it read {read}"


@check("test_bootstrap_counts", "test_bootstrap_offsets")
def bootstrap(run):
    _, savepoint = _savepoint(run)
    v2 = run.checkpoint("lab07-v2")
    spark = run.spark()
    operators = [row.asDict() for row in v2.state_metadata(spark).collect()]
    assert len(operators) == 1 and "transformWithState" in operators[0]["operatorName"], \
        f"v2 should have one transformWithState operator, its checkpoint has {[o['operatorName'] for o in operators]}"
    assert '"stats"' in (operators[0].get("operatorProperties") or ""), \
        "v2's operator should keep the state variable `stats` (PathStats)"
    started = initial_offsets(v2)
    position = json.loads(starting_offsets(savepoint))
    assert started == position, f"v2 started reading at {started}, the savepoint is at {position}"
    run.require_reached_end(v2, TOPIC)
    state = v2.state_table(spark, stateVarName="stats")
    got = {p: int(c) for p, c in zip(state["path"], state["count"])}
    expected = dict(_counts(REQUESTS))
    assert got == expected, f"v2's state counts {got}, expected {expected}: each request exactly once"
    latest_ts = {}
    for r in AFTER:
        latest_ts[r["path"]] = max(latest_ts.get(r["path"], ""), r["ts"])
    assert "last_ts" in state.columns, "v2's state `stats` should keep last_ts (PathStats)"
    assert {p: str(t)[:19].replace(" ", "T") for p, t in zip(state["path"], state["last_ts"])} == \
        {p: t[:19] for p, t in latest_ts.items()}, "last_ts should be the latest request time read after the savepoint"
    out = run.output("lab07-v2-out")
    assert "count" in out.columns and sl.latest(out, "path", "count") == {p: expected[p] for p in _counts(AFTER)}, \
        "v2's output should give the running counts of the paths requested after the savepoint"


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
LIVE_FIRST = range(40, 61)   # batch 0 reads this many, drawn by the lab on each run


def _answer(value, moment: str) -> tuple[int, dict]:
    if not (isinstance(value, dict) and isinstance(value.get("batch"), int) and isinstance(value.get("counts"), dict)):
        raise CheckFailed(f"the answer {moment} batch 1 should be a dict with an int batch and a dict of counts")
    try:
        return value["batch"], {path: int(n) for path, n in value["counts"].items()}
    except (TypeError, ValueError):
        raise CheckFailed(f"the counts {moment} batch 1 should be whole numbers") from None


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
    first = offsets[offsets["batch"] == 0]
    if int(first["offset"].sum()) not in LIVE_FIRST:
        raise CheckFailed("batch 0 of the live query should read the first 40 to 60 requests: "
                          "run the cells as they are")
    answers = {r["value"].get("moment"): r["value"] for r in run.records("lab07-live-answers")
               if isinstance(r["value"], dict)}
    if set(answers) != {"during", "after"}:
        raise CheckFailed("the live query's answers (during and after batch 1) are missing")
    spark = run.spark()

    def read_up_to(batch: int) -> dict:
        ends = {int(p): int(o) for p, o in offsets[offsets["batch"] == batch][["partition", "offset"]].values}
        return dict(Counter(r["value"]["path"] for r in records if r["offset"] < ends.get(r["partition"], 0)))

    batch, counts = _answer(answers["during"], "during")
    assert batch == 0, f"while batch 1 ran, the last committed batch was 0; the answer says {batch}"
    assert counts == read_up_to(0) == ckpt.state_dict(spark, batchId=0), \
        "the state read while batch 1 ran should be batch 0's: the counts of the requests it read"
    batch, counts = _answer(answers["after"], "after")
    last = ckpt.last_committed_batch()
    assert batch == last, f"once caught up, the last committed batch is {last}; the answer says {batch}"
    assert counts == read_up_to(last) == dict(_counts(LIVE)) == ckpt.state_dict(spark, batchId=last), \
        "once caught up, the state should count all 90 requests"
