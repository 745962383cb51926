"""Keyed state (module 02): seeded click and sensor streams, and state read back as tables.

    clicks = sl.m02.clicks(60, duplicates=0.2)          # users clicking pages; some events sent twice
    readings = sl.m02.sensor_readings(60)               # sensor values with a few spikes
    readings = sl.m02.sensor_readings(100, silences=0.06)   # ... and sensors that go silent for a while
    ...                                             # a query with transformWithState runs on them
    sl.m02.state_variables(ckpt)                        # which state variables the operator keeps
    sl.m02.state_variable(ckpt, "visits")               # one variable as a table (lists/maps flattened)
    sl.m02.timers(ckpt)                                 # the timers each key has registered
    sl.m02.plot_state_rows({"no cleanup": run1, "timers": run2})   # state rows per micro-batch
    sl.m02.dedup_summary({"built-in": run1, "by hand": run2}, clicks)   # did each id come out once?
    with sl.m02.running(frame, ckpt, output=out) as query: ...      # a query on the wall clock, stopped after

Flink's keyed state lives in a ``KeyedProcessFunction``; Spark's twin is a ``StatefulProcessor``
passed to ``df.groupBy(key).transformWithState(...)``. Its state variables are stored in the
RocksDB state store, one column family per variable, and the state data source
(``format("statestore")``) reads them back one variable at a time.
"""
from __future__ import annotations

import json
import random
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from ..stack.session import spark as new_session
from .checkpoint import Checkpoint
from .events import START, iso_time
from .runs import progress_table
from .streams import BatchCollector

CLICK_SCHEMA = "event_id STRING, user STRING, page STRING, ts TIMESTAMP"
READING_SCHEMA = "sensor STRING, value DOUBLE, ts TIMESTAMP, spike BOOLEAN"

PAGES = ("/home", "/search", "/product", "/cart", "/checkout")


def clicks(n: int = 60, *, seed: int = 42, duplicates: float = 0.0, resent: float = 0.0,
           resent_after_s: tuple[int, int] = (10, 40), active_users: int = 3,
           clicks_per_user: tuple[int, int] = (2, 6), gap_s: tuple[int, int] = (1, 5),
           pages=PAGES) -> list[dict]:
    """``n`` clicks of users browsing a shop: {"event_id", "user", "page", "ts"}, in event-time order.

    ``active_users`` users browse at any moment; each makes a few clicks (``clicks_per_user``),
    ``gap_s`` seconds apart on the whole stream, then leaves for good and a new user (``u00``,
    ``u01``, ...) arrives. So old users go idle while new ones keep coming: state that is never
    cleared grows with every user ever seen. ``duplicates`` is the share of clicks that are sent
    a second time a few records later (same ``event_id``, same content), as an at-least-once
    producer does when it retries. ``resent`` is the share of clicks sent again later in event time,
    ``resent_after_s`` seconds after the first send and stamped with the time of that send (same
    ``event_id``, a later ``ts``); the list is then in the order of sending.
    """
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(pages))]
    next_user = 0

    def arrive():
        nonlocal next_user
        user = [f"u{next_user:02d}", rng.randint(*clicks_per_user)]
        next_user += 1
        return user

    browsing = [arrive() for _ in range(active_users)]
    moment = START
    events = []
    for i in range(n):
        moment += timedelta(seconds=rng.randint(*gap_s))
        slot = rng.randrange(active_users)
        user = browsing[slot]
        page = rng.choices(pages, weights=weights)[0]
        events.append({"event_id": f"e{i:04d}", "user": user[0], "page": page, "ts": iso_time(moment)})
        user[1] -= 1
        if user[1] == 0:
            browsing[slot] = arrive()
    if resent:
        events = _resend(events, random.Random(seed), resent, resent_after_s)
    if not duplicates:
        return events
    placed = [(float(i), event) for i, event in enumerate(events)]
    for i, event in enumerate(events):
        if rng.random() < duplicates:
            placed.append((i + rng.uniform(0.5, 3.5), dict(event)))
    return [event for _, event in sorted(placed, key=lambda pair: pair[0])]


def _resend(events: list[dict], rng: random.Random, share: float, after_s: tuple[int, int]) -> list[dict]:
    """``events`` and, for about ``share`` of them, a later send ``after_s`` seconds on, in the order of sending."""
    sends = list(events)
    for event in [e for e in events if rng.random() < share]:
        sent_again = datetime.fromisoformat(event["ts"]) + timedelta(seconds=rng.randint(*after_s))
        sends.append(dict(event, ts=iso_time(sent_again)))
    return sorted(sends, key=lambda send: send["ts"])


def sensor_readings(n: int = 60, *, seed: int = 42, sensors=("s1", "s2", "s3"), spikes: float = 0.08,
                    every_s: int = 1, silences: float = 0.0, silent_s: tuple[int, int] = (40, 80)) -> list[dict]:
    """``n`` readings {"sensor", "value", "ts", "spike"}, one every ``every_s`` seconds, in order.

    Each sensor reads around its own level (20, 50, 80, ...) with small noise; a share ``spikes``
    of readings jumps 25 above or below the level and carries ``spike: true``, so an alerting query
    can be checked against it. The first three readings of every sensor are never spikes.

    ``silences`` is the chance that a sensor, after one of its readings (not among its first three),
    **goes silent**: it sends nothing for ``silent_s`` seconds (drawn per silence), then reports
    again, as a device does when its link drops. One sensor at most is silent at a time, so the
    others keep the stream (and its watermark) moving; the clock keeps ticking every ``every_s``
    seconds. With ``silences=0`` (the default) the readings are those of earlier versions.
    """
    rng = random.Random(seed)
    level = {sensor: 20 + 30 * i for i, sensor in enumerate(sensors)}
    seen = {sensor: 0 for sensor in sensors}
    quiet_until = {sensor: START for sensor in sensors}
    readings = []
    tick = 0
    while len(readings) < n:
        moment = START + timedelta(seconds=tick * every_s)
        tick += 1
        awake = [sensor for sensor in sensors if quiet_until[sensor] <= moment]
        if not awake:
            continue
        sensor = rng.choice(awake)
        spike = seen[sensor] >= 3 and rng.random() < spikes
        value = level[sensor] + rng.gauss(0, 1.5) + (rng.choice((-25, 25)) if spike else 0)
        seen[sensor] += 1
        readings.append({"sensor": sensor, "value": round(value, 2), "ts": iso_time(moment), "spike": spike})
        if silences and seen[sensor] > 3 and len(awake) == len(sensors) and rng.random() < silences:
            quiet_until[sensor] = moment + timedelta(seconds=rng.randint(*silent_s))
    return readings


# ----------------------------------------------------------------------------- reading state back

def _session(spark):
    """The given session, else the course's (``sl.spark()`` leaves a running one's settings alone)."""
    return spark if spark is not None else new_session()


def _checkpoint(ckpt):
    return ckpt if isinstance(ckpt, Checkpoint) else Checkpoint(str(ckpt))


def state_variables(ckpt, spark=None):
    """The state variables of the checkpoint's ``transformWithState`` operators, as a table:
    ``operator``, ``variable``, ``type`` (ValueState, ListState, MapState, TimerState) and
    ``ttl`` (True if it was declared with a time to live) and the operator's ``time_mode``
    ("NoTime", "EventTime" or "ProcessingTime"), read from ``format("state-metadata")``.
    An operator without named variables (``groupBy().count()``, ...) gets one row with its
    operator name and no variable."""
    import pandas as pd

    rows = []
    for op in _checkpoint(ckpt).state_metadata(_session(spark)).collect():
        try:
            properties = json.loads(op["operatorProperties"] or "{}")
        except (TypeError, ValueError):
            properties = {}
        variables = properties.get("stateVariables") or []
        mode = properties.get("timeMode")
        for var in variables:
            rows.append({"operator": op["operatorName"], "variable": var.get("stateName"),
                         "type": var.get("stateVariableType"), "ttl": bool(var.get("ttlEnabled")),
                         "time_mode": mode})
        if not variables:
            rows.append({"operator": op["operatorName"], "variable": None, "type": None, "ttl": False,
                         "time_mode": mode})
    return pd.DataFrame(rows, columns=["operator", "variable", "type", "ttl", "time_mode"])


def state_variable(ckpt, name: str, spark=None, **options):
    """One state variable of a ``transformWithState`` query, as a pandas table sorted by key.

    One column per grouping-key field, then the stored value's fields: a value state gives one row
    per key; a list state one row per element; a map state one row per (key, map key), with the
    map key's fields next to the value's. A variable declared with a TTL gets a ``ttl_expires_at``
    column (when the value stops being returned). ``partition_id`` says which state-store
    partition holds the row. Other ``options`` go to the state data source (e.g. ``batchId=3`` to
    read the state as it was after batch 3).
    """
    import pandas as pd

    table = _checkpoint(ckpt).state_table(_session(spark), stateVarName=name, **options)
    if "value" in table.columns and len(table) and _is_struct(table["value"].iloc[0]):
        inner = pd.DataFrame([_as_dict(v) for v in table["value"]], index=table.index)  # a TTL value
        table = pd.concat([table.drop(columns="value"), inner], axis=1)
    if "ttlExpirationMs" in table.columns:
        expires = pd.to_datetime(table.pop("ttlExpirationMs"), unit="ms", utc=True)
        table["ttl_expires_at"] = expires
    if "partition_id" in table.columns:
        table["partition_id"] = table.pop("partition_id")
    sortable = [c for c in table.columns if c != "partition_id" and _sortable(table[c])]
    if sortable:
        table = table.sort_values(sortable, kind="stable")
    return table.reset_index(drop=True)


def _is_struct(value) -> bool:
    return isinstance(value, dict) or hasattr(value, "asDict")


def _as_dict(value) -> dict:
    return value.asDict(recursive=True) if hasattr(value, "asDict") else dict(value or {})


def _sortable(column) -> bool:
    return len(column) == 0 or isinstance(column.iloc[0], (str, int, float, bool)) or hasattr(column.iloc[0], "year")


def timers(ckpt, spark=None, **options):
    """The timers the keys of a ``transformWithState`` query have registered and not yet seen
    fire: one row per (key, timer) with ``expires_at`` (a UTC timestamp) and ``partition_id``."""
    import pandas as pd

    frame = _checkpoint(ckpt).state(_session(spark), readRegisteredTimers=True, **options)
    key_fields = frame.schema["key"].dataType.fieldNames()
    columns = [f"key.`{f}` AS `{f}`" for f in key_fields] + ["expiration_timestamp_ms", "partition_id"]
    table = frame.selectExpr(*columns).toPandas()
    table.insert(len(key_fields), "expires_at",
                 pd.to_datetime(table.pop("expiration_timestamp_ms"), unit="ms", utc=True))
    return table.sort_values(key_fields + ["expires_at"], kind="stable").reset_index(drop=True)


# ----------------------------------------------------------------------------- state size per batch

def state_rows_per_batch(runs: dict[str, Any]):
    """A table with one row per micro-batch and one column per run: the number of rows the run's
    state store held after that batch (``numRowsTotal`` of its stateful operators, from the
    query's progress). ``runs`` maps a label to a ``Run`` (from ``sl.run_to_end``) or to a list
    of progress dicts (``query.recentProgress``).

    For ``transformWithState`` a row is a value-state key, a list-state key (the whole list is one
    row) or a map-state entry; registered timers are stored too but not counted (see ``timers``).
    """
    import pandas as pd

    columns = {}
    for label, run in runs.items():
        progresses = getattr(run, "progresses", run) or []
        per_batch = {}
        for p in progresses:
            ops = p.get("stateOperators") or []
            if p.get("batchId") is not None and ops:
                per_batch[p["batchId"]] = sum(o.get("numRowsTotal", 0) for o in ops)
        columns[label] = pd.Series(per_batch, dtype="Int64")
    table = pd.DataFrame(columns)
    table.index.name = "batch"
    return table.sort_index()


def plot_state_rows(runs: dict[str, Any], ax=None, title: str = "State rows after each micro-batch"):
    """Plot ``state_rows_per_batch(runs)``: one line per run. Returns the matplotlib axes."""
    import matplotlib.pyplot as plt

    table = state_rows_per_batch(runs)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.2))
    for label in table.columns:
        ax.plot(table.index, table[label].astype(float), marker="o", label=label)
    ax.set_xlabel("micro-batch")
    ax.set_ylabel("rows in the state store")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


# ----------------------------------------------------------------------------- comparing runs with their input

def _last_state_rows(run) -> Any:
    table = progress_table(getattr(run, "progresses", run) or [])
    return table["state_rows"].iloc[-1] if len(table) and "state_rows" in table else None


def dedup_summary(runs: dict[str, Any], sent: list[dict], key: str = "event_id"):
    """Did each de-duplicating run let every event through exactly once? One row per run:

    ``rows out`` (what the run output), ``each id once`` (True when the output holds every distinct
    ``key`` of the ``sent`` events, each exactly once) and ``state rows at the end`` (the rows its
    state store held after the last micro-batch: how much it still remembers). ``runs`` maps a label
    to a ``Run`` from ``sl.run_to_end``.
    """
    import pandas as pd

    distinct = sorted({event[key] for event in sent})
    rows = {}
    for label, run in runs.items():
        out = run.rows
        ids = sorted(out[key]) if key in out.columns else []
        rows[label] = {"rows out": len(out), "each id once": ids == distinct,
                       "state rows at the end": _last_state_rows(run)}
    return pd.DataFrame.from_dict(rows, orient="index")


def alerts_vs_spikes(alerts, readings: list[dict]):
    """How an alerting query did against the spikes ``sensor_readings`` injected: the number of
    ``alerts``, the micro-batches they came in, the ``spikes injected``, and how many alerts are
    spikes (an alert matches a spike with the same sensor and value). ``alerts`` is the query's
    output with ``sensor`` and ``value`` columns (and ``batch_id``, as ``sl.run_to_end`` gives)."""
    import pandas as pd

    spikes = {(r["sensor"], r["value"]) for r in readings if r["spike"]}
    alerted = set(zip(alerts["sensor"], alerts["value"])) if len(alerts) else set()
    batches = alerts["batch_id"].nunique() if "batch_id" in alerts.columns else None
    return pd.Series({"alerts": len(alerts), "micro-batches with alerts": batches,
                      "spikes injected": len(spikes), "alerts that are spikes": len(spikes & alerted)})


NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"


@contextmanager
def running(frame, checkpoint, *, output=None, every: str = "1 second", output_mode: str = "update"):
    """Run ``frame`` as a query on the wall clock while the ``with`` block lasts, then stop it.

        with sl.m02.running(counts, ckpt, output=out) as query:
            sl.produce(topic, ...)
            sl.catch_up(query)          # wait until it has read everything
        out.frame()                     # everything it output

    The query starts a micro-batch every ``every`` (a processing-time trigger), writes to ``output``
    (a ``sl.BatchCollector``; a new one if not given) with its checkpoint in ``checkpoint``, and is
    stopped when the block ends, also on an error. A ``transformWithState`` query with
    ``timeMode="ProcessingTime"`` (TTL, processing-time timers) needs such a trigger: under
    ``availableNow`` it can keep running batches without data. Those are turned off while the query
    starts (``spark.sql.streaming.noDataMicroBatches.enabled=false``) and the setting is put back after.
    """
    session = frame.sparkSession
    before = session.conf.get(NO_DATA_BATCHES, "true")
    session.conf.set(NO_DATA_BATCHES, "false")
    sink = output if output is not None else BatchCollector()
    query = None
    try:
        query = (frame.writeStream.outputMode(output_mode).foreachBatch(sink)
                 .option("checkpointLocation", _checkpoint(checkpoint).path)
                 .trigger(processingTime=every).start())
        yield query
    finally:
        if query is not None:
            query.stop()
        session.conf.set(NO_DATA_BATCHES, before)
