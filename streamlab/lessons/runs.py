"""Run streaming queries to a known end, and read what they produced.

A streaming query never ends by itself, so every run in the course is bounded in two ways: it
processes only what Kafka holds *now* (``trigger(availableNow=True)``, or
``processAllAvailable()`` on a running query), and it waits at most ``timeout_s`` seconds. When the
time runs out these helpers stop the query and **raise** ``TimeoutError``: a half-finished run
never passes for a finished one.

    run = sl.run_to_end(counts, output_mode="update", checkpoint=ckpt)
    run.rows          # every row the query output (pandas, with a batch_id column)
    run.progress      # the last micro-batch's progress (a dict)
    run.progresses    # every micro-batch's progress, oldest first
    sl.latest(run.rows, "path")            # {path: latest count}

    query = counts.writeStream....start()  # a query you keep running
    sl.catch_up(query)                     # returns when it has processed everything there is now

    except Exception as error: sl.error_class(error)   # why Spark refused: 'STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE'
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .mistakes import SPARK_ERROR_CLASS, condition_of
from .streams import BatchCollector
from .watch import watch as watch_query

WAIT_S = 120
"""The longest any helper waits for a query, in seconds (override with ``timeout_s=``)."""



def error_class(error) -> str:
    """The most specific Spark error class in an exception: for a query that failed with
    ``[STREAM_FAILED] ... [STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE] ...`` it is the second one.
    Falls back to the exception's own condition, then its type name."""
    found = [c for c in SPARK_ERROR_CLASS.findall(str(error)) if c != "STREAM_FAILED"]
    if found:
        return found[0]
    return condition_of(error) or type(error).__name__


@dataclass
class Run:
    """What a finished ``run_to_end`` leaves: the rows output, and the query's progress reports."""

    rows: Any                                            # pandas DataFrame, batch_id first
    progress: dict | None                                # the last micro-batch's progress
    progresses: list[dict] = field(default_factory=list)  # every micro-batch's, oldest first
    query_id: str | None = None
    watch: Any = None                                    # the StateWatch, when run with watch=True

    def __iter__(self):  # rows, progress = run_to_end(...) also works
        return iter((self.rows, self.progress))


def run_to_end(frame, *, output_mode: str = "append", checkpoint=None, timeout_s: float = WAIT_S,
               query_name: str | None = None, output_topic: str | None = None, foreach_batch=None,
               watch: bool = False, watch_key=None, **options) -> Run:
    """Run the streaming DataFrame ``frame`` over everything its source holds now, then stop.

    The rows go to a ``BatchCollector`` through ``foreachBatch`` (so it works in every output mode
    and can restart from a ``checkpoint``: a path or an ``sl.Checkpoint``). Extra ``options`` are
    passed to the writer (e.g. ``maxOffsetsPerTrigger`` belongs on the reader, not here).
    ``output_topic``: also write every batch's rows to this Kafka topic (see ``BatchCollector``).
    ``foreach_batch``: a function ``f(batch_df, batch_id)`` of yours, called for every batch too.
    ``watch=True``: draw the run's state batch by batch as it runs (``sl.watch``; ``run.watch`` keeps the
    view), and ``watch_key=``: follow that key's state too (implies ``watch``).
    Raises ``TimeoutError`` if the query is not done within ``timeout_s`` seconds, and the query's
    own exception if it fails.
    """
    collect = BatchCollector(copy_to_topic=output_topic)
    sink = collect
    if foreach_batch is not None:
        def sink(batch_df, batch_id):
            batch_df.persist()  # computed once, used by both (see BatchCollector)
            try:
                try:
                    foreach_batch(batch_df, batch_id)
                except BaseException as error:  # the learner's function: its traceback is theirs (lessons.mistakes)
                    collect.error = error
                    raise
                collect(batch_df, batch_id)
            finally:
                batch_df.unpersist()
    writer = (frame.writeStream.outputMode(output_mode).foreachBatch(sink)
              .trigger(availableNow=True))
    if checkpoint is not None:
        writer = writer.option("checkpointLocation", str(checkpoint))
    if query_name:
        writer = writer.queryName(query_name)
    for key, value in options.items():
        writer = writer.option(key, value)
    deadline = time.monotonic() + timeout_s
    for attempt in range(1 + WORKER_START_RETRIES):
        query = writer.start()
        view = None
        if watch or watch_key is not None:
            view = watch_query(query, checkpoint, key=watch_key, output_rows=collect.rows_in)
        try:
            finished = query.awaitTermination(max(1.0, deadline - time.monotonic()))
            if not finished:
                raise TimeoutError(f"the query did not finish within {timeout_s:g} s "
                                   f"(it was stopped; its output so far is incomplete)")
            break
        except Exception as error:
            if attempt < WORKER_START_RETRIES and checkpoint is not None and worker_did_not_start(error):
                print(f"(Spark's Python worker did not start within the 10 s Spark gives it: a busy machine. "
                      f"The query restarts from its checkpoint, attempt {attempt + 2}.)")
                continue
            error.streamlab_batch_error = collect.error  # for the learner's message (lessons.mistakes)
            raise
        finally:
            query.stop()
            if view is not None:
                view.wait()
    return Run(collect.frame(), query.lastProgress, list(query.recentProgress), str(query.id), view)


WORKER_START_RETRIES = 2
"""How many times ``run_to_end`` restarts a query whose Python worker did not start in time (see
``worker_did_not_start``)."""


def worker_did_not_start(error) -> bool:
    """The query failed because a Python worker Spark launched did not connect back within the 10 s Spark
    allows (``PythonWorkerFactory``, not configurable): a machine too busy to start Python in time, never
    the query's fault. It happens while the batch is planned (transformWithState's pre-init runner), before
    any of it runs or is committed, so a restart from the checkpoint loses and repeats nothing."""
    return "Python worker failed to connect back" in str(error)


def catch_up(query, timeout_s: float = WAIT_S) -> None:
    """``query.processAllAvailable()`` with a time limit: returns once the running ``query`` has
    processed everything its sources hold now. Stops the query and raises ``TimeoutError`` after
    ``timeout_s`` seconds; raises the query's own error if it failed.

    The progress report of the last batch can land a moment after this returns: read
    ``query.lastProgress`` after ``query.stop()`` when you need it."""
    errors: list[BaseException] = []

    def wait():
        try:
            query.processAllAvailable()
        except Exception as err:  # the query failed: re-raised below, in the caller's thread
            errors.append(err)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    waiter.join(timeout_s)
    if waiter.is_alive():
        query.stop()
        raise TimeoutError(f"the query did not catch up within {timeout_s:g} s (it was stopped)")
    if errors:
        raise errors[0]


def latest(rows, key: str | list[str] = "path", value: str | None = None) -> dict:
    """{key: value} from a query's output rows, the **latest** value of each key winning.

    ``rows`` is what ``run_to_end``/``BatchCollector`` returns (ordered by ``batch_id``).
    ``key`` is a column (or a list of columns: the dict keys are then tuples). ``value`` is the
    value column; leave it out when there is exactly one other column besides ``batch_id``.
    Raises ``ValueError`` naming the columns when it can't tell which column to use.
    """
    keys = [key] if isinstance(key, str) else list(key)
    columns = list(getattr(rows, "columns", []))
    if len(rows) == 0:
        return {}
    missing = [k for k in keys if k not in columns]
    if missing:
        raise ValueError(f"no column {missing[0]!r} in the output; its columns are {columns}")
    if value is None:
        others = [c for c in columns if c not in keys and c != "batch_id"]
        if len(others) != 1:
            raise ValueError(f"expected {keys} and ONE value column, got {columns}: name the value column")
        value = others[0]
    elif value not in columns:
        raise ValueError(f"no column {value!r} in the output; its columns are {columns}")
    ordered = rows.sort_values("batch_id", kind="stable") if "batch_id" in columns else rows
    result = {}
    for record in ordered[keys + [value]].itertuples(index=False):
        k = record[0] if len(keys) == 1 else tuple(record[:-1])
        result[k] = _plain(record[-1])
    return result


def _plain(value):
    """numpy scalars -> Python scalars, so results compare and print cleanly."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def progress_table(progresses) -> Any:
    """One row per micro-batch from a list of progress dicts (``run.progresses`` or
    ``query.recentProgress``): batch, input rows, durations, state rows and memory, watermark.

    The columns a learner plots: ``batch``, ``input_rows``, ``batch_ms``, ``state_rows``,
    ``state_rows_updated``, ``state_rows_removed``, ``state_memory_bytes``, ``late_rows_dropped``,
    ``watermark``, ``max_event_time``, plus every custom metric of the first stateful operator
    (prefixed ``state_``)."""
    import pandas as pd

    rows = []
    for p in progresses or []:
        ops = p.get("stateOperators") or []
        first = ops[0] if ops else {}
        event_time = p.get("eventTime") or {}
        row = {
            "batch": p.get("batchId"),
            "input_rows": p.get("numInputRows"),
            "batch_ms": (p.get("durationMs") or {}).get("triggerExecution"),
            "state_rows": sum(o.get("numRowsTotal", 0) for o in ops) if ops else None,
            "state_rows_updated": sum(o.get("numRowsUpdated", 0) for o in ops) if ops else None,
            "state_rows_removed": sum(o.get("numRowsRemoved", 0) for o in ops) if ops else None,
            "state_memory_bytes": sum(o.get("memoryUsedBytes", 0) for o in ops) if ops else None,
            "late_rows_dropped": sum(o.get("numRowsDroppedByWatermark", 0) for o in ops) if ops else None,
            "watermark": pd.to_datetime(event_time["watermark"]) if "watermark" in event_time else None,
            "max_event_time": pd.to_datetime(event_time["max"]) if "max" in event_time else None,
        }
        for name, metric in (first.get("customMetrics") or {}).items():
            row[f"state_{name}"] = metric
        rows.append(row)
    return pd.DataFrame(rows)
