"""Event time and watermarks: feed events in controlled micro-batches, and see what the watermark did.

A watermark only moves between micro-batches, so what a query drops as late depends on where the
batch boundaries fall. To make that repeatable, the course sends events, in their *arrival* order,
to a topic with ONE partition and reads it a fixed number of records per micro-batch::

    topic = sl.m06.arrival_topic("sensors", events)                 # events in arrival order
    stream = sl.m06.batched_stream(topic, batch_size=20)            # 20 records per micro-batch
    counts = (stream.withWatermark("event_time", "10 seconds")
              .groupBy(F.window("event_time", "10 seconds")).count())
    run = sl.run_to_end(counts, output_mode="append")
    table = sl.m06.watermark_table(run)          # per batch: max event time, watermark, late rows
    sl.m06.plot_watermark(table, sl.m06.events_table(events, batch_size=20))
    sl.m06.window_columns(run.rows)              # the window struct as window_start / window_end

What Spark 4.2 does with a watermark (measured in notebook 06):

* the watermark a batch uses = (the largest event time seen in the *earlier* batches) - delay; the
  first batch's is 0 (1970), and it never goes down;
* a window's result is final (emitted in append mode, removed from state) in the batch whose
  watermark has reached the window's end;
* a row is dropped as late only if its window had already ended by the *previous* batch's
  watermark (``late_cutoff`` below): by then its window has been emitted and forgotten.
"""
from __future__ import annotations

from typing import Any

from ..stack.kafka import end_offsets, new_topic, produce
from .events import TIMED_EVENT_SCHEMA
from .runs import progress_table
from .streams import kafka_stream

ARRIVAL_COLOURS = {"on_time": "#4c72b0", "out_of_order": "#dd8452", "late": "#c44e52"}


def arrival_topic(name: str, events: list[dict], *, key: str | None = None) -> str:
    """A fresh topic with ONE partition holding ``events`` in the order given (their arrival order).

    One partition keeps the arrival order in Kafka (offset 0, 1, 2, ...), so a query reading it
    ``batch_size`` records at a time always cuts the same micro-batches. Returns the topic's name.
    """
    topic = new_topic(name, partitions=1)
    produce(topic, events, key=key, partition=0)
    return topic


def quiet_spells(events: list[dict], *, seed: int = 0, spells: int = 4,
                 length_s: tuple[float, float] = (20.0, 40.0)) -> list[dict]:
    """``events`` (``sl.timed_events``) with a few **quiet spells**: seeded stretches of event time in which
    one sensor sends nothing. Each spell picks a sensor and an event-time span of ``length_s`` seconds
    (somewhere within the events' time range) and leaves out that sensor's readings inside it. The other
    readings are kept, with their ids and in their (arrival) order. Spells may overlap.
    """
    import random
    from datetime import datetime

    def at(event):
        return datetime.fromisoformat(event["event_time"].replace("Z", "+00:00")).timestamp()

    if not events:
        return []
    rng = random.Random(seed)
    first, last = min(map(at, events)), max(map(at, events))
    sensors = sorted({e["sensor"] for e in events})
    cut = []
    for _ in range(spells):
        sensor, length = rng.choice(sensors), rng.uniform(*length_s)
        start = rng.uniform(first, max(first, last - length))
        cut.append((sensor, start, start + length))
    return [e for e in events if not any(e["sensor"] == s and a <= at(e) < b for s, a, b in cut)]


def batched_stream(topic: str, schema: str = TIMED_EVENT_SCHEMA, *, batch_size: int = 20, spark=None,
                   **options):
    """A streaming DataFrame of a one-partition ``topic``, read ``batch_size`` records per micro-batch.

    It is ``sl.kafka_stream`` with ``maxOffsetsPerTrigger=batch_size``: run with
    ``trigger(availableNow=True)`` (``sl.run_to_end``) it makes batches of exactly ``batch_size``
    records (the last one may be smaller), then a batch without data if the watermark moved.
    The Kafka ``offset`` column is each record's arrival position. Raises ``ValueError`` for a topic
    with several partitions: Spark splits the limit between partitions, which would mix the order.
    """
    partitions = end_offsets(topic)
    if len(partitions) != 1:
        raise ValueError(f"topic {topic!r} has {len(partitions)} partitions: batched_stream needs one "
                         f"(make it with sl.m06.arrival_topic)")
    return kafka_stream(topic, schema, spark=spark, maxOffsetsPerTrigger=batch_size, **options)


def events_table(events: list[dict], *, batch_size: int | None = None):
    """The events as a pandas table in arrival order: ``arrival_position``, ``event_time`` (a UTC
    timestamp) and the other fields; with ``batch_size`` also the micro-batch each one falls in
    (``batch`` = position // batch_size, as ``batched_stream`` cuts them)."""
    import pandas as pd

    table = pd.DataFrame(events)
    table.insert(0, "arrival_position", range(len(table)))
    if "event_time" in table:
        table["event_time"] = pd.to_datetime(table["event_time"], utc=True)
    if batch_size:
        table.insert(1, "batch", table["arrival_position"] // batch_size)
    return table


def watermark_table(run_or_progresses) -> Any:
    """One row per micro-batch: what the watermark did (from a ``sl.run_to_end`` result, a list of
    progress dicts, or ``query.recentProgress``).

    Columns: ``batch``, ``input_rows``, ``max_event_time`` (the latest event time in this batch),
    ``max_seen`` (the latest so far), ``watermark`` (the one this batch used: it decides which
    windows are final and leave the state), ``late_cutoff`` (the previous batch's watermark: rows
    whose window ended by then are dropped as late), ``late_rows_dropped`` and ``state_rows``.

    ``late_rows_dropped`` is Spark's own metric (``numRowsDroppedByWatermark``). In a streaming
    aggregation Spark counts it *after* a first partial aggregation, so several late events of the
    same key and window in one batch count as one row.
    """
    progresses = getattr(run_or_progresses, "progresses", run_or_progresses)
    table = progress_table(progresses)
    if table.empty:
        return table
    columns = ["batch", "input_rows", "max_event_time", "watermark", "late_rows_dropped", "state_rows"]
    table = table[[c for c in columns if c in table]].copy()
    table.insert(3, "max_seen", table["max_event_time"].cummax())
    table.insert(5, "late_cutoff", table["watermark"].shift(1))
    if len(table):
        table.loc[table.index[0], "late_cutoff"] = table["watermark"].iloc[0]
    table["late_cutoff"] = table["late_cutoff"].astype(table["watermark"].dtype)
    return table.reset_index(drop=True)


def window_columns(rows, column: str | None = None):
    """``rows`` (pandas, e.g. ``run.rows``) with the window struct column (``window`` or
    ``session_window``, or ``column``) replaced by ``window_start`` and ``window_end`` timestamps,
    sorted by window start. Other columns are kept as they are."""
    import pandas as pd

    if len(rows) == 0:
        return rows
    names = [column] if column else [c for c in ("window", "session_window") if c in rows]
    if not names:
        raise ValueError(f"no window column among {list(rows.columns)}: name it with column=")
    name = names[0]
    start = pd.to_datetime(rows[name].map(lambda w: w["start"]), utc=True)
    end = pd.to_datetime(rows[name].map(lambda w: w["end"]), utc=True)
    position = list(rows.columns).index(name)
    flat = rows.drop(columns=name)
    flat.insert(position, "window_end", end)
    flat.insert(position, "window_start", start)
    order = ["window_start"] + [c for c in ("batch_id",) if c in flat]
    return flat.sort_values(order, kind="stable").reset_index(drop=True)


def tumbling_window_end(event_times, size_s: float):
    """The end of the tumbling window of ``size_s`` seconds each event time (a pandas Series) falls
    in: windows start at whole multiples of the size since 1970, as with Spark's ``window()``."""
    import pandas as pd

    step = pd.Timedelta(seconds=size_s)
    return pd.to_datetime(event_times, utc=True).dt.floor(step) + step


def dropped_as_late(events, table, *, window_s: float):
    """The events a tumbling ``window_s``-second window aggregation drops as late, by the rule
    "the window had ended by the previous batch's watermark", applied with the watermarks Spark
    *measured* (``table`` from ``watermark_table``). ``events`` is an ``events_table`` with a
    ``batch`` column. Compare it with what is missing from the query's output."""
    cutoff = table.set_index("batch")["late_cutoff"]
    ends = tumbling_window_end(events["event_time"], window_s)
    return events[ends <= events["batch"].map(cutoff)]


def missing_from_output(events, windows, *, window_s: float, key: str = "sensor", ids: str = "ids"):
    """The events a windowed count left out: those whose tumbling ``window_s``-second window (and
    ``key``) *was* output, but whose id is in no output window's ``ids`` list. Spark does not say
    which rows it dropped as late; comparing what went in with what came out does.

    ``events`` is an ``events_table`` (``id``, ``event_time``, ``key``, ...); ``windows`` the query's
    output after ``window_columns`` (``window_start``, ``key`` and the ``ids`` it counted, e.g.
    ``F.collect_list("id")``). Windows never output (still open at the end) are not looked at."""
    import pandas as pd

    counted = {i for listed in windows[ids] for i in listed}
    output = set(zip(windows[key], windows["window_start"]))
    starts = tumbling_window_end(events["event_time"], window_s) - pd.Timedelta(seconds=window_s)
    in_output = pd.Series([(k, start) in output for k, start in zip(events[key], starts)], index=events.index)
    return events[in_output & ~events["id"].isin(counted)]


def plot_watermark(table, events=None, *, ax=None, dropped=None, title: str | None = None):
    """Picture a watermark per micro-batch: the latest event time seen and the watermark (steps),
    and, if ``events`` (an ``events_table`` with ``batch``) is given, every event at the batch it
    arrived in, coloured by its ``arrival`` kind; ``dropped`` (a table of events, e.g. from
    ``dropped_as_late``) are circled. Returns the matplotlib Axes."""
    import matplotlib.pyplot as plt
    import pandas as pd

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    if events is not None and len(events):
        kinds = events["arrival"] if "arrival" in events else ["on_time"] * len(events)
        for kind in dict.fromkeys(kinds):
            some = events[kinds == kind] if "arrival" in events else events
            ax.scatter(some["batch"], some["event_time"], s=14, alpha=0.8, label=f"event ({kind})",
                       color=ARRIVAL_COLOURS.get(kind, "#777777"), zorder=3)
    if dropped is not None and len(dropped):
        ax.scatter(dropped["batch"], dropped["event_time"], s=110, facecolors="none", edgecolors="black",
                   linewidths=1.5, label="dropped as late", zorder=4)
    seen = table.dropna(subset=["max_seen"])
    ax.step(seen["batch"], seen["max_seen"], where="mid", color="#55a868", label="max event time seen")
    # the first batch's watermark is 0 (1970): left out, or the picture would span 56 years
    moved = table[table["watermark"] > pd.Timestamp(0, tz="UTC")]
    ax.step(moved["batch"], moved["watermark"], where="mid", color="black", linestyle="--",
            label="watermark used by the batch")
    ax.set_xlabel("micro-batch")
    ax.set_ylabel("event time")
    ax.set_xticks(list(table["batch"]))
    ax.set_title(title or "Event time vs watermark, per micro-batch")
    ax.legend(loc="upper left", fontsize="small")
    return ax


def wait_for_next_window(size_s: float) -> float:
    """Wait until the machine's clock enters the next tumbling window of ``size_s`` seconds (at most
    ``size_s`` seconds); returns the seconds waited. A query started after this gets a
    ``current_timestamp()`` in a later processing-time window than any batch that ran before it."""
    import time

    now = time.time()
    wait = size_s - (now % size_s) + 0.01   # just past the boundary
    time.sleep(wait)
    return wait


def final_result(run):
    """The result table a complete-mode run ended with: the rows of its last batch that output
    anything, without ``batch_id``, window structs flattened (``window_columns``)."""
    rows = getattr(run, "rows", run)
    if len(rows) == 0:
        return rows
    last = rows[rows["batch_id"] == rows["batch_id"].max()].drop(columns="batch_id")
    flat = window_columns(last) if any(c in last for c in ("window", "session_window")) else last
    return flat.sort_values(list(flat.columns[:2]), kind="stable").reset_index(drop=True)


def emissions(runs: dict, *, value: str = "count", key: str | None = None):
    """What each micro-batch output, side by side for several runs of one windowed query
    (``{"append": run, "update": run, ...}``): one row per batch, one column per run, each cell
    listing the windows output as ``"09:00:10→7"`` (window start → ``value``; with ``key``, the
    key first). Also the ``watermark`` each batch used (from the run with the most batches)."""

    longest = max(runs.values(), key=lambda run: len(run.progresses))
    table = watermark_table(longest)[["batch", "watermark"]].copy()
    table["watermark"] = table["watermark"].map(lambda t: "-" if t.year == 1970 else t.strftime("%H:%M:%S"))
    for name, run in runs.items():
        rows = window_columns(run.rows) if len(run.rows) else run.rows
        cells = {}
        for batch, group in (rows.groupby("batch_id") if len(rows) else []):
            labels = [f"{getattr(r, key) + ' ' if key else ''}{r.window_start:%H:%M:%S}→{getattr(r, value)}"
                      for r in group.itertuples()]
            cells[batch] = ", ".join(labels)
        table[name] = table["batch"].map(cells).fillna("")
    return table.set_index("batch")


def plot_windows(windows: dict, events=None, *, ax=None, title: str | None = None):
    """Picture window kinds on one event-time axis: ``windows`` maps a label to output rows with
    ``window_start``/``window_end`` (``window_columns``) and a ``count``; each window is a bar
    with its count. ``events`` (an ``events_table``) are drawn as ticks underneath."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(9, 1 + 0.8 * len(windows)))
    labels = list(windows)
    for level, label in enumerate(labels):
        rows = windows[label]
        lanes: list = []  # the end of the last window drawn on each lane: overlapping windows stack up
        for r in rows.sort_values("window_start").itertuples():
            lane = next((i for i, end in enumerate(lanes) if end <= r.window_start), None)
            if lane is None:
                lanes.append(None)
                lane = len(lanes) - 1
            lanes[lane] = r.window_end
            y = level + 0.3 * lane
            inset = (r.window_end - r.window_start) * 0.04  # a gap between windows that touch
            ax.plot([r.window_start + inset, r.window_end - inset], [y, y], linewidth=6,
                    solid_capstyle="butt", color=f"C{level}", alpha=0.75)
            ax.text(r.window_start + (r.window_end - r.window_start) / 2, y + 0.12, str(r.count),
                    ha="center", fontsize=7)
    if events is not None and len(events):
        ax.scatter(events["event_time"], [-0.6] * len(events), marker="|", color="black", s=60)
        labels_all = ["events"] + labels
        ax.set_yticks([-0.6] + list(range(len(labels))), labels_all)
    else:
        ax.set_yticks(list(range(len(labels))), labels)
    ax.set_ylim(top=len(labels) - 0.2)
    ax.set_xlabel("event time")
    ax.set_title(title or "Windows over event time (the number is the window's count)")
    return ax


def plot_arrivals(events, *, ax=None):
    """Picture disorder: each event's event time against its arrival position (an ``events_table``),
    coloured by its ``arrival`` kind. In-order events make a straight line. Returns the Axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3))
    for kind, some in events.groupby("arrival", sort=False):
        ax.scatter(some["arrival_position"], some["event_time"], s=12, label=kind,
                   color=ARRIVAL_COLOURS.get(kind, "#777777"))
    ax.set_xlabel("arrival position (Kafka offset)")
    ax.set_ylabel("event time")
    ax.set_title("The order events happened in vs the order they arrived in")
    ax.legend(fontsize="small")
    return ax
