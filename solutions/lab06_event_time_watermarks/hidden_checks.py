"""Hidden checks of Lab 06 (never released): run by the grader in its own process after the notebook ran.

Every expected value is computed here from the lab's seeded events and the micro-batches the query's
checkpoint actually committed (which offsets each batch read). The rules Spark 4.2 applies, verified in
notebook 06 and in tests/test_event_time.py:

* batch k uses watermark wm(k) = max(wm(k-1), latest event time of batches < k - delay), wm(0) = 0;
* a window is output (append mode) and leaves the state in the first batch k with end <= wm(k);
* a (reading, window) pair is dropped as late in batch k when the window's end <= wm(k-1).
"""
from __future__ import annotations

from datetime import UTC, datetime

from streamlab.grading.hidden_checks import CheckFailed, check
from streamlab.lessons.events import timed_events

EVENTS = timed_events(150, seed=61, late=0.06, late_by_s=50)
BATCH = 25
DELAY_MS = 10_000
COUNT = 4


# ----------------------------------------------------------------------------- reading the artifacts

def _ms(text) -> int:
    return int(datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() * 1000)


def _events(run) -> list[dict]:
    """The input topic, in offset order: it must hold exactly the lab's events."""
    records = sorted(run.records("lab06-events"), key=lambda r: (r["partition"], r["offset"]))
    if [r["value"] for r in records] != EVENTS:
        raise CheckFailed("the topic lab06-events does not hold the lab's events in their arrival order")
    return EVENTS


def _batches(run, ckpt, batch_size: int = BATCH) -> list[tuple[int, int, int, int]]:
    """(batch id, first offset, end offset, watermark used) of every committed batch of ``ckpt``, which must
    have read the events ``batch_size`` records per micro-batch."""
    run.require_reached_end(ckpt, "lab06-events")
    topic = run.topic("lab06-events")
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
            raise CheckFailed(f"batch {batch} of the checkpoint did not read lab06-events")
        end = int(row["offset"].iloc[0])
        batches.append((batch, start, end, int(row["watermark_ms"].iloc[0] or 0)))
        start = end
    sizes = [end - first for _, first, end, _ in batches if end > first]
    if len(sizes) != -(-len(EVENTS) // batch_size) or any(size != batch_size for size in sizes[:-1]):
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

def _simulate(events, batches, size_s: int, slide_s: int):
    """Expected windowed aggregation over the committed ``batches`` (see the module doc).

    Returns (watermarks {batch: ms}, output {(batch, sensor, start, end): [events]},
    dropped [(event id, window start)], open windows {(sensor, start, end)}).
    """
    size, slide = size_s * 1000, slide_s * 1000
    state: dict[tuple[str, int, int], list[dict]] = {}
    output, dropped, watermarks = {}, [], {}
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
        previous = watermark
        if latest is not None:
            watermark = max(watermark, latest - DELAY_MS)
    return watermarks, output, dropped, set(state)


def _require_watermarks(batches, expected: dict[int, int]) -> None:
    for batch, _, _, used in batches:
        if used != expected[batch]:
            raise CheckFailed(f"batch {batch} used the watermark {used} ms, expected {expected[batch]} ms: "
                              f"declare a 10-second watermark on event_time, before the aggregation")


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

def _tumbling(run):
    events = _events(run)
    ckpt = run.checkpoint("lab06-tumbling")
    batches = _batches(run, ckpt)
    return ckpt, batches, _simulate(events, batches, 10, 10)


@check("test_tumbling_rows")
def tumbling_rows(run):
    _, _, (_, expected, _, _) = _tumbling(run)
    rows = _output(run, "lab06-tumbling-out", {"sensor", "count", "ids", "batch_id"})
    got = {}
    for row in rows:
        key = (row["batch_id"], row["sensor"]) + _window_of(row)
        if key in got:
            raise CheckFailed("a window was output twice: use append mode's watermark, not update")
        got[key] = (int(row["count"]), tuple(sorted(int(i) for i in row["ids"])))
    want = {k: (len(v), tuple(sorted(e["id"] for e in v))) for k, v in expected.items()}
    _compare(got, want, "final window(s)")


@check("test_tumbling_late")
def tumbling_late(run):
    ckpt, batches, (watermarks, expected, dropped, still_open) = _tumbling(run)
    _require_watermarks(batches, watermarks)
    rows = _output(run, "lab06-tumbling-out", {"sensor", "ids"})
    counted = {int(i) for row in rows for i in row["ids"]}
    in_output_windows = {e["id"] for v in expected.values() for e in v} | {i for i, _ in dropped}
    lost = sorted(in_output_windows - counted)
    if lost != sorted(i for i, _ in dropped):
        raise CheckFailed(f"the readings missing from the output are {lost}, expected exactly the late ones "
                          f"{sorted(i for i, _ in dropped)}")
    held = _window_state(run, ckpt)
    if held != still_open:
        raise CheckFailed(f"the state holds {len(held)} windows after the last batch, expected the {len(still_open)} "
                          f"still open")


# ----------------------------------------------------------------------------- Part B

@check("test_sliding")
def sliding(run):
    events = _events(run)
    ckpt = run.checkpoint("lab06-sliding")
    batches = _batches(run, ckpt)
    watermarks, expected, _, still_open = _simulate(events, batches, 20, 10)
    _require_watermarks(batches, watermarks)
    rows = _output(run, "lab06-sliding-out", {"sensor", "count", "max_value", "batch_id"})
    got = {}
    for row in rows:
        key = (row["batch_id"], row["sensor"]) + _window_of(row)
        if key in got:
            raise CheckFailed("a window was output twice: use a watermark and append mode")
        got[key] = (int(row["count"]), round(float(row["max_value"]), 6))
    want = {k: (len(v), round(max(e["value"] for e in v), 6)) for k, v in expected.items()}
    _compare(got, want, "sliding window(s)")
    held = _window_state(run, ckpt)
    if held != still_open:
        raise CheckFailed(f"the state holds {len(held)} windows after the last batch, expected {len(still_open)}")


# ----------------------------------------------------------------------------- Part C

def _count_windows(run):
    events = _events(run)
    ckpt = run.checkpoint("lab06-count")
    batches = _batches(run, ckpt)
    pending: dict[str, list[dict]] = {}
    output = {}
    for batch, first, end, _ in batches:
        for event in events[first:end]:
            window = pending.setdefault(event["sensor"], [])
            window.append(event)
            if len(window) == COUNT:
                output[(batch, event["sensor"], tuple(e["id"] for e in window))] = \
                    sum(e["value"] for e in window) / COUNT
                pending[event["sensor"]] = []
    return ckpt, output, {s: [e["id"] for e in w] for s, w in pending.items() if w}


@check("test_count_rows")
def count_rows(run):
    _, expected, _ = _count_windows(run)
    rows = _output(run, "lab06-count-out", {"sensor", "ids", "mean_value", "batch_id"})
    got = {(row["batch_id"], row["sensor"], tuple(int(i) for i in row["ids"])): float(row["mean_value"])
           for row in rows}
    if len(got) != len(rows):
        raise CheckFailed("a count window was output twice")
    missing, extra = set(expected) - set(got), set(got) - set(expected)
    if missing or extra:
        example = sorted(missing or extra)[0]
        raise CheckFailed(f"{len(missing)} count window(s) missing, {len(extra)} unexpected, e.g. "
                          f"{'missing' if missing else 'unexpected'} {example[1]} {list(example[2])} "
                          f"in batch {example[0]} "
                          f"(windows follow arrival order and are output in the batch that completes them)")
    wrong = [k for k in expected if abs(got[k] - expected[k]) > 1e-6]
    if wrong:
        raise CheckFailed(f"the mean of window {list(wrong[0][2])} is {got[wrong[0]]}, expected {expected[wrong[0]]}")


@check("test_count_state")
def count_state(run):
    ckpt, _, expected = _count_windows(run)
    try:
        table = ckpt.state_table(run.spark(), stateVarName="pending")
    except Exception as err:  # no such variable, or not a transformWithState checkpoint
        raise CheckFailed(f"no list state called 'pending' in the count window's checkpoint "
                          f"({type(err).__name__})") from None
    if not {"sensor", "id"} <= set(table.columns):
        raise CheckFailed(f"the pending state needs the fields id and value; it has {sorted(table.columns)}")
    got = {}
    for sensor, ident in zip(table["sensor"], table["id"]):
        got.setdefault(sensor, []).append(int(ident))
    got = {s: sorted(ids) for s, ids in got.items()}
    want = {s: sorted(ids) for s, ids in expected.items()}
    if got != want:
        raise CheckFailed(f"the pending state holds {got}, expected {want}")


# ----------------------------------------------------------------------------- Part D: two clocks

CLOCK_WINDOW_MS = 5_000
CLOCK_BATCH = 75


def _final_windows(run, clock: str, replay: int) -> tuple[dict[int, int], list[tuple[int, int]]]:
    """One replay's final table {window start ms: count} (the last batch's rows: complete mode), and its
    committed batches as (batch start time ms, records read), from its checkpoint."""
    name = f"lab06-{clock}-{replay}"
    ckpt = run.checkpoint(name)
    read = _batches(run, ckpt, CLOCK_BATCH)
    rows = _output(run, f"{name}-out", {"count", "batch_id"})
    last = max(row["batch_id"] for row in rows)
    table = {}
    for row in rows:
        if row["batch_id"] == last:
            start, end = _window_of(row)
            if end - start != CLOCK_WINDOW_MS:
                raise CheckFailed(f"{clock} time: the windows should last 5 seconds, "
                                  f"one lasts {(end - start) / 1000:g}")
            if start in table:
                raise CheckFailed(f"{clock} time, replay {replay}: window {start} appears twice in the final table")
            table[start] = int(row["count"])
    times = ckpt.batch_times().set_index("batch")["timestamp"]
    batches = [(int(times[batch].timestamp() * 1000), end - first) for batch, first, end, _ in read]
    # complete mode keeps every window in the aggregation's state: read it with Spark, in this process
    state = ckpt.state(run.spark()).selectExpr("unix_millis(key.window.start) AS start", "value.count AS count")
    held = {int(row["start"]): int(row["count"]) for row in state.collect()}
    if held != table:
        raise CheckFailed(f"{clock} time, replay {replay}: the query's state holds {len(held)} windows that differ "
                          f"from its output: the output must come from the query")
    return table, batches


@check("test_two_clocks_replay", "test_two_clocks_windows")
def two_clocks(run):
    _events(run)
    step = CLOCK_WINDOW_MS
    expected_event = {}
    for event in EVENTS:
        start = _ms(event["event_time"]) // step * step
        expected_event[start] = expected_event.get(start, 0) + 1
    for replay in (1, 2):
        table, _ = _final_windows(run, "event", replay)
        if table != expected_event:
            wrong = sorted(set(table) ^ set(expected_event)) or [k for k in table if table[k] != expected_event[k]]
            raise CheckFailed(f"event time, replay {replay}: {len(table)} windows, expected {len(expected_event)}; "
                              f"first difference at {datetime.fromtimestamp(wrong[0] / 1000, UTC):%H:%M:%S}")
    processing = {}
    for replay in (1, 2):
        table, batches = _final_windows(run, "processing", replay)
        expected = {}
        for started_ms, size in batches:   # every row of a batch gets its start time: current_timestamp()
            if size:
                start = started_ms // step * step
                expected[start] = expected.get(start, 0) + size
        assert table == expected, (f"processing time, replay {replay}: the windows should be those of the "
                                   f"micro-batches' start times ({expected}), the query gave {table}")
        processing[replay] = table
    assert processing[1] != processing[2], "the two processing-time replays gave the same table"
