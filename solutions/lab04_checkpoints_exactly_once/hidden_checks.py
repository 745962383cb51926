"""Hidden checks for Lab 04 (run by the grader in its own process, after the notebook ran).

Expected values come from the seeded generators and from the artifacts Spark and the killed job wrote
(checkpoints, Kafka topics, the SQLite store) — never from what the notebook reports.
"""
from __future__ import annotations

import sqlite3
from collections import Counter

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
    stores = sorted((run.data / "stores").glob("lab04-store-*.sqlite"))
    if len(stores) != 1:
        raise CheckFailed(f"expected one SQLite store lab04-store-*.sqlite, found {len(stores)}")
    try:
        with sqlite3.connect(f"file:{stores[0]}?mode=ro", uri=True) as db:
            table = db.execute("SELECT batch_id, path, count FROM counts").fetchall()
    except sqlite3.Error as err:
        raise CheckFailed(f"the store has no readable table counts(batch_id, path, count): {err}") from None
    assert table, "the store's table is empty"
    keys = [(int(b), p) for b, p, _ in table]
    assert len(keys) == len(set(keys)), f"{len(keys) - len(set(keys))} rows are in the store twice"
    expected = {(int(b), p, int(c)) for b, p, c in zip(attempts["batch_id"], attempts["path"], attempts["count"])}
    stored = {(int(b), p, int(c)) for b, p, c in table}
    assert stored == expected, (f"the store should hold each batch's output once ({len(expected)} rows); it holds "
                                f"{len(stored & expected)} of them and {len(stored - expected)} other rows")
    latest = {}
    for _batch, p, c in sorted(stored):
        latest[p] = c
    assert latest == _truth(B_REQUESTS), "the latest counts in the store do not match the requests"
    committed = set(ckpt.commits()["batch"])
    assert {b for b, _ in keys} <= committed, "the store holds batches the query never committed"


@check("test_transactional_exactly_once")
def transactional_sink(run):
    _require_records(run, "lab04-c-requests", C_REQUESTS["n"])
    ckpt = run.checkpoint("lab04-transactional")
    run.require_reached_end(ckpt, "lab04-c-requests")
    attempts = _attempts(run, "lab04-c-attempts")
    out_topic, marks_topic = run.topic("lab04-tx-out"), run.topic("lab04-tx-batches")
    rows = [r["value"] for r in read_committed(out_topic)]
    assert rows, "TX_TOPIC holds no committed rows"
    assert all(isinstance(r, dict) and {"batch_id", "path", "count"} <= set(r) for r in rows), \
        'every record of TX_TOPIC must be a JSON row {"path", "count", "batch_id"}'
    keys = [(r["batch_id"], r["path"]) for r in rows]
    assert len(keys) == len(set(keys)), f"{len(keys) - len(set(keys))} rows were committed twice"
    expected = {(int(b), p, int(c)) for b, p, c in zip(attempts["batch_id"], attempts["path"], attempts["count"])}
    committed_rows = {(int(r["batch_id"]), r["path"], int(r["count"])) for r in rows}
    assert committed_rows == expected, "TX_TOPIC must hold each batch's output once, as the query output it"
    latest = {}
    for _batch, p, c in sorted(committed_rows):
        latest[p] = c
    assert latest == _truth(C_REQUESTS), "the latest counts in TX_TOPIC do not match the requests"
    marks = [r["value"].get("batch_id") for r in read_committed(marks_topic) if isinstance(r["value"], dict)]
    assert sorted(marks) == sorted(set(marks)) and set(marks) == {b for b, _, _ in committed_rows}, \
        "TX_BATCHES must hold each written batch id once"
    held = sum(sl.end_offsets(out_topic).values())
    assert held > len(rows), "TX_TOPIC's records were not written in Kafka transactions (no commit markers)"


D_REQUESTS = dict(n=90, seed=44)


@check("test_two_states_agree", "test_two_states_values")
def two_kinds_of_state(run):
    topic = _require_records(run, "lab04-d-requests", D_REQUESTS["n"])
    ckpt = run.checkpoint("lab04-two-states")
    run.require_reached_end(ckpt, "lab04-d-requests")
    if ckpt.commits()["batch"].tolist() != [0, 1, 2]:
        raise CheckFailed("the count's checkpoint should hold batches 0, 1 and 2 (30 to 44 records each): "
                          "run the notebook once, top to bottom")
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
