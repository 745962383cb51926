"""Lab 02's hidden checks: run by the grader in its own process, after the notebook ran.

Never released to students (see streamlab/grading/hidden_checks.py). Each check reads what a part's locked
cells left behind — the checkpoint ``lab02-<part>``, the input topic ``lab02-<part>-in`` and the
output topic ``lab02-<part>-out`` — and compares the query's output and the state in its checkpoint
(read with Spark's state data source) with values computed here from the same seeded generators.
"""
from datetime import datetime, timedelta

import pandas as pd

from streamlab.grading.hidden_checks import CheckFailed, check
from streamlab.lessons.m02_keyed_state import clicks, sensor_readings, state_variable, state_variables, timers

RESEND_MS = 40_000                             # Part A: no retry is sent later than this after the first send
DEDUP_WATERMARK_DELAY = timedelta(seconds=2)   # Part A's watermark
SILENT_MS = 15_000                             # Part C: a sensor is silent after this long without a reading
ALARM_WATERMARK_DELAY_MS = 5_000               # Part C's watermark


# ----------------------------------------------------------------------------- shared

def _ran(run, part: str, sent: list[dict], *, min_batches: int = 2):
    """The part's checkpoint, after checking that the input topic holds exactly the lab's input ``sent``, in
    order (a submission that changes what its locked cell sends, e.g. drops Part A's retries, would make a
    wrong answer look right), and that a Spark query wrote the checkpoint, read the whole topic, and
    committed at least ``min_batches`` micro-batches."""
    records = sorted(run.records(f"lab02-{part}-in", limit=len(sent)), key=lambda r: (r["partition"], r["offset"]))
    if [r["value"] for r in records] != sent:
        raise CheckFailed(f"the input topic 'lab02-{part}-in' does not hold the lab's {len(sent)} clicks, in order "
                          f"(it holds {len(records)} records): the part must run on the lab's own input")
    ckpt = run.checkpoint(f"lab02-{part}")
    run.require_reached_end(ckpt, f"lab02-{part}-in")
    batches = ckpt.commits()["batch"].tolist()
    if len(batches) < min_batches:
        raise CheckFailed(f"the query committed {len(batches)} micro-batch(es); the input needs at least {min_batches}")
    return ckpt, set(batches)


def _output(run, part: str, columns: list[str], batches: set[int]):
    out = run.output(f"lab02-{part}-out")
    if out.empty:
        raise CheckFailed("the query output nothing")
    missing = [c for c in columns if c not in out.columns]
    if missing:
        raise CheckFailed(f"the query's output has no column(s) {missing}; it has {sorted(out.columns)}")
    unknown = set(out["batch_id"]) - batches
    if unknown:
        raise CheckFailed(f"the output holds rows of batches {sorted(unknown)} the checkpoint never committed")
    return out


def _declared(run, ckpt, name: str, kind: str, *, time_mode: str | None = None) -> None:
    """Fails unless the checkpoint's operator is a transformWithState that declared the state variable
    ``name`` with the right type (and time mode)."""
    try:
        declared = state_variables(ckpt, run.spark())
    except Exception as err:  # no readable state metadata: not a stateful query's checkpoint
        raise CheckFailed(f"the checkpoint holds no readable state ({type(err).__name__})") from None
    found = declared[declared["variable"] == name]
    if found.empty:
        names = [v for v in declared["variable"] if v]
        raise CheckFailed(f"the query keeps no state variable called {name!r} (it keeps {names})")
    if found["type"].iloc[0] != kind:
        raise CheckFailed(f"{name!r} is a {found['type'].iloc[0]}, not a {kind}")
    if time_mode and found["time_mode"].iloc[0] != time_mode:
        raise CheckFailed(f"the processor runs with time mode {found['time_mode'].iloc[0]!r}, not {time_mode!r}")


def _variable(run, ckpt, name: str, kind: str, *, time_mode: str | None = None):
    """The state variable ``name`` as a table, after checking that it was declared (``_declared``) and holds rows."""
    _declared(run, ckpt, name, kind, time_mode=time_mode)
    table = state_variable(ckpt, name, run.spark())
    if table.empty:
        raise CheckFailed(f"the state variable {name!r} is empty")
    return table


def _when(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


# ----------------------------------------------------------------------------- Part A

def _dedup_input() -> list[dict]:
    """The sends of the lab's Part A, made as its locked cell makes them: 60 clicks sent once, about a third of
    them sent again 10 to 40 s later (a retry: same click, stamped with the time it was sent again), in the
    order of sending."""
    return clicks(60, seed=52, resent=0.3, resent_after_s=(10, 40))


def _first_sends(sends: list[dict]) -> dict[str, dict]:
    """{event id: its first send}."""
    first = {}
    for send in sends:
        first.setdefault(send["event_id"], send)
    return first


def _dedup_window_open() -> dict[str, datetime]:
    """{event id: when its re-send window closes} for the ids whose window is still open at the end of the run:
    a timer at first send + RESEND_MS fires once the watermark has reached it, and the last (data-less) batch
    runs with the final watermark, the latest send minus the watermark's delay."""
    sends = _dedup_input()
    watermark = max(_when(s["ts"]) for s in sends) - DEDUP_WATERMARK_DELAY
    closes = {e: _when(s["ts"]) + timedelta(milliseconds=RESEND_MS) for e, s in _first_sends(sends).items()}
    return {e: t for e, t in closes.items() if t > watermark}


def _dedup_remembered_after(ckpt, topic: str) -> dict[int, dict]:
    """{batch: {event id: True}}: the ids a right de-duplicator remembers after each committed batch. Batch b reads
    the sends up to its end with the watermark the batches before it moved (their latest send minus the delay);
    an id is remembered from its first send until the batch whose watermark reaches its window's close."""
    closes, after, latest = {}, {}, None
    for batch, chunk in _read_by_batch(ckpt, topic, _dedup_input()):
        watermark = latest - DEDUP_WATERMARK_DELAY if latest is not None else None
        for send in chunk:
            closes.setdefault(send["event_id"], _when(send["ts"]) + timedelta(milliseconds=RESEND_MS))
        after[batch] = {e: True for e, t in closes.items() if watermark is None or t > watermark}
        if chunk:
            newest = max(_when(s["ts"]) for s in chunk)
            latest = newest if latest is None else max(latest, newest)
    return after


@check("test_dedup_output")
def dedup_output(run):
    sends = _dedup_input()
    first = _first_sends(sends)
    ckpt, batches = _ran(run, "dedup", sends, min_batches=4)
    _declared(run, ckpt, "first_sent", "ValueState")  # the output came from a processor keeping `first_sent`
    out = _output(run, "dedup", ["event_id", "user", "page", "ts"], batches)
    got = sorted(out["event_id"])
    assert got == sorted(first), (f"expected each of the {len(first)} event ids once in the output; "
                                  f"got {len(got)} rows for {len(set(got))} ids")
    assert all((first[e]["user"], first[e]["page"]) == (u, p) for e, u, p in zip(out["event_id"], out["user"],
                                                                                 out["page"])), \
        "each output click must keep its user and page"
    sent = pd.to_datetime(out["ts"], utc=True)
    assert all(pd.Timestamp(first[e]["ts"]) == t for e, t in zip(out["event_id"], sent)), \
        "each click must be output as first sent: with the `ts` of its first send, not of a retry"
    assert out["batch_id"].nunique() >= 2, "the clicks should be de-duplicated over several micro-batches"


@check("test_dedup_state")
def dedup_state(run):
    window_open = _dedup_window_open()
    ckpt, _ = _ran(run, "dedup", _dedup_input(), min_batches=4)
    state = _variable(run, ckpt, "first_sent", "ValueState", time_mode="EventTime")
    if "event_id" not in state.columns:
        raise CheckFailed(f"`first_sent` should be keyed by event_id; its columns are {list(state.columns)}")
    diverged = run.trace_state("Part A, first_sent (the ids remembered)", ckpt,
                               _dedup_remembered_after(ckpt, run.topic("lab02-dedup-in")),
                               lambda table: {e: True for e in table["event_id"]}, stateVarName="first_sent")
    assert sorted(state["event_id"]) == sorted(window_open), \
        (f"only the {len(window_open)} ids whose re-send window is still open should be remembered in `first_sent`; "
         f"found {len(state)}" + (f" (it first differed after batch {diverged})" if diverged is not None else ""))
    registered = timers(ckpt, run.spark())
    got = sorted((e, t.to_pydatetime()) for e, t in zip(registered["event_id"], registered["expires_at"]))
    assert got == sorted(window_open.items()), \
        "each id still remembered should have exactly one timer, at its first send + RESEND_MS"


# ----------------------------------------------------------------------------- Part B

def _pages_input():
    return clicks(60, seed=22)


def _read_by_batch(ckpt, topic: str, sent: list) -> list[tuple[int, list]]:
    """(batch, what it read of ``sent``) for each committed batch, in order, cut by the one-partition input topic's
    offsets (a batch without data, such as the last one, reads nothing)."""
    ends, committed = _batch_ends(ckpt, topic), set(ckpt.commits()["batch"])
    read, start = [], 0
    for batch in sorted(b for b in ends if b in committed):
        read.append((batch, sent[start:ends[batch]]))
        start = ends[batch]
    return read


def _batch_ends(ckpt, topic: str) -> dict[int, int]:
    """{batch: offset the batch read up to} for the one-partition input topic."""
    offsets = ckpt.offsets()
    rows = offsets[offsets["topic"] == topic]
    return {int(b): int(o) for b, o in zip(rows["batch"], rows["offset"])}


def _seconds_on(events: list[dict]) -> tuple[dict, dict]:
    """({(user, page): seconds spent there}, {user: page of the latest click}) after ``events``, taken in time
    order per user: the time from a click to the user's next click is spent on the first click's page."""
    seconds, last = {}, {}
    for e in sorted(events, key=lambda e: e["ts"]):
        at = _when(e["ts"])
        if e["user"] in last:
            page, since = last[e["user"]]
            seconds[(e["user"], page)] = seconds.get((e["user"], page), 0) + int((at - since).total_seconds())
        last[e["user"]] = (e["page"], at)
    return seconds, {user: page for user, (page, _) in last.items()}


@check("test_pages_output")
def pages_output(run):
    events = _pages_input()
    ckpt, batches = _ran(run, "pages", events, min_batches=3)
    _variable(run, ckpt, "seconds_on", "MapState")
    out = _output(run, "pages", ["user", "page", "seconds"], batches)
    ends = _batch_ends(ckpt, run.topic("lab02-pages-in"))
    before = {}
    for batch in sorted(ends):
        now, _ = _seconds_on(events[:ends[batch]])
        expected = sorted((u, p, n) for (u, p), n in now.items() if before.get((u, p)) != n)
        rows = out[out["batch_id"] == batch]
        try:
            got = sorted(zip(rows["user"], rows["page"], (int(v) for v in rows["seconds"])))
        except (TypeError, ValueError):
            raise CheckFailed("the output's seconds should be whole numbers") from None
        assert got == expected, (f"batch {batch} should output the {len(expected)} (user, page) pairs whose time grew "
                                 f"in it, each with its seconds so far; it output {len(got)} rows that differ")
        before = now


def _seconds_held(state) -> dict:
    value_columns = [c for c in state.columns if c not in ("user", "page", "partition_id")]
    if "user" not in state.columns or "page" not in state.columns or len(value_columns) != 1:
        raise CheckFailed(f"`seconds_on` should map page -> seconds per user; its columns are {list(state.columns)}")
    try:
        return {(u, p): int(v) for u, p, v in zip(state["user"], state["page"], state[value_columns[0]])}
    except (TypeError, ValueError):
        raise CheckFailed("`seconds_on` should hold whole numbers of seconds") from None


def _pages_held(state) -> dict:
    """{user: the page} of the ``last_click`` value state: the column named page, or the first text column."""
    columns = [c for c in state.columns if c not in ("user", "partition_id")]
    page = "page" if "page" in columns else next((c for c in columns if state[c].map(type).eq(str).all()), None)
    if page is None:
        raise CheckFailed(f"`last_click` should hold the latest click's page; its columns are {list(state.columns)}")
    return dict(zip(state["user"], state[page]))


@check("test_pages_state")
def pages_state(run):
    events = _pages_input()
    ckpt, batches = _ran(run, "pages", events, min_batches=3)
    state = _variable(run, ckpt, "seconds_on", "MapState")
    last = _variable(run, ckpt, "last_click", "ValueState")
    ends = _batch_ends(ckpt, run.topic("lab02-pages-in"))
    reference = {b: _seconds_on(events[:ends[b]])[0] for b in sorted(ends) if b in batches}
    diverged = run.trace_state("Part B, seconds_on", ckpt, reference, _seconds_held, stateVarName="seconds_on")
    seconds, pages = _seconds_on(events)
    assert _seconds_held(state) == seconds, \
        (f"the `seconds_on` map state does not hold the seconds per user and page (it diverged at batch {diverged})"
         if diverged is not None else "the `seconds_on` map state does not hold the seconds per user and page")
    assert _pages_held(last) == pages, "the `last_click` value state should hold each user's latest page"


# ----------------------------------------------------------------------------- Part C

def _alarms_input() -> list[dict]:
    """Part C's readings: three sensors, one reading a second, a sensor silent now and then for 40 to 80 s."""
    return sensor_readings(100, seed=3, silences=0.04)


def _ms(ts: str) -> int:
    return int(_when(ts).timestamp() * 1000)


def _alarms_expected(ckpt, topic: str):
    """(messages [(batch, sensor, status, since_ms, at_ms)], deadlines {sensor: timer ms},
    alarms out {sensor: since_ms}, alarms out after each batch {batch: {sensor: True}}) of a right SilenceAlarm
    over the lab's readings, cut into the micro-batches
    the checkpoint committed.

    Batch b reads its records from the end of batch b-1 to its own end (a batch without data, such as the last one,
    reads none) with the watermark the batches before it moved: their latest reading minus the delay. In a batch,
    Spark first calls handleInputRows for every sensor with readings (a `back` if its alarm was out; its deadline
    moves to its latest reading + SILENT_MS), then fires the timers whose deadline the watermark has reached
    (a `silent`, and no new timer)."""
    deadlines, alarmed, messages = {}, {}, []
    out_after = {}  # {batch: {sensor: True}}: whose alarm is out after each batch
    latest = None
    for batch, chunk in _read_by_batch(ckpt, topic, _alarms_input()):
        watermark = latest - ALARM_WATERMARK_DELAY_MS if latest is not None else 0
        times = {}
        for r in chunk:
            times.setdefault(r["sensor"], []).append(_ms(r["ts"]))
        for sensor, ts in times.items():
            if sensor in alarmed:
                messages.append((batch, sensor, "back", alarmed.pop(sensor), min(ts)))
            deadlines[sensor] = max(ts) + SILENT_MS
        for sensor in sorted(deadlines):
            if deadlines[sensor] <= watermark:
                due = deadlines.pop(sensor)
                alarmed[sensor] = due - SILENT_MS
                messages.append((batch, sensor, "silent", due - SILENT_MS, due))
        if chunk:
            latest = max([latest or 0] + [_ms(r["ts"]) for r in chunk])
        out_after[batch] = {sensor: True for sensor in alarmed}
    return messages, deadlines, alarmed, out_after


@check("test_alarms_output")
def alarms_output(run):
    ckpt, batches = _ran(run, "alarms", _alarms_input(), min_batches=10)
    _declared(run, ckpt, "alarmed", "ValueState", time_mode="EventTime")  # the messages came from a processor
    expected, _, _, _ = _alarms_expected(ckpt, run.topic("lab02-alarms-in"))
    out = _output(run, "alarms", ["sensor", "status", "since_ms", "at_ms"], batches)
    try:
        got = sorted((int(b), s, st, int(a), int(t)) for b, s, st, a, t in
                     zip(out["batch_id"], out["sensor"], out["status"], out["since_ms"], out["at_ms"]))
    except (TypeError, ValueError):
        raise CheckFailed("since_ms and at_ms must be epoch milliseconds (LONG)") from None
    for status in ("silent", "back"):
        want = sorted(m[1:] for m in expected if m[2] == status)
        have = sorted(m[1:] for m in got if m[2] == status)
        assert have == want, (f"expected {len(want)} `{status}` message(s), one per silence"
                              f"{' that ended' if status == 'back' else ''}, with its sensor and times; "
                              f"got {len(have)} that differ")
    unknown = sorted({m[2] for m in got} - {"silent", "back"})
    assert not unknown, f"the only statuses are `silent` and `back`; got {unknown}"
    assert got == sorted(expected), \
        ("the right messages, in the wrong micro-batches: a `silent` comes in the batch whose watermark passes the "
         "deadline, a `back` in the batch with the sensor's first reading after the silence")


@check("test_alarms_state")
def alarms_state(run):
    ckpt, _ = _ran(run, "alarms", _alarms_input(), min_batches=10)
    _, deadlines, alarmed, out_after = _alarms_expected(ckpt, run.topic("lab02-alarms-in"))
    state = _variable(run, ckpt, "alarmed", "ValueState", time_mode="EventTime")
    if "sensor" not in state.columns:
        raise CheckFailed(f"`alarmed` should be keyed by sensor; its columns are {list(state.columns)}")
    diverged = run.trace_state("Part C, alarmed (whose alarm is out)", ckpt, out_after,
                               lambda table: {sensor: True for sensor in table["sensor"]}, stateVarName="alarmed")
    assert sorted(state["sensor"]) == sorted(alarmed), \
        (f"`alarmed` should exist exactly for the sensors whose alarm is out at the end ({sorted(alarmed)}); "
         f"it holds {sorted(state['sensor'])}" + (f"; it first differed after batch {diverged}" if diverged is not None
                                                 else ""))
    registered = timers(ckpt, run.spark())
    got = sorted((s, int(t.timestamp() * 1000)) for s, t in zip(registered["sensor"], registered["expires_at"]))
    assert got == sorted(deadlines.items()), \
        ("every sensor whose alarm is not out should have exactly one timer, at its latest reading + SILENT_MS, "
         "and a sensor whose alarm is out none")
