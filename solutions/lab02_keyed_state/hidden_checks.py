"""Lab 02's hidden checks: run by the grader in its own process, after the notebook ran.

Never released to students (see streamlab/grading/hidden_checks.py). Each check reads what a part's locked
cells left behind — the checkpoint ``lab02-<part>``, the input topic ``lab02-<part>-in`` and the
output topic ``lab02-<part>-out`` — and compares the query's output and the state in its checkpoint
(read with Spark's state data source) with values computed here from the same seeded generators.
"""
from collections import Counter
from datetime import datetime, timedelta

import pandas as pd

from streamlab.grading.hidden_checks import CheckFailed, check
from streamlab.lessons.m02_keyed_state import clicks, state_variable, state_variables, timers

RESEND_MS = 40_000                             # Part A: no retry is sent later than this after the first send
DEDUP_WATERMARK_DELAY = timedelta(seconds=2)   # Part A's watermark
IDLE_MS = 30_000                               # Part C
WATERMARK_DELAY = timedelta(seconds=10)        # Part C's watermark


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
    assert sorted(state["event_id"]) == sorted(window_open), \
        (f"only the {len(window_open)} ids whose re-send window is still open should be remembered in `first_sent`; "
         f"found {len(state)}")
    registered = timers(ckpt, run.spark())
    got = sorted((e, t.to_pydatetime()) for e, t in zip(registered["event_id"], registered["expires_at"]))
    assert got == sorted(window_open.items()), \
        "each id still remembered should have exactly one timer, at its first send + RESEND_MS"


# ----------------------------------------------------------------------------- Part B

def _pages_input():
    return clicks(60, seed=22)


def _batch_ends(ckpt, topic: str) -> dict[int, int]:
    """{batch: offset the batch read up to} for the one-partition input topic."""
    offsets = ckpt.offsets()
    rows = offsets[offsets["topic"] == topic]
    return {int(b): int(o) for b, o in zip(rows["batch"], rows["offset"])}


@check("test_pages_output")
def pages_output(run):
    events = _pages_input()
    ckpt, batches = _ran(run, "pages", events, min_batches=3)
    _variable(run, ckpt, "page_counts", "MapState")
    out = _output(run, "pages", ["user", "page", "visits"], batches)
    ends = _batch_ends(ckpt, run.topic("lab02-pages-in"))
    counts, start = Counter(), 0
    for batch in sorted(ends):
        chunk = events[start:ends[batch]]
        counts.update((e["user"], e["page"]) for e in chunk)
        expected = sorted((u, p, counts[(u, p)]) for u, p in {(e["user"], e["page"]) for e in chunk})
        rows = out[out["batch_id"] == batch]
        got = sorted(zip(rows["user"], rows["page"], (int(v) for v in rows["visits"])))
        assert got == expected, (f"batch {batch} should output the {len(expected)} (user, page) pairs clicked in it, "
                                 f"each with its visits so far; it output {len(got)} rows that differ")
        start = ends[batch]


@check("test_pages_state")
def pages_state(run):
    events = _pages_input()
    ckpt, _ = _ran(run, "pages", events, min_batches=3)
    state = _variable(run, ckpt, "page_counts", "MapState")
    value_columns = [c for c in state.columns if c not in ("user", "page", "partition_id")]
    if "user" not in state.columns or "page" not in state.columns or len(value_columns) != 1:
        raise CheckFailed(f"`page_counts` should map page -> visits per user; its columns are {list(state.columns)}")
    stored = {(u, p): int(v) for u, p, v in zip(state["user"], state["page"], state[value_columns[0]])}
    assert stored == dict(Counter((e["user"], e["page"]) for e in events)), \
        "the `page_counts` map state does not hold the visits per user and page"


# ----------------------------------------------------------------------------- Part C

def _visits_input():
    return clicks(60, seed=38)


def _visits_expected():
    """(ended visits {user: clicks}, users still browsing {user: timer time}) for the lab's input:
    every visit ends IDLE_MS after its last click once the final watermark has passed it (the
    input's clicks of one user are never IDLE_MS apart, so each user has one visit)."""
    events = _visits_input()
    last = {}
    for e in events:
        last[e["user"]] = max(last.get(e["user"], _when(e["ts"])), _when(e["ts"]))
    watermark = max(last.values()) - WATERMARK_DELAY
    per_user = Counter(e["user"] for e in events)
    idle = timedelta(milliseconds=IDLE_MS)
    ended = {u: per_user[u] for u, t in last.items() if t + idle <= watermark}
    browsing = {u: t + idle for u, t in last.items() if u not in ended}
    return ended, browsing


@check("test_visits_closed")
def visits_closed(run):
    ended, _ = _visits_expected()
    ckpt, batches = _ran(run, "visits", _visits_input(), min_batches=3)
    _variable(run, ckpt, "visit", "ValueState", time_mode="EventTime")
    out = _output(run, "visits", ["user", "clicks"], batches)
    got = sorted(zip(out["user"], (int(c) for c in out["clicks"])))
    assert got == sorted(ended.items()), (f"expected {len(ended)} ended visits (one per idle user, with all its "
                                          f"clicks); got {len(got)} rows that differ")
    assert out["batch_id"].nunique() >= 2, "the visits should end along the stream, in several micro-batches"


@check("test_visits_state")
def visits_state(run):
    _, browsing = _visits_expected()
    ckpt, _ = _ran(run, "visits", _visits_input(), min_batches=3)
    state = _variable(run, ckpt, "visit", "ValueState", time_mode="EventTime")
    if "user" not in state.columns:
        raise CheckFailed(f"`visit` should be keyed by user; its columns are {list(state.columns)}")
    assert sorted(state["user"]) == sorted(browsing), \
        f"only the {len(browsing)} users still browsing should keep a `visit` state; found {len(state)}"
    registered = timers(ckpt, run.spark())
    got = sorted((u, t.to_pydatetime()) for u, t in zip(registered["user"], registered["expires_at"]))
    assert got == sorted(browsing.items()), \
        "each user still browsing should have exactly one timer, at the last click + IDLE_MS"
