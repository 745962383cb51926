"""Watch a query's state change, batch by batch, while it runs.

Flink's web UI shows a job's checkpoints and Spark's shows rows per operator; neither shows *what* the
state of your own query held after each micro-batch. ``sl.watch`` does::

    run = sl.run_to_end(query, checkpoint=ckpt, watch="ana")   # watch the run, and the key "ana"
    run.watch.table()          # one row per batch: rows in and out, state keys added / updated / removed,
                               # watermark, timers registered and come due, state-store memory
    run.watch.history()        # what the state held for "ana" after each batch

    query = frame.writeStream...start()                         # a query you keep running
    view = sl.watch(query, ckpt)                                # the same view, until the query stops

In a notebook the view is a figure that redraws after every micro-batch and stays in the notebook (and on
the course's site) as a picture once the query has stopped.

Where the numbers come from, each the engine's own:

* rows in, watermark, event-time range, timers, memory: the query's progress report of that batch
  (``query.recentProgress``, what Spark's ``StreamingQueryListener`` receives);
* rows out: the run's own sink (``run_to_end``) or the progress report's sink;
* keys added / updated / removed and a key's value: the **state as of each batch**, read from the checkpoint
  with the state data source (``format("statestore")``, ``batchId=N``) and compared with the batch before.
  The change feed (``readChangeFeed``) says the same where a checkpoint has one (the HDFS provider, RocksDB with
  changelog checkpointing): every provider keeps the state of each batch, so the view reads that. The view
  shows the net change: where the feed has a key written and then removed in one batch (a window's last
  count before the watermark evicts it), the view counts it as removed.

The view reads a batch after Spark has committed it, in a thread of its own, so the query never waits for it, but
the two share the machine: on 2 cores, lesson 02b's timers query (10 batches) took 7.5 s watched against 4.9 s
(medians of 5 alternating runs: +0.26 s a batch), the view reading 0.46 s a batch, state and timers
(``benchmarks/watch_cost.py``).
"""
from __future__ import annotations

import base64
import io
import json
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..stack.session import spark as get_spark
from .checkpoint import Checkpoint

POLL_S = 0.2
"""How often the view looks for a new progress report, in seconds."""

TIMER_VARIABLE = "$"   # transformWithState keeps its timers in variables named "$eventTimers_..." / "$procTimers_..."


@dataclass
class BatchState:
    """What one micro-batch did, as the view shows it."""

    batch: int
    input_rows: int
    output_rows: int | None
    state_keys: int | None          # keys in the watched state after the batch (state reader)
    added: int | None               # keys that were not in the state before the batch
    updated: int | None             # keys whose value changed
    removed: int | None             # keys gone after the batch (cleared, expired, evicted by the watermark)
    state_rows: int | None          # Spark's own count (numRowsTotal of the stateful operators)
    state_memory_bytes: int | None
    timers_registered: int | None   # transformWithState: timers new after the batch (state reader,
    timers_due: int | None          # ``readRegisteredTimers``); registered before it and gone, with a time
    timers_pending: int | None      # the batch's watermark had passed; registered after it
    watermark: Any = None           # the watermark the batch used (a pandas Timestamp, UTC)
    min_event_time: Any = None
    max_event_time: Any = None


def watch(query, checkpoint=None, *, key=None, state_var: str | None = None, spark=None,
          output_rows=None, show: bool = True) -> StateWatch:
    """Watch a started streaming ``query`` until it stops: see the module's docstring.

    ``checkpoint`` (an ``sl.Checkpoint`` or a path) is where the view reads the state; without it only the
    progress reports are shown. ``key``: a grouping key whose state to follow (a value, or a tuple for a key of
    several columns). ``state_var``: for ``transformWithState``, the state variable to watch (default: the
    first one the processor declared). ``show``: draw the view in the notebook. Returns the ``StateWatch``;
    ``.wait()`` blocks until the query has stopped and the last batch is drawn.

    ``query`` may also be a checkpoint alone (``sl.watch(ckpt)``): a query that has stopped, or died, drawn from
    what its checkpoint keeps — every committed batch's state, its watermark and the records its offsets span
    (rows out are not kept there). That is how to look at the state a crash left behind.
    """
    if isinstance(query, (str, Path, Checkpoint)):
        checkpoint = query if isinstance(query, Checkpoint) else Checkpoint(query)
        view = StateWatch(CheckpointReplay(checkpoint), checkpoint, key=key, state_var=state_var, spark=spark,
                          show=show)
        view._follow()
        return view.wait()
    return StateWatch(query, checkpoint, key=key, state_var=state_var, spark=spark, output_rows=output_rows,
                      show=show).start()


class CheckpointReplay:
    """A stopped query as its checkpoint remembers it: one progress report per committed batch, with what the
    checkpoint keeps (the records the batch's offsets span, the watermark it used)."""

    isActive = False

    def __init__(self, checkpoint: Checkpoint):
        self.checkpoint = checkpoint
        self.name = _checkpoint_name(checkpoint)

    @property
    def recentProgress(self) -> list[dict]:  # noqa: N802 - the name of pyspark's StreamingQuery attribute
        import pandas as pd

        committed = set(self.checkpoint.commits()["batch"])
        offsets = self.checkpoint.offsets()
        ends = {} if offsets.empty else offsets.groupby("batch")["offset"].apply(
            lambda o: sum(v for v in o if isinstance(v, int))).to_dict()
        started = self.checkpoint.initial_offsets()
        if started:   # where the sources began: batch 0 read from there
            ends[-1] = sum(o for partitions in started.values() for o in partitions.values())
        reports = []
        for batch in sorted(committed):
            wanted = offsets[offsets["batch"] == batch]
            watermark_ms = wanted["watermark_ms"].iloc[0] if len(wanted) else None
            report = {"batchId": int(batch), "durationMs": {"addBatch": 0},
                      "numInputRows": ends.get(batch, 0) - ends[batch - 1] if batch - 1 in ends else None}
            if watermark_ms:
                report["eventTime"] = {"watermark": pd.Timestamp(int(watermark_ms), unit="ms", tz="UTC").isoformat()}
            reports.append(report)
        return reports


class StateWatch:
    """The view of one query; see ``watch``."""

    def __init__(self, query, checkpoint=None, *, key=None, state_var=None, spark=None, output_rows=None,
                 show=True):
        self.query = query
        self.checkpoint = (checkpoint if checkpoint is None or isinstance(checkpoint, Checkpoint)
                           else Checkpoint(checkpoint))
        self.key = key
        self.state_var = state_var
        self.name = getattr(query, "name", None) or _checkpoint_name(self.checkpoint) or "query"
        self._spark = spark if spark is not None else get_spark()   # taken here, in the caller's thread
        self._reader_session = None
        self._output_rows = output_rows
        self._show = show
        self.batches: list[BatchState] = []
        self._values: dict[int, dict] = {}      # batch -> {key: value} of the watched state
        self._previous: dict | None = None
        self._previous_timers: set | None = None
        self._has_timers = False
        self._reader_options: dict | None = None
        self._why_no_state: str | None = None
        self._seen: set[int] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._display = None
        self.read_seconds = 0.0                  # time spent reading state, over all batches
        self.error: BaseException | None = None

    # ------------------------------------------------------------------ running
    def start(self) -> StateWatch:
        if self._show:
            self._display = _display_handle(self)
        self._thread = threading.Thread(target=self._follow, name=f"watch-{self.name}", daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout_s: float = 60) -> StateWatch:
        """Block until the query has stopped and every batch it ran is in the view (at most ``timeout_s``)."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._draw()
        return self

    def _follow(self) -> None:
        try:
            while True:
                active = self.query.isActive
                self._take(self.query.recentProgress)
                if not active:
                    self._take(self.query.recentProgress)   # the last batch's report can land after the stop
                    break
                time.sleep(POLL_S)
        except Exception as error:  # the view must never take the query or the notebook down with it
            self.error = error

    def _take(self, progresses) -> None:
        for progress in progresses or []:
            batch = progress.get("batchId")
            if batch is None or batch in self._seen or "addBatch" not in (progress.get("durationMs") or {}):
                continue   # an idle report (no batch ran) or a batch already shown
            self._seen.add(batch)
            self._add(progress)
            self._draw()

    def _add(self, progress: dict) -> None:
        import pandas as pd

        batch = progress["batchId"]
        ops = progress.get("stateOperators") or []
        event_time = progress.get("eventTime") or {}
        if not self.batches and batch > 0:
            # A query restarted from its checkpoint: what it restored is the state as of the batch before.
            self._previous = self._state_as_of(batch - 1)
            self._previous_timers = self._timers_as_of(batch - 1)
        values = self._state_as_of(batch)
        watermark_ms = _epoch_ms(event_time.get("watermark"))
        timers = self._timers_as_of(batch)
        registered = due = None
        if timers is not None:
            before = self._previous_timers or set()
            registered = len(timers - before)
            # Spark's own count (numExpiredTimers) stays 0 for Python processors on 4.2.1: the view counts the
            # timers that came due instead (those Spark fired, and any the key's own input moved first).
            due = sum(1 for _, at in before - timers if watermark_ms is not None and at <= watermark_ms)
            self._previous_timers = timers
        added = updated = removed = None
        if values is not None:
            before = self._previous or {}
            added = sum(1 for k in values if k not in before)
            updated = sum(1 for k, v in values.items() if k in before and before[k] != v)
            removed = sum(1 for k in before if k not in values)
            self._previous = values
            self._values[batch] = values
        sink_rows = (progress.get("sink") or {}).get("numOutputRows")
        out = self._output_rows(batch) if self._output_rows else (sink_rows if (sink_rows or -1) >= 0 else None)

        def time_of(name):
            return pd.to_datetime(event_time[name]) if name in event_time else None

        with self._lock:
            self.batches.append(BatchState(
                batch=batch, input_rows=progress.get("numInputRows", 0), output_rows=out,
                state_keys=None if values is None else len(values), added=added, updated=updated, removed=removed,
                state_rows=sum(o.get("numRowsTotal", 0) for o in ops) if ops else None,
                state_memory_bytes=sum(o.get("memoryUsedBytes", 0) for o in ops) if ops else None,
                timers_registered=registered, timers_due=due, timers_pending=None if timers is None else len(timers),
                watermark=time_of("watermark") if watermark_ms else None,   # 0 until the first batch has set it
                min_event_time=time_of("min"), max_event_time=time_of("max")))

    # ------------------------------------------------------------------ reading the state
    def _state_as_of(self, batch: int) -> dict | None:
        if self.checkpoint is None or self._why_no_state:
            return None
        started = time.perf_counter()
        try:
            if self._reader_options is None:
                self._reader_options = self._choose_reader()
                if self._reader_options is None:
                    return None
            frame = self.checkpoint.state(self._session(), batchId=batch, **self._reader_options)
            return {_plain(row["key"]): _plain(row["value"]) for row in frame.collect()}
        except Exception as error:
            self._why_no_state = f"the state could not be read: {type(error).__name__}"
            return None
        finally:
            self.read_seconds += time.perf_counter() - started

    def _timers_as_of(self, batch: int) -> set | None:
        if not self._has_timers or self._reader_options is None:
            return None
        started = time.perf_counter()
        try:
            frame = self.checkpoint.state(self._session(), batchId=batch, readRegisteredTimers=True,
                                          operatorId=self._reader_options["operatorId"])
            return {(_plain(row["key"]), row["expiration_timestamp_ms"]) for row in frame.collect()}
        except Exception as error:
            self._why_no_state = f"the timers could not be read: {type(error).__name__}"
            return None
        finally:
            self.read_seconds += time.perf_counter() - started

    def _choose_reader(self) -> dict | None:
        operators = self.checkpoint.state_metadata(self._session()).collect()
        if not operators:
            self._why_no_state = "the query keeps no state"
            return None
        properties = json.loads(operators[0]["operatorProperties"] or "{}")
        declared = [v["stateName"] for v in properties.get("stateVariables") or []]
        variables = [v for v in declared if not v.startswith(TIMER_VARIABLE)]
        self._has_timers = len(variables) < len(declared)
        if not variables:
            return {"operatorId": operators[0]["operatorId"]}
        name = self.state_var or variables[0]
        if name not in variables:
            raise ValueError(f"no state variable {name!r}; the processor declares {variables}")
        self.state_var = name
        return {"operatorId": operators[0]["operatorId"], "stateVarName": name, "flattenCollectionTypes": False}

    def _session(self):
        # A session of its own (same SparkContext): the state reader, run while a query runs, can leave the
        # session's state-store setting changed (seen on pyspark 4.2.1: the next query of the learner's
        # session then ran on the HDFS provider), so it never runs in the learner's session.
        if self._reader_session is None:
            self._reader_session = self._spark.newSession()
        return self._reader_session

    # ------------------------------------------------------------------ what a learner reads
    def table(self):
        """One row per micro-batch (see ``BatchState`` for the columns)."""
        import pandas as pd

        with self._lock:
            rows = [asdict(b) for b in self.batches]
        columns = list(BatchState.__dataclass_fields__)
        table = pd.DataFrame(rows, columns=columns).set_index("batch")
        for column in table.columns:
            if column in ("watermark", "min_event_time", "max_event_time"):
                table[column] = pd.to_datetime(table[column], utc=True)
            else:   # counts: numbers, NaN where the view has none
                table[column] = pd.to_numeric(table[column]).astype("Int64")
        return table

    def states(self) -> dict[int, dict]:
        """{batch: {key: value}}: the watched state as of each batch, as the state reader gave it."""
        return {batch: dict(values) for batch, values in sorted(self._values.items())}

    def history(self, key=None):
        """What the watched state held for ``key`` (default: the one given to ``watch``) after each batch:
        one row per batch, ``value`` None while the key had no state."""
        import pandas as pd

        key = self.key if key is None else key
        batches = sorted(self._values)
        values = pd.Series([self._values[b].get(key) for b in batches], index=pd.Index(batches, name="batch"),
                           dtype=object, name="value")
        return values.to_frame()

    def figure(self):
        """The view as a matplotlib figure (drawn without pyplot, so from any thread)."""
        import matplotlib.dates as mdates
        from matplotlib.figure import Figure

        table = self.table()
        table = table.astype({c: "float64" for c in table.columns if str(table[c].dtype) == "Int64"})  # NaN, not NA
        event_time = table["max_event_time"].notna().any()
        panels = 3 if event_time else 2
        fig = Figure(figsize=(9, 1.9 * panels + 0.5), layout="constrained")
        axes = fig.subplots(panels, 1, sharex=True)
        batches = list(table.index)
        rows_ax, state_ax = axes[0], axes[1]
        rows_ax.bar([b - 0.2 for b in batches], table["input_rows"], width=0.4, label="rows in")
        if table["output_rows"].notna().any():
            rows_ax.bar([b + 0.2 for b in batches], table["output_rows"].fillna(0), width=0.4, label="rows out")
        rows_ax.set_ylabel("rows")
        if table["state_keys"].notna().any():
            added, updated = table["added"].fillna(0), table["updated"].fillna(0)
            state_ax.bar(batches, added, color="tab:green", label="keys added")
            state_ax.bar(batches, updated, bottom=added, color="tab:orange", label="keys updated")
            state_ax.bar(batches, -table["removed"].fillna(0), color="tab:red", label="keys removed")
            state_ax.plot(batches, table["state_keys"], "k.-", label="keys in state")
        elif table["state_rows"].notna().any():
            state_ax.plot(batches, table["state_rows"], "k.-", label="state rows (Spark's count)")
        if table["timers_pending"].fillna(0).any():
            state_ax.plot(batches, table["timers_pending"], ".--", color="tab:purple", label="timers registered")
            due = table[table["timers_due"].fillna(0) > 0]
            if len(due):
                state_ax.plot(due.index, -due["timers_due"], "v", color="tab:purple", label="timers due")
        state_ax.axhline(0, color="grey", linewidth=0.5)
        state_ax.set_ylabel(f"state: {self.state_var}" if self.state_var else "state")
        if self._why_no_state:
            state_ax.set_title(self._why_no_state, fontsize=9)
        if event_time:
            time_ax = axes[2]
            time_ax.step(batches, table["max_event_time"].dt.tz_localize(None), where="mid", label="latest event time")
            if table["watermark"].notna().any():
                time_ax.step(batches, table["watermark"].dt.tz_localize(None), where="mid", label="watermark")
            time_ax.yaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
            time_ax.set_ylabel("event time")
        for ax in axes:
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
        axes[-1].set_xlabel("micro-batch")
        if batches:
            axes[-1].set_xlim(min(batches) - 0.6, max(batches) + 0.6)
            if len(batches) <= 25:
                axes[-1].set_xticks(batches)
            else:
                axes[-1].xaxis.get_major_locator().set_params(integer=True)
        status = "running" if self.query.isActive else "stopped"
        fig.suptitle(f"{self.name}: {len(batches)} micro-batches ({status})", fontsize=10)
        return fig

    def png(self) -> bytes:
        buffer = io.BytesIO()
        self.figure().savefig(buffer, format="png", dpi=80)
        return buffer.getvalue()

    def _draw(self) -> None:
        if self._display is not None:
            self._display.update(self)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return _bundle(self), {"streamlab": {"view": "state-watch", "query": self.name}}

    def __repr__(self) -> str:
        status = "running" if self.query.isActive else "stopped"
        return f"StateWatch({self.name}: {len(self.batches)} batches, {status})"


def _bundle(view: StateWatch) -> dict:
    png = base64.b64encode(view.png()).decode()
    html = f'<img alt="state watch: {_escape(view.name)}" src="data:image/png;base64,{png}"/>'
    if view.key is not None and view._values:
        html += f"<p>The state of {_escape(repr(view.key))} after each batch:</p>{view.history().to_html()}"
    return {"text/plain": f"{view!r}\n{view.table().to_string(max_rows=12)}", "image/png": png, "text/html": html}


def _escape(text: str) -> str:
    import html

    return html.escape(str(text), quote=True)


class _Handle:
    """A notebook output that the view redraws in place (IPython's display ids)."""

    def __init__(self, handle):
        self._handle = handle

    def update(self, view: StateWatch) -> None:
        bundle, metadata = view._repr_mimebundle_()
        self._handle.update(bundle, metadata=metadata, raw=True)


def _display_handle(view: StateWatch):
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return None
    if get_ipython() is None:   # a script or a test: nothing to draw on
        return None
    bundle, metadata = view._repr_mimebundle_()
    return _Handle(display(bundle, metadata=metadata, raw=True, display_id=True))


def _checkpoint_name(checkpoint) -> str | None:
    """``visits-cleanup`` for a checkpoint made by ``sl.new_checkpoint("visits-cleanup")``."""
    if checkpoint is None:
        return None
    name = Path(str(checkpoint)).name
    stem, _, suffix = name.rpartition("-")
    return stem if stem and len(suffix) == 6 and all(c in "0123456789abcdef" for c in suffix) else name


def _epoch_ms(text):
    import pandas as pd

    return None if not text else int(pd.Timestamp(text).value // 1_000_000)


def _plain(value):
    """A state reader's key or value as a hashable Python value: one field alone, several as a tuple."""
    if value is None:
        return None
    if hasattr(value, "asDict"):
        fields = tuple(_plain(v) for v in value.asDict(recursive=False).values())
        return fields[0] if len(fields) == 1 else fields
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((_plain(k), _plain(v)) for k, v in value.items()))
    return value
