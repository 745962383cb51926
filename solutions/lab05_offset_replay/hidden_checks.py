"""Hidden checks for Lab 05 (run by the grader in its own process, after the notebook ran).

Every expected value is computed here from the seeded generators and from what Kafka holds: which
records exist at which (partition, offset) and with which timestamp. Nothing the notebook reports
is trusted; the parts are judged by what their queries wrote to the output topics and left in
their checkpoints.
"""
from __future__ import annotations

from collections import Counter

import streamlab as sl
from streamlab.grading.hidden_checks import CheckFailed, check

RANGE_START, RANGE_END = "2026-01-01T09:00:20Z", "2026-01-01T09:00:50Z"
REQUESTS = sl.access_log(90, seed=51)
JOB_LOG = sl.access_log(100, seed=52)
EXTRA = sl.access_log(10, seed=53)


def _event(value) -> tuple:
    """(method, path, time in ms) of an input record's value or of an output row."""
    if not isinstance(value, dict) or not {"method", "path", "ts"} <= set(value):
        raise CheckFailed(f"a record is not a request: {str(value)[:80]}")
    return value["method"], value["path"], sl.m05.to_millis(value["ts"])


def _input(run, name: str, *allowed: list[dict]) -> dict[tuple[int, int], dict]:
    """{(partition, offset): record} of an input topic, after checking it holds exactly one of the
    ``allowed`` lists of seeded events (nothing added, nothing removed)."""
    records = run.records(name)
    got = Counter(_event(r["value"]) for r in records)
    if all(got != Counter(_event(e) for e in events) for events in allowed):
        raise CheckFailed(f"the topic {name!r} does not hold the lab's seeded requests: it was changed")
    return {(r["partition"], r["offset"]): r for r in records}


def _pairs(rows) -> list[tuple[int, int]]:
    if rows.empty or not {"partition", "offset"} <= set(rows.columns):
        raise CheckFailed("the output has no rows with Kafka `partition` and `offset` columns")
    return [(int(p), int(o)) for p, o in zip(rows["partition"], rows["offset"])]


@check("test_range_rows", "test_range_offsets")
def time_range(run):
    # The requests reach Kafka out of time order (sl.m05.arrival_order): the range is judged by each stored
    # record's own timestamp, never by the offsets Kafka gives for the range's two ends.
    records = _input(run, "lab05-requests", REQUESTS)
    start, end = sl.m05.to_millis(RANGE_START), sl.m05.to_millis(RANGE_END)
    expected = {pair for pair, r in records.items() if start <= r["timestamp"] < end}
    if len(expected) < 10:
        raise CheckFailed("the requests topic's timestamps are not the requests' times: it was not written by the lab")
    rows = run.output("lab05-range-out")
    pairs = _pairs(rows)
    assert len(pairs) == len(set(pairs)), "Part A: a record was read twice"
    missing, extra = expected - set(pairs), set(pairs) - expected
    assert not extra, f"Part A: {len(extra)} records read are outside the time range"
    assert not missing, f"Part A: {len(missing)} records of the time range were not read"
    for pair, row in zip(pairs, rows.to_dict("records")):
        assert _event(row) == _event(records[pair]["value"]), \
            f"Part A: the row for partition {pair[0]}, offset {pair[1]} is not the record stored there"


def _job_positions(run):
    """The job topic's records, and where version 1 committed: the first 60 requests were written
    before it ran, so per partition it committed up to just after the last of them."""
    records = _input(run, "lab05-jobinput", JOB_LOG, JOB_LOG + EXTRA)  # EXTRA: once Part C ran
    first_60 = Counter(_event(e) for e in JOB_LOG[:60])
    committed: dict[int, int] = {}
    for (partition, offset), record in sorted(records.items()):
        event = _event(record["value"])
        if first_60[event] > 0:
            first_60[event] -= 1
            committed[partition] = max(committed.get(partition, 0), offset + 1)
    partitions = sorted({p for p, _ in records})
    if partitions != [0, 1, 2]:
        raise CheckFailed(f"the job topic should have partitions 0, 1 and 2, it has {partitions}")
    return records, {p: committed.get(p, 0) for p in partitions}


def _job_checkpoint_as_played(run):
    """Version 1's checkpoint as the lab's story left it: batch 0 committed, batch 1 written, not committed."""
    ckpt = run.checkpoint("lab05-job")
    written = sorted(set(ckpt.offsets()["batch"]))
    committed = ckpt.commits()["batch"].tolist()
    if committed != [0] or written != [0, 1]:
        raise CheckFailed(f"version 1's checkpoint should hold batches 0 (committed) and 1 (crashed), "
                          f"it holds {written} with {committed} committed")
    return ckpt


@check("test_oldest_partitions", "test_oldest_new_partition")
def oldest_unread(run):
    _job_checkpoint_as_played(run)
    records, committed = _job_positions(run)
    extra = Counter(_event(e) for e in EXTRA)
    # The answer was given before Part C added EXTRA: per partition, the timestamp of the record at the committed
    # position among the job log's own records (None where the partition had nothing after it).
    expected: dict[int, int | None] = {p: None for p in committed}
    for (partition, offset), record in records.items():
        if offset == committed[partition] and not _is_extra(_event(record["value"]), extra):
            expected[partition] = record["timestamp"]
    if any(record["timestamp"] != _event(record["value"])[2] for record in records.values()
           if not _is_extra(_event(record["value"]), extra)):
        raise CheckFailed("the job topic's timestamps are not the requests' times: it was not written by the lab")
    answers = [r["value"] for r in run.records("lab05-oldest-answer")]
    try:
        got = {int(a["partition"]): a["oldest"] for a in answers}
    except (TypeError, KeyError, ValueError) as err:
        raise CheckFailed(f"Part B: the answer is not a {{partition: time}} dict ({type(err).__name__})") from None
    assert len(got) == len(answers), "Part B: a partition has several times"
    shown = {p: None if t is None else sl.m05.to_iso(t) for p, t in sorted(expected.items())}
    assert got == expected, f"Part B: expected the oldest requests not counted at {shown}, your function gave {got}"


def _is_extra(event, extra: Counter) -> bool:
    return extra[event] > 0


@check("test_continue_first", "test_continue_restart")
def continue_from(run):
    _job_checkpoint_as_played(run)
    records, committed = _job_positions(run)
    if len(records) != len(JOB_LOG) + len(EXTRA):
        raise CheckFailed("Part C's cell did not run to the end: the 10 requests of the restart are not in the topic")
    v2 = run.checkpoint("lab05-v2")
    run.require_reached_end(v2, "lab05-jobinput")
    expected = {pair for pair in records if pair[1] >= committed[pair[0]]}
    rows = run.output("lab05-v2-out")
    pairs = _pairs(rows)
    assert len(pairs) == len(set(pairs)), "Part C: version 2 read a record twice"
    reread = set(pairs) - expected
    assert not reread, f"Part C: version 2 read {len(reread)} records version 1 had already committed"
    skipped = expected - set(pairs)
    assert not skipped, f"Part C: version 2 skipped {len(skipped)} records version 1 never committed"
    for pair, row in zip(pairs, rows.to_dict("records")):
        assert (row.get("method"), row.get("path")) == _event(records[pair]["value"])[:2], \
            f"Part C: the row for partition {pair[0]}, offset {pair[1]} is not the record stored there"
    # The restart: the 10 extra requests come in later batches than the 40 of the first run.
    extra = Counter(_event(e) for e in EXTRA)
    batch_of = {pair: int(b) for pair, b in zip(pairs, rows["batch_id"])}
    late = [batch_of[p] for p in expected if _is_extra(_event(records[p]["value"]), extra)]
    early = [batch_of[p] for p in expected if not _is_extra(_event(records[p]["value"]), extra)]
    assert len(late) == len(EXTRA) and len(early) == 40, "Part C: expected 40 records, then 10 after the restart"
    assert min(late) > max(early), "Part C: the restart should read only the new records, in its own batches"
    assert v2.commits()["batch"].nunique() >= 2, "Part C: version 2 should have committed batches in both runs"


HISTORY_LOG = sl.access_log(120, seed=54)
AS_OF = 2


def _counts(state) -> dict[str, int]:
    """{method: count} of a count query's state table, after checking it is keyed by method."""
    if state.empty or not {"method", "count"} <= set(state.columns):
        raise CheckFailed(f"the state is not a count per method (columns {list(state.columns)})")
    return {m: int(n) for m, n in zip(state["method"], state["count"])}


def _rebuilt_by_batch(new, topic: str, records: dict, read_by_then: dict[int, int]) -> dict[int, dict]:
    """{batch: {method: count}} a right rebuild holds after each of its batches: the records it had read by then
    that the job had read by batch AS_OF."""
    offsets = new.offsets()
    offsets = offsets[offsets["topic"] == topic]
    committed, expected = set(new.commits()["batch"]), {}
    for batch, group in offsets.groupby("batch"):
        if batch in committed:
            ends = {int(p): min(int(o), read_by_then.get(int(p), 0)) for p, o in zip(group["partition"],
                                                                                     group["offset"])}
            expected[int(batch)] = dict(Counter(r["value"]["method"] for (p, o), r in records.items()
                                                if o < ends.get(p, 0)))
    return expected


@check("test_rebuild_state")
def rebuild_state(run):
    records = _input(run, "lab05-history", HISTORY_LOG)
    if sorted({p for p, _ in records}) != [0, 1, 2]:
        raise CheckFailed("the history topic should have partitions 0, 1 and 2: run Part D's cells as they are")
    old = run.checkpoint("lab05-history")
    run.require_reached_end(old, "lab05-history")
    if AS_OF not in old.commits()["batch"].tolist() or old.commits()["batch"].max() <= AS_OF + 1:
        raise CheckFailed(f"the job's checkpoint should have committed batch {AS_OF} and later batches: "
                          "run Part D's cells as they are")
    topic = run.topic("lab05-history")
    planned = old.offsets()
    planned = planned[(planned["batch"] == AS_OF) & (planned["topic"] == topic)]
    read_by_then = {int(p): int(o) for p, o in zip(planned["partition"], planned["offset"])}
    expected = Counter(r["value"]["method"] for (p, o), r in records.items() if o < read_by_then.get(p, 0))
    spark = run.spark()
    assert _counts(old.state_table(spark, batchId=AS_OF)) == dict(expected), \
        f"the job's checkpoint does not hold the counts of what it read by batch {AS_OF}: run Part D's cells as is"
    new = run.checkpoint("lab05-rebuild")
    if new.query_id() == old.query_id():
        raise CheckFailed("the rebuild must run with a new checkpoint, not a copy of the job's")
    got = _counts(new.state_table(spark))
    diverged = run.trace_state("Part D, the rebuilt count per method", new,
                               _rebuilt_by_batch(new, topic, records, read_by_then),
                               lambda table: _counts(table) if len(table) else {})
    also = f" (it first differed after batch {diverged})" if diverged is not None else ""
    assert sum(got.values()) == sum(expected.values()), \
        (f"Part D: by the end of batch {AS_OF} the job had read {sum(expected.values())} records; the rebuilt state "
         f"counts {sum(got.values())}{also}")
    assert got == dict(expected), f"Part D: the rebuilt state per method should be {dict(expected)}, it is {got}{also}"
    out = run.output("lab05-rebuild-out")
    if not {"method", "count"} <= set(out.columns):
        raise CheckFailed("Part D: the rebuild's output topic holds no counts per method")
    assert {m: int(n) for m, n in sl.latest(out, "method", "count").items()} == dict(expected), \
        "Part D: the rebuild's output must end with the same counts as its state"
