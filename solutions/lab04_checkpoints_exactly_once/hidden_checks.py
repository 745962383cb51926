"""Hidden checks for Lab 04 (run by the grader in its own process, after the notebook ran).

Expected values come from the seeded generators and from the artifacts Spark and the killed job wrote
(checkpoints, Kafka topics, the SQLite store) — never from what the notebook reports.
"""
from __future__ import annotations

import sqlite3
from collections import Counter

import pandas as pd

import streamlab as sl
from streamlab.grading.hidden_checks import CheckFailed, check
from streamlab.lessons.m04_recovery import read_committed

CRASH_BATCH = 2
JOB_REQUESTS = dict(n=120, seed=41)
B_REQUESTS = dict(n=100, seed=42)
C_REQUESTS = dict(n=100, seed=43)


def _truth(spec) -> dict:
    return dict(Counter(e["path"] for e in sl.access_log(spec["n"], seed=spec["seed"])))


def _require_records(run, topic_name: str, count: int) -> str:
    topic = run.topic(topic_name)
    held = sum(sl.end_offsets(topic).values())
    if held != count:
        raise CheckFailed(f"topic {topic_name!r} should hold the lab's {count} requests, it holds {held}")
    return topic


def _ends(offsets, batch: int, topic: str) -> dict[int, int]:
    rows = offsets[(offsets["batch"] == batch) & (offsets["topic"] == topic)]
    return {int(p): int(o) for p, o in zip(rows["partition"], rows["offset"])}


def _int_map(mapping, what: str) -> dict:
    """An answer's {key: number} read back from JSON (its keys became strings there)."""
    if not isinstance(mapping, dict):
        raise CheckFailed(f"{what} must be a dict, the answer gave {type(mapping).__name__}")
    try:
        return {k: int(v) for k, v in mapping.items()}
    except (TypeError, ValueError):
        raise CheckFailed(f"{what} must map to whole numbers") from None


def _offsets_map(mapping, what: str) -> dict[int, int]:
    """An answer's {partition: offset} read back from JSON (its partitions became strings there)."""
    try:
        return {int(p): o for p, o in _int_map(mapping, what).items()}
    except (TypeError, ValueError):
        raise CheckFailed(f"{what} must map partition numbers to offsets") from None


def _attempts(run, name: str, crash_batch: int = 1):
    """The plain Kafka sink's copy of every batch attempt; requires the injected crash to show in it."""
    rows = run.output(name)
    for column in ("batch_id", "path", "count"):
        if column not in rows.columns:
            raise CheckFailed(f"topic {name!r} does not hold the query's counts (no {column!r} column)")
    per_batch = rows.groupby("batch_id").apply(lambda f: f.duplicated(["path", "count"]).sum(), include_groups=False)
    doubled = sorted(int(b) for b, n in per_batch.items() if n > 0)
    if doubled != [crash_batch]:
        raise CheckFailed(f"the crash after batch {crash_batch} did not happen as the lab's cells inject it "
                          f"(batches written twice by the plain sink: {doubled}); run the notebook top to bottom")
    replayed = rows[rows["batch_id"] == crash_batch]
    if set(Counter(zip(replayed["path"], replayed["count"])).values()) != {2}:
        raise CheckFailed(f"batch {crash_batch} should have been attempted twice, once before the crash and once "
                          f"after: run the notebook top to bottom")
    return rows


def _trace_counts(run, title: str, ckpt, topic_name: str) -> None:
    """Draw the count query's state (a count per path) after each batch beside the counts of the requests the
    batch had read by then: what a sink downstream of it should have received."""
    def counts(table) -> dict:
        if not {"path", "count"} <= set(table.columns):
            raise CheckFailed(f"the count query's state should be a count per path; it has {list(table.columns)}")
        return {p: int(n) for p, n in zip(table["path"], table["count"])}
    run.trace_state(title, ckpt, {b: dict(Counter(r["path"] for r in read))
                                  for b, read in run.inputs_by_batch(ckpt, topic_name).items()}, counts)


def _latest(rows) -> dict:
    return sl.latest(rows.sort_values("batch_id", kind="stable")[["batch_id", "path", "count"]], "path", "count")


@check("test_in_flight_batch", "test_in_flight_range")
def in_flight(run):
    topic = _require_records(run, "lab04-requests", JOB_REQUESTS["n"])
    ckpt = run.checkpoint("lab04-job")
    offsets = ckpt.offsets()
    planned = sorted(int(b) for b in set(offsets["batch"]))
    committed = ckpt.commits()["batch"].tolist()
    if planned != list(range(CRASH_BATCH + 1)) or committed != list(range(CRASH_BATCH)):
        raise CheckFailed(f"the job's checkpoint is not the one the crash left (planned {planned}, committed "
                          f"{committed}); run the notebook once, top to bottom")
    sunk = {r["value"].get("batch_id") for r in run.records("lab04-job-out") if isinstance(r["value"], dict)}
    assert CRASH_BATCH in sunk, "the killed job never wrote the in-flight batch to its sink"
    end = _ends(offsets, CRASH_BATCH, topic)
    start = _ends(offsets, CRASH_BATCH - 1, topic)
    expected = {(p, o) for p in end for o in range(start.get(p, 0), end[p])}
    got = run.output("lab04-inflight")
    assert not got.empty, "in_flight found no batch in flight: nothing was copied to lab04-inflight"
    assert set(got["batch_id"]) == {CRASH_BATCH}, f"the batch in flight is batch {CRASH_BATCH}"
    pairs = {(int(p), int(o)) for p, o in zip(got["partition"], got["offset"])}
    assert len(pairs) == len(got), "some records of the range were copied twice"
    assert pairs == expected, (f"the range given reads {len(pairs)} records, {len(pairs & expected)} of them in "
                               f"the batch in flight, which holds {len(expected)}: start at the previous "
                               f"batch's end offsets, end at the batch's own")
    answers = [r["value"] for r in run.records("lab04-inflight-answer", limit=10)]
    answer = answers[0].get("in_flight") if len(answers) == 1 and isinstance(answers[0], dict) else None
    if not isinstance(answer, dict):
        raise CheckFailed("in_flight's answer did not reach the grader as a dict: run Part A's cells once")
    assert answer.get("batch") == CRASH_BATCH, f"the job died in batch {CRASH_BATCH}, not {answer.get('batch')}"
    assert _offsets_map(answer.get("end"), "end") == end, \
        "end must be the offsets the batch reads up to, from offsets/<batch>"
    assert _offsets_map(answer.get("start"), "start") == start, "the batch starts where the previous batch ended"


@check("test_idempotent_no_duplicates", "test_idempotent_counts")
def idempotent_sink(run):
    _require_records(run, "lab04-b-requests", B_REQUESTS["n"])
    ckpt = run.checkpoint("lab04-idempotent")
    run.require_reached_end(ckpt, "lab04-b-requests")
    attempts = _attempts(run, "lab04-b-attempts")
    _trace_counts(run, "Part B, the count per path your sink is given", ckpt, "lab04-b-requests")
    stores = sorted((run.data / "stores").glob("lab04-store-*.sqlite"))
    if len(stores) != 1:
        raise CheckFailed(f"expected one SQLite store lab04-store-*.sqlite, found {len(stores)}")
    try:
        with sqlite3.connect(f"file:{stores[0]}?mode=ro", uri=True) as db:
            table = db.execute("SELECT path, count, batch_id FROM latest").fetchall()
    except sqlite3.Error as err:
        raise CheckFailed(f"the store has no readable table latest(path, count, batch_id): {err}") from None
    assert table, "the store's table is empty"
    paths = [p for p, _, _ in table]
    assert len(paths) == len(set(paths)), f"{len(paths) - len(set(paths))} paths have more than one row"
    # each path's row: its final count, written by the last batch whose output held the path
    last = {}
    for batch, path, count in sorted(zip(attempts["batch_id"], attempts["path"], attempts["count"])):
        last[path] = (int(count), int(batch))
    try:
        stored = {p: (int(c), int(b)) for p, c, b in table}
    except (TypeError, ValueError):
        raise CheckFailed("the table's count and batch_id should be whole numbers") from None
    truth = _truth(B_REQUESTS)
    assert {p: c for p, (c, _) in stored.items()} == truth, \
        "the counts in the store are not the latest: a replayed or late batch overwrote a newer one"
    assert stored == last, "each path's batch_id should be the last batch that output it"


REPLAYED_BATCH, ZOMBIE_BATCH = 1, 2   # Part C: run 0 dies after the sink committed batch 1, run 1 inside batch 2


def _two_crashes(run):
    """Part C's preconditions: its input, its checkpoint read to the end (batches 0 to 3), and both crashes of
    ``run_with_zombie`` in the plain sink's copy of every attempt: batches 1 and 2 attempted twice each."""
    _require_records(run, "lab04-c-requests", C_REQUESTS["n"])
    ckpt = run.checkpoint("lab04-transactional")
    run.require_reached_end(ckpt, "lab04-c-requests")
    if ckpt.commits()["batch"].tolist() != [0, 1, 2, 3]:
        raise CheckFailed("the count's checkpoint should hold batches 0 to 3 (25 requests each): run the notebook "
                          "once, top to bottom")
    rows = run.output("lab04-c-attempts")
    if not {"batch_id", "path", "count"} <= set(rows.columns):
        raise CheckFailed("topic 'lab04-c-attempts' does not hold the query's counts")
    attempts = Counter(zip(rows["batch_id"], rows["path"], rows["count"]))
    twice = sorted({int(b) for (b, _, _), n in attempts.items() if n == 2})
    if twice != [REPLAYED_BATCH, ZOMBIE_BATCH] or set(attempts.values()) != {1, 2}:
        raise CheckFailed(f"the two crashes did not happen as the lab's cell injects them (batches attempted twice: "
                          f"{twice}); run the notebook top to bottom")
    expected = {(int(b), p, int(c)) for b, p, c in attempts}
    return ckpt, expected


def _json_values(records, topic_name: str) -> list[dict]:
    values = [r["value"] for r in records]
    if not all(isinstance(v, dict) and isinstance(v.get("batch_id"), int) for v in values):
        raise CheckFailed(f"every record of {topic_name} must be a JSON object with an int batch_id")
    return values


@check("test_transactional_exactly_once")
def transactional_sink(run):
    ckpt, expected = _two_crashes(run)
    _trace_counts(run, "Part C, the count per path your sink is given", ckpt, "lab04-c-requests")
    out_topic, audit_topic = run.topic("lab04-tx-out"), run.topic("lab04-tx-audit")
    rows = _json_values(read_committed(out_topic), "TX_TOPIC")
    assert rows, "TX_TOPIC holds no committed rows"
    assert all({"path", "count"} <= set(r) for r in rows), 'every row of TX_TOPIC must be {"path", "count", "batch_id"}'
    committed_rows = Counter((r["batch_id"], r["path"], int(r["count"])) for r in rows)
    twice = sorted({b for (b, _, _), n in committed_rows.items() if n > 1})
    assert not twice, f"batches {twice} were committed to TX_TOPIC twice"
    assert set(committed_rows) == expected, ("TX_TOPIC must hold each batch's output once, as the query output it: "
                                             f"{len(set(committed_rows) - expected)} rows too many, "
                                             f"{len(expected - set(committed_rows))} missing")
    assert sl.latest(pd.DataFrame(sorted(committed_rows), columns=["batch_id", "path", "count"]), "path", "count") \
        == _truth(C_REQUESTS), "the latest counts in TX_TOPIC do not match the requests"
    audit = _json_values(read_committed(audit_topic), "TX_AUDIT")
    batches = sorted(a["batch_id"] for a in audit)
    assert batches == [0, 1, 2, 3], \
        f"TX_AUDIT must hold one committed audit record per batch, 0 to 3; it holds {batches}"
    rows_of, offsets = Counter(b for b, _, _ in committed_rows), ckpt.offsets()
    topic = run.topic("lab04-c-requests")
    for a in audit:
        b = a["batch_id"]
        assert a.get("rows") == rows_of[b], f"batch {b}'s audit record says {a.get('rows')} rows, it wrote {rows_of[b]}"
        assert _offsets_map(a.get("end"), "end") == _ends(offsets, b, topic), \
            f"batch {b}'s audit record must give the input offsets it read up to, from offsets/{b}"
    assert sum(sl.end_offsets(out_topic).values()) > len(rows), \
        "TX_TOPIC's records were not written in Kafka transactions (no commit markers)"


@check("test_zombie_fenced")
def zombie_fenced(run):
    _two_crashes(run)
    out_topic, audit_topic = run.topic("lab04-tx-out"), run.topic("lab04-tx-audit")
    committed = Counter((r["batch_id"], r.get("path")) for r in _json_values(read_committed(out_topic), "TX_TOPIC"))
    sent = Counter((r["batch_id"], r.get("path")) for r in _json_values(run.records("lab04-tx-out"), "TX_TOPIC"))
    mine = {k for k in committed if k[0] == ZOMBIE_BATCH}
    assert mine, f"batch {ZOMBIE_BATCH} was never committed: the new driver must write it (the zombie never commits)"
    assert all(committed[k] == 1 for k in mine), \
        (f"batch {ZOMBIE_BATCH} was committed twice: the zombie's late commit went through, so the broker did not know "
         f"the new driver's producer replaced the zombie's")
    zombie_rows = sent - committed
    assert zombie_rows, ("no record of TX_TOPIC was left uncommitted: the zombie's batch 2 never reached the broker "
                         "(pre_commit must send and flush in an open transaction)")
    assert {b for b, _ in zombie_rows} == {ZOMBIE_BATCH} and set(zombie_rows.values()) == {1}, \
        f"only the zombie's batch {ZOMBIE_BATCH} should be left uncommitted; left: {sorted(zombie_rows)}"
    assert set(zombie_rows) == mine, \
        f"the zombie's uncommitted batch {ZOMBIE_BATCH} should hold the same rows as the new driver's"
    audit_sent = Counter(a["batch_id"] for a in _json_values(run.records("lab04-tx-audit"), "TX_AUDIT"))
    audit_committed = Counter(a["batch_id"] for a in _json_values(read_committed(audit_topic), "TX_AUDIT"))
    assert audit_sent - audit_committed == Counter({ZOMBIE_BATCH: 1}), \
        "the zombie's audit record must be aborted with its rows: one transaction for both topics"


D_REQUESTS = dict(n=90, seed=44)


@check("test_two_states_agree", "test_two_states_values")
def two_kinds_of_state(run):
    topic = _require_records(run, "lab04-d-requests", D_REQUESTS["n"])
    ckpt = run.checkpoint("lab04-two-states")
    run.require_reached_end(ckpt, "lab04-d-requests")
    if ckpt.commits()["batch"].tolist() != [0, 1, 2]:
        raise CheckFailed("the count's checkpoint should hold batches 0, 1 and 2 (30 to 44 records each): "
                          "run the notebook once, top to bottom")
    _trace_counts(run, "Part D, the keyed state your answers describe", ckpt, "lab04-d-requests")
    answers = {r["value"]["batch"]: r["value"] for r in run.records("lab04-two-states-answers")
               if isinstance(r["value"], dict) and isinstance(r["value"].get("batch"), int)}
    assert set(answers) == {1, 2}, f"expected the answers for batches 1 and 2, found {sorted(answers)}"
    offsets, records, spark = ckpt.offsets(), run.records("lab04-d-requests"), run.spark()
    for batch, answer in sorted(answers.items()):
        source = _offsets_map(answer.get("source"), "source")
        ends = _ends(offsets, batch, topic)
        assert source == ends, f"as of batch {batch} the source had read up to {ends}, the answer says {source}"
        # keyed state, from the input itself: every record below the source's offsets, counted once
        read = Counter(r["value"]["path"] for r in records if r["offset"] < ends.get(r["partition"], 0))
        keyed = _int_map(answer.get("keyed"), "keyed")
        assert keyed == dict(read), f"as of batch {batch} the keyed state counts {dict(read)}, the answer says {keyed}"
        state = ckpt.state_table(spark, batchId=batch)
        assert dict(zip(state["path"], state["count"])) == dict(read), \
            f"the checkpoint's state as of batch {batch} does not count the records read: run the cells as they are"
        partition_of = _int_map(answer.get("partition_of"), "partition_of")
        assert partition_of == {p: int(n) for p, n in zip(state["path"], state["partition_id"])}, \
            f"partition_of (batch {batch}) must name the state partition that holds each path"
