"""Hidden checks of Lab 06 (never released): run by the grader in its own process after the notebook ran.

Every expected value is computed here from the lab's seeded events and the micro-batches the query's
checkpoint actually committed (which offsets each batch read). The rules Spark 4.2 and 4.3 apply, verified in
notebook 06 and in tests/test_event_time.py:

* batch k uses watermark wm(k) = max(wm(k-1), latest event time of batches < k - delay), wm(0) = 0;
* a window is output (append mode) and leaves the state in the first batch k with end <= wm(k);
* a (reading, window) pair is dropped as late in batch k when the window's end <= wm(k-1);
* transformWithState (Part C) drops a reading whose event time is <= wm(k-1) before the processor sees it; in
  batch k it hands the processor every key's readings first, then fires the event-time timers due at wm(k)
  (expiry <= wm(k)), also those registered earlier in the same batch (measured on pyspark 4.2.1 and 4.3.0: the
  reference solution's output equals ``_windows_expected``).

Parts C and D also check that their input topic holds the lab's readings and that the checkpoint committed the
lab's micro-batch cut: a submission that changes the cut (tests/submissions/lab06_event_time_watermarks/rewired.py
reads Part C in one batch) would make a wrong processor look right.
"""
from __future__ import annotations

import numbers
from collections import Counter
from datetime import UTC, datetime

import pandas as pd

from streamlab.grading.hidden_checks import CheckFailed, check
from streamlab.lessons.events import timed_events
from streamlab.lessons.m02_keyed_state import state_variable, state_variables, timers
from streamlab.lessons.m06_event_time import quiet_spells

EVENTS = timed_events(150, seed=61, late=0.06, late_by_s=50)
BATCH = 25
DELAY_MS = 10_000
READINGS = quiet_spells(EVENTS, seed=8, spells=4, length_s=(20, 40))   # Part C's input
WINDOW_SIZE = 6                                                          # Part C: readings per full window
QUIET_MS = 10_000                                                        # Part C: quiet after this, in event time
QUIET_DELAY_MS = 5_000                                                   # Part C's watermark
LATE_S = 10                                                              # Part D: behind by more = late
REPLAY_SIZES = (25, 75)                                                  # Part D: records per micro-batch


# ----------------------------------------------------------------------------- reading the artifacts

def _ms(text) -> int:
    return int(datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() * 1000)


def _events(run, name: str = "lab06-events", events: list[dict] = EVENTS) -> list[dict]:
    """The input topic ``name``, in offset order: it must hold exactly ``events`` (the lab's), in that order (a
    submission that changes what a locked cell sends would make a wrong answer look right)."""
    records = sorted(run.records(name), key=lambda r: (r["partition"], r["offset"]))
    if [r["value"] for r in records] != events:
        raise CheckFailed(f"the topic {name} does not hold the lab's {len(events)} readings in their arrival order")
    return events


def _batches(run, ckpt, batch_size: int = BATCH, name: str = "lab06-events",
             events: list[dict] = EVENTS) -> list[tuple[int, int, int, int]]:
    """(batch id, first offset, end offset, watermark used) of every committed batch of ``ckpt``, which must
    have read the topic ``name`` (holding ``events``) ``batch_size`` records per micro-batch."""
    run.require_reached_end(ckpt, name)
    topic = run.topic(name)
    offsets = ckpt.offsets()
    offsets = offsets[offsets["topic"] == topic]
    committed = sorted(int(b) for b in ckpt.commits()["batch"])
    if committed != list(range(len(committed))):
        raise CheckFailed(f"the checkpoint's committed batches are {committed}: "
                          "run the query once, from a fresh checkpoint")
    batches, start = [], 0
    for batch in committed:
        row = offsets[offsets["batch"] == batch]
        if len(row) != 1:
            raise CheckFailed(f"batch {batch} of the checkpoint did not read {name}")
        end = int(row["offset"].iloc[0])
        batches.append((batch, start, end, int(row["watermark_ms"].iloc[0] or 0)))
        start = end
    sizes = [end - first for _, first, end, _ in batches if end > first]
    if len(sizes) != -(-len(events) // batch_size) or any(size != batch_size for size in sizes[:-1]):
        raise CheckFailed(f"the micro-batches read {sizes} records: the query must read the stream it was given")
    return batches


def _window_of(row) -> tuple[int, int]:
    window = row.get("window")
    if isinstance(window, dict) and "start" in window and "end" in window:
        return _ms(window["start"]), _ms(window["end"])
    if "window_start" in row and "window_end" in row:
        return _ms(row["window_start"]), _ms(row["window_end"])
    raise CheckFailed(f"an output row has no window column: {sorted(row)}")


def _output(run, name: str, columns: set[str]) -> list[dict]:
    frame = run.output(name)
    if frame.empty:
        raise CheckFailed("the query output nothing")
    rows = frame.to_dict("records")
    missing = columns - set(rows[0])
    if missing:
        raise CheckFailed(f"the output has no column(s) {sorted(missing)}; it has {sorted(rows[0])}")
    return rows


def _window_state(run, ckpt) -> set[tuple[str, int, int]]:
    """{(sensor, window start ms, window end ms)} held in the aggregation's state after the last batch."""
    from pyspark.sql.types import StructType

    state = ckpt.state(run.spark())
    key_type = state.schema["key"].dataType
    names = key_type.fieldNames()
    windows = [f.name for f in key_type.fields
               if isinstance(f.dataType, StructType) and {"start", "end"} <= set(f.dataType.fieldNames())]
    if "sensor" not in names or not windows:
        raise CheckFailed(f"the state is not keyed by sensor and window: its key has {names}")
    rows = state.selectExpr("key.sensor AS sensor", f"unix_millis(key.`{windows[0]}`.start) AS start",
                            f"unix_millis(key.`{windows[0]}`.end) AS end").collect()
    return {(r["sensor"], int(r["start"]), int(r["end"])) for r in rows}


# ----------------------------------------------------------------------------- what Spark must have done

def _simulate(events, batches, size_s: int, slide_s: int, delay_ms: int = DELAY_MS):
    """Expected windowed aggregation over the committed ``batches`` (see the module doc).

    Returns (watermarks {batch: ms}, output {(batch, sensor, start, end): [events]},
    dropped [(event id, window start)], open windows {(sensor, start, end)},
    the windows held after each batch {batch: {window label: readings}}).
    """
    size, slide = size_s * 1000, slide_s * 1000
    state: dict[tuple[str, int, int], list[dict]] = {}
    output, dropped, watermarks, held_after = {}, [], {}, {}
    watermark, previous, latest = 0, 0, None
    for batch, first, end, _ in batches:
        watermarks[batch] = watermark
        for event in events[first:end]:
            t = _ms(event["event_time"])
            last_start = t - t % slide
            for start in range(last_start - size + slide, last_start + 1, slide):
                if not start <= t < start + size:
                    continue
                if start + size <= previous:
                    dropped.append((event["id"], start))
                    continue
                state.setdefault((event["sensor"], start, start + size), []).append(event)
            latest = t if latest is None else max(latest, t)
        for key in sorted(k for k in state if k[2] <= watermark):
            output[(batch,) + key] = state.pop(key)
        held_after[batch] = {_window_label(*key): len(v) for key, v in state.items()}
        previous = watermark
        if latest is not None:
            watermark = max(watermark, latest - delay_ms)
    return watermarks, output, dropped, set(state), held_after


def _window_label(sensor: str, start_ms: int, end_ms: int) -> str:
    return (f"{sensor} {datetime.fromtimestamp(start_ms / 1000, UTC):%H:%M:%S}-"
            f"{datetime.fromtimestamp(end_ms / 1000, UTC):%H:%M:%S}")


def _is_window(value) -> bool:
    """A window struct as pandas gives it: a dict (through Arrow) or a Row, with a start and an end."""
    fields = value.asDict() if hasattr(value, "asDict") else value if isinstance(value, dict) else {}
    return {"start", "end"} <= set(fields)


def _windows_held(table) -> dict[str, int]:
    """{window label: readings counted} of an aggregation's state table (one row per sensor and window),
    for the state trace: the window column is the key's struct with a start and an end; the count is the
    value's one whole number, or else the length of its one list (the ids collected); None if neither."""
    if table.empty:
        return {}
    first = table.iloc[0]
    windows = [c for c in table.columns if _is_window(first[c])]
    if "sensor" not in table.columns or not windows:
        raise CheckFailed(f"the state is not keyed by sensor and window: its columns are {list(table.columns)}")
    values = [c for c in table.columns if c not in ("sensor", "partition_id", windows[0])]
    whole = [c for c in values if isinstance(first[c], numbers.Integral)]
    lists = [c for c in values if hasattr(first[c], "__len__") and not isinstance(first[c], str | bytes)]
    held = {}
    for _, row in table.iterrows():
        window = row[windows[0]]  # naive times are the session's, UTC
        label = _window_label(row["sensor"], int(pd.Timestamp(window["start"]).timestamp() * 1000),
                              int(pd.Timestamp(window["end"]).timestamp() * 1000))
        held[label] = int(row[whole[0]]) if len(whole) == 1 else len(row[lists[0]]) if len(lists) == 1 else None
    return held


def _require_watermarks(batches, expected: dict[int, int], delay_s: int = DELAY_MS // 1000) -> None:
    for batch, _, _, used in batches:
        if used != expected[batch]:
            raise CheckFailed(f"batch {batch} used the watermark {used} ms, expected {expected[batch]} ms: "
                              f"declare a {delay_s}-second watermark on event_time, before the aggregation")


def _compare(got: dict, expected: dict, what: str) -> None:
    if got == expected:
        return
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    if missing or extra:
        def label(key):
            return f"{key[1]} window starting {datetime.fromtimestamp(key[2] / 1000, UTC):%H:%M:%S} (batch {key[0]})"
        detail = f"missing {label(missing[0])}" if missing else f"unexpected {label(extra[0])}"
        raise CheckFailed(f"{len(missing)} {what} missing and {len(extra)} unexpected: {detail}")
    wrong = next(k for k in expected if got[k] != expected[k])
    raise CheckFailed(f"the {what} for sensor {wrong[1]} at {datetime.fromtimestamp(wrong[2] / 1000, UTC):%H:%M:%S} "
                      f"is {got[wrong]}, expected {expected[wrong]}")


# ----------------------------------------------------------------------------- Part A

def _answered_delay(run) -> int:
    answers = [r["value"] for r in run.records("lab06-delay-answer")]
    if len(answers) != 1 or not isinstance(answers[0], dict) or not isinstance(answers[0].get("delay_s"), int) \
            or isinstance(answers[0].get("delay_s"), bool):
        raise CheckFailed(f"Part A's answer is not one whole number of seconds: {str(answers)[:80]}")
    return answers[0]["delay_s"]


def _windowed_run(run, name: str, size_s: int, slide_s: int, delay_s: int, *, query: str, what: str,
                  trace: str | None = None):
    """The run of a given windowed query kept under checkpoint ``name`` (output topic ``<name>-out``), checked against
    the simulation of ``size_s``-second windows every ``slide_s`` seconds with a ``delay_s``-second watermark: the
    same watermarks, the same final windows (each with its count and ids). ``trace``: the state trace's title,
    drawn before the checks. Returns the checkpoint, its batches and the simulation."""
    events = _events(run)
    ckpt = run.checkpoint(name)
    batches = _batches(run, ckpt)
    simulated = _simulate(events, batches, size_s, slide_s, delay_s * 1000)
    watermarks, expected, _, _, held_after = simulated
    if trace:
        run.trace_state(trace, ckpt, held_after, _windows_held)
    _require_watermarks(batches, watermarks, delay_s)
    rows = _output(run, f"{name}-out", {"sensor", "count", "ids", "batch_id"})
    got = {}
    for row in rows:
        key = (row["batch_id"], row["sensor"]) + _window_of(row)
        if key in got:
            raise CheckFailed(f"a window was output twice: {query} runs in append mode")
        got[key] = (int(row["count"]), tuple(sorted(int(i) for i in row["ids"])))
    _compare(got, {k: (len(v), tuple(sorted(e["id"] for e in v))) for k, v in expected.items()}, what)
    return ckpt, batches, simulated


def _tumbling(run, name: str, delay_s: int):
    """The run of the lesson's tumbling count kept under checkpoint ``name``, checked against the simulation with
    ``delay_s``. Returns the checkpoint, its batches, the simulation's dropped readings and the windows held."""
    ckpt, batches, (_, _, dropped, _, held_after) = _windowed_run(
        run, name, 10, 10, delay_s, query="the lesson's query", what="final window(s)")
    return ckpt, batches, dropped, held_after


def _smallest_safe(batches) -> int:
    """The smallest whole number of seconds of delay with which the simulation drops nothing, on these batches."""
    delay_s = 0
    while _simulate(EVENTS, batches, 10, 10, delay_s * 1000)[2]:
        delay_s += 1
    return delay_s


@check("test_safe_keeps_all")
def safe_keeps_all(run):
    delay_s = _answered_delay(run)
    if not 0 <= delay_s <= 3600:
        raise CheckFailed(f"Part A: {delay_s} s is not a delay this replay can use")
    ckpt, _, dropped, held_after = _tumbling(run, "lab06-safe", delay_s)
    run.trace_state(f"Part A, the open windows with a {delay_s}-second delay (readings counted in each)", ckpt,
                    held_after, _windows_held)
    assert not dropped, f"Part A: with {delay_s} s the query drops the readings {sorted(i for i, _ in dropped)}"


@check("test_safe_is_smallest")
def safe_is_smallest(run):
    delay_s = _answered_delay(run)
    _, batches, _, _ = _tumbling(run, "lab06-safe", delay_s)
    smallest = _smallest_safe(batches)
    if delay_s - 1 >= 0:
        _tumbling(run, "lab06-tighter", delay_s - 1)
    assert delay_s == smallest, (f"Part A: {delay_s} s is not the smallest delay that loses nothing"
                                 + (": a smaller one does" if delay_s > smallest else ""))


# ----------------------------------------------------------------------------- Part B

@check("test_half_counted")
def half_counted(run):
    # the given query's run is what the simulation says (so the answer is judged against what Spark did)
    ckpt, _, (_, _, dropped, still_open, _) = _windowed_run(
        run, "lab06-sliding", 20, 10, DELAY_MS // 1000, query="the given query", what="sliding window(s)",
        trace="Part B, the open windows (readings counted in each)")
    if _window_state(run, ckpt) != still_open:
        raise CheckFailed("the sliding query's state does not hold the windows still open")
    answers = [r["value"] for r in run.records("lab06-half-answer")]
    if len(answers) != 1 or not isinstance(answers[0], dict) or not isinstance(answers[0].get("ids"), list):
        raise CheckFailed(f"Part B's answer is not one list of ids: {str(answers)[:80]}")
    per_reading = Counter(i for i, _ in dropped)
    want = sorted(i for i, n in per_reading.items() if n == 1)
    assert sorted(answers[0]["ids"]) == want, \
        f"Part B: the readings counted in one window only are {want}, your answer is {sorted(answers[0]['ids'])}"


# ----------------------------------------------------------------------------- Part C

def _declared(run, ckpt, name: str, kind: str, time_mode: str) -> None:
    """Fails unless ``ckpt`` is a transformWithState checkpoint that declared the state variable ``name`` as a
    ``kind`` and ran in ``time_mode``."""
    try:
        declared = state_variables(ckpt, run.spark())
    except Exception as err:  # no readable state metadata: not a stateful query's checkpoint
        raise CheckFailed(f"the checkpoint holds no transformWithState state ({type(err).__name__})") from None
    found = declared[declared["variable"] == name]
    if found.empty:
        raise CheckFailed(f"no state variable called {name!r}; the processor declared {sorted(declared['variable'])}")
    if found["type"].iloc[0] != kind:
        raise CheckFailed(f"{name!r} is a {found['type'].iloc[0]}, not a {kind}")
    if found["time_mode"].iloc[0] != time_mode:
        raise CheckFailed(f"the processor runs with time mode {found['time_mode'].iloc[0]!r}, not {time_mode!r}")


def _windows_expected(batches):
    """What a correct CountOrQuiet does over the committed ``batches`` of READINGS: (output {(batch, sensor, ids):
    (closed_by, mean)}, pending {sensor: [ids]}, timers {sensor: ms}).

    Batch k runs with the watermark wm(k) (module doc, with Part C's 5-second delay). Spark first drops the readings
    whose event time is <= wm(k-1) (late for a stateful operator), then hands each sensor its readings in offset
    order: a pending window already quiet at wm(k) (latest event time + QUIET_MS <= wm(k)) is output as quiet before
    the reading is added; a window of WINDOW_SIZE readings is output by count. Then the timers due at wm(k) fire:
    the windows still pending whose latest reading + QUIET_MS <= wm(k) are output as quiet. Also returned, last:
    the pending ids of each sensor after each batch {batch: {sensor: ids}}, for the state trace."""
    pending: dict[str, list[dict]] = {}
    output, pending_after = {}, {}

    def close(batch, sensor, why):
        window = pending.pop(sensor)
        output[(batch, sensor, tuple(e["id"] for e in window))] = (why, sum(e["value"] for e in window) / len(window))

    def due(sensor):
        return max(_ms(e["event_time"]) for e in pending[sensor]) + QUIET_MS

    watermark, previous, latest = 0, 0, None
    for batch, first, end, _ in batches:
        for event in READINGS[first:end]:
            t, sensor = _ms(event["event_time"]), event["sensor"]
            if t <= previous:   # late for a stateful operator: Spark drops it
                continue
            if sensor in pending and due(sensor) <= watermark:
                close(batch, sensor, "quiet")
            pending.setdefault(sensor, []).append(event)
            if len(pending[sensor]) == WINDOW_SIZE:
                close(batch, sensor, "count")
        for sensor in sorted(s for s in pending if due(s) <= watermark):
            close(batch, sensor, "quiet")
        for event in READINGS[first:end]:
            t = _ms(event["event_time"])
            latest = t if latest is None else max(latest, t)
        previous = watermark
        if latest is not None:
            watermark = max(watermark, latest - QUIET_DELAY_MS)
        pending_after[batch] = {s: tuple(sorted(e["id"] for e in w)) for s, w in pending.items()}
    return (output, {s: [e["id"] for e in w] for s, w in pending.items()}, {s: due(s) for s in pending},
            pending_after)


def _count_windows(run):
    _events(run, "lab06-quiet", READINGS)
    ckpt = run.checkpoint("lab06-count")
    batches = _batches(run, ckpt, BATCH, "lab06-quiet", READINGS)
    expected_watermarks, watermark, latest = {}, 0, None
    for batch, first, end, _ in batches:
        expected_watermarks[batch] = watermark
        for event in READINGS[first:end]:
            t = _ms(event["event_time"])
            latest = t if latest is None else max(latest, t)
        watermark = max(watermark, latest - QUIET_DELAY_MS)
    for batch, _, _, used in batches:
        if used != expected_watermarks[batch]:
            raise CheckFailed(f"batch {batch} used the watermark {used} ms, expected {expected_watermarks[batch]} ms: "
                              f"declare a 5-second watermark on event_time, before transformWithState")
    _declared(run, ckpt, "pending", "ListState", "EventTime")
    return ckpt, _windows_expected(batches)


@check("test_count_rows")
def count_rows(run):
    _, (expected, _, _, _) = _count_windows(run)
    rows = _output(run, "lab06-count-out", {"sensor", "ids", "mean_value", "closed_by", "batch_id"})
    got = {(row["batch_id"], row["sensor"], tuple(int(i) for i in row["ids"])): (row["closed_by"],
                                                                                 float(row["mean_value"]))
           for row in rows}
    if len(got) != len(rows):
        raise CheckFailed("a window was output twice")
    missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    if missing or extra:
        batch, sensor, ids = (missing or extra)[0]
        raise CheckFailed(f"{len(missing)} window(s) missing, {len(extra)} unexpected, e.g. "
                          f"{'missing' if missing else 'unexpected'}: {sensor} {list(ids)} in batch {batch} "
                          f"(a window closes by count in arrival order, or as quiet in the first batch whose "
                          f"watermark has reached its latest reading + 10 s)")
    for key, (why, mean) in expected.items():
        if got[key][0] != why:
            raise CheckFailed(f"window {list(key[2])} closed_by is {got[key][0]!r}, expected {why!r}")
        if abs(got[key][1] - mean) > 1e-6:
            raise CheckFailed(f"the mean of window {list(key[2])} is {got[key][1]}, expected {mean}")


def _pending_ids(table) -> dict[str, list[int]]:
    if "sensor" not in table.columns or "id" not in table.columns:
        raise CheckFailed(f"the pending list state needs the fields id, value and event_ms; "
                          f"it has {sorted(table.columns)}")
    got: dict[str, list[int]] = {}
    for sensor, ident in zip(table["sensor"], table["id"]):
        got.setdefault(sensor, []).append(int(ident))
    return got


@check("test_count_state")
def count_state(run):
    ckpt, (_, expected, due, pending_after) = _count_windows(run)
    table = state_variable(ckpt, "pending", run.spark())
    got = _pending_ids(table)
    run.trace_state("Part C, pending (the ids each sensor's open window holds)", ckpt, pending_after,
                    lambda rows: {s: tuple(sorted(ids)) for s, ids in _pending_ids(rows).items()},
                    stateVarName="pending")
    if {s: sorted(i) for s, i in got.items()} != {s: sorted(i) for s, i in expected.items()}:
        raise CheckFailed(f"the pending state holds {got}, expected {expected}")
    registered = timers(ckpt, run.spark())
    found = sorted((s, int(t.value // 1_000_000)) for s, t in zip(registered["sensor"], registered["expires_at"]))
    if found != sorted(due.items()):
        raise CheckFailed(f"{len(found)} timer(s) left, expected one per sensor with pending readings "
                          f"({len(due)}), each at its latest pending reading + 10 s")


# ----------------------------------------------------------------------------- Part D: a rule record by record

def _flags_expected() -> dict[int, tuple[int, bool]]:
    """{id: (behind_s, late)}: each reading against the latest event time of the readings before it (offsets)."""
    expected, ahead = {}, None
    for event in EVENTS:
        t = _ms(event["event_time"])
        behind = 0 if ahead is None else max(0, (ahead - t) // 1000)
        expected[event["id"]] = (behind, behind > LATE_S)
        ahead = t if ahead is None else max(ahead, t)
    return expected


def _replay(run, size: int):
    """A Part D replay's checkpoint, after checking it read the lab's events ``size`` per micro-batch with a
    processor that keeps ``max_seen``, and its batches [(batch, first record, end, watermark)]."""
    ckpt = run.checkpoint(f"lab06-flags-{size}")
    batches = _batches(run, ckpt, size)
    _declared(run, ckpt, "max_seen", "ValueState", "NoTime")
    return ckpt, batches


def _max_seen(table) -> dict:
    """{"max_seen": the latest event_ms} of the one row `max_seen` should hold (the row's largest whole number:
    its key may be a constant)."""
    latest = [max((int(v) for c, v in row.items() if c != "partition_id" and isinstance(v, numbers.Integral)),
                  default=None) for _, row in table.iterrows()]
    return {"max_seen": latest[0] if len(latest) == 1 else tuple(latest)}


@check("test_two_clocks_replay")
def flags_replay(run):
    _events(run)
    expected = _flags_expected()
    for size in REPLAY_SIZES:
        _replay(run, size)
        rows = _output(run, f"lab06-flags-{size}-out", {"id", "behind_s", "late", "batch_id"})
        got = {}
        for row in rows:
            if int(row["id"]) in got:
                raise CheckFailed(f"{size} per batch: reading {row['id']} was output twice")
            got[int(row["id"])] = (int(row["behind_s"]), bool(row["late"]))
        if set(got) != set(expected):
            raise CheckFailed(f"{size} per batch: {len(set(expected) - set(got))} reading(s) missing from the output, "
                              f"{len(set(got) - set(expected))} unexpected")
        wrong = sorted(i for i in expected if got[i] != expected[i])
        if wrong:
            i = wrong[0]
            raise CheckFailed(f"{size} per batch: {len(wrong)} reading(s) flagged wrong, e.g. reading {i}: "
                              f"got behind_s, late = {got[i]}, expected {expected[i]}")


@check("test_two_clocks_windows")
def flags_state(run):
    _events(run)
    latest = max(_ms(e["event_time"]) for e in EVENTS)
    for size in REPLAY_SIZES:
        ckpt, batches = _replay(run, size)
        table = state_variable(ckpt, "max_seen", run.spark())
        seen_after = {batch: {"max_seen": max(_ms(e["event_time"]) for e in EVENTS[:end])}
                      for batch, _, end, _ in batches if end}
        run.trace_state(f"Part D, max_seen ({size} readings a batch)", ckpt, seen_after, _max_seen,
                        stateVarName="max_seen")
        if len(table) != 1:
            raise CheckFailed(f"{size} per batch: `max_seen` should hold one row (one key for the whole stream), "
                              f"it holds {len(table)}")
        held = [v for c, v in table.iloc[0].items() if c != "partition_id"]
        if not any(isinstance(v, numbers.Integral) and int(v) == latest for v in held):
            raise CheckFailed(f"{size} per batch: `max_seen` holds {held}, expected the latest event_ms of the "
                              f"input ({latest})")
