"""Trying an upgrade on a copy of a savepoint: does Spark accept the changed query?

A changed job (another grouping key, a new filter, other settings) started on an old checkpoint is
either accepted — it carries on from the old state — or refused when the first batch runs, with
an error class such as ``STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE``. ``try_change`` finds out on a
fresh copy, so the savepoint itself is never touched::

    outcome = sl.m07.try_change("new grouping key", events.groupBy("method").count(), sp)
    outcome.outcome, outcome.error_class   # ('refused', 'STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE')
    sl.m07.changes_table([outcome, ...])       # one row per change: accepted or refused, and why
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ...stack.session import session_settings
from ...stack.session import spark as get_spark
from ..checkpoint import Checkpoint
from ..runs import WAIT_S, error_class, run_to_end
from .savepoints import recorded_conf, take_savepoint


@dataclass
class ChangeOutcome:
    """What Spark did when a changed query was started on a copy of a savepoint."""

    change: str
    outcome: str                    # "accepted" or "refused"
    error_class: str | None = None  # the innermost Spark error class, e.g. STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE
    batches_run: int = 0            # batches the changed query committed
    message: str = ""               # the first line of Spark's error message
    checkpoint: Checkpoint | None = None
    rows: Any = None                # what the accepted query output (pandas), else None
    conf_after: dict = field(default_factory=dict)  # recorded_conf of the copy afterwards


def try_change(change: str, frame, savepoint, *, output_mode: str = "update", conf: dict | None = None,
               spark=None, timeout_s: float = WAIT_S) -> ChangeOutcome:
    """Start the changed streaming DataFrame ``frame`` on a fresh copy of ``savepoint`` and say
    whether Spark accepted it.

    ``conf``: session settings to change for this run only (restored afterwards), e.g.
    ``{"spark.sql.shuffle.partitions": "8"}``. The input must hold records the savepoint has not
    read: Spark checks the state schema when a batch runs, so with nothing new to read no batch
    runs and nothing is checked (``batches_run == 0`` shows it).
    """
    session = _session(spark)
    copy = take_savepoint(savepoint, "try-" + re.sub(r"[^a-z0-9]+", "-", change.lower()).strip("-"),
                          spark=session)
    before = copy.last_committed_batch()
    try:
        with session_settings(session, conf or {}):
            run = run_to_end(frame, output_mode=output_mode, checkpoint=copy, timeout_s=timeout_s)
    except TimeoutError:
        raise
    except Exception as err:  # Spark refused the change: that is the result
        return ChangeOutcome(change, "refused", error_class(err), _batches_since(copy, before),
                             _first_line(err), copy, None, recorded_conf(copy))
    return ChangeOutcome(change, "accepted", None, _batches_since(copy, before), "", copy, run.rows,
                         recorded_conf(copy))


def changes_table(outcomes) -> Any:
    """One row per ``ChangeOutcome``: change, outcome, error class, batches run, and the state
    provider and shuffle partitions the copy's checkpoint recorded afterwards."""
    import pandas as pd

    return pd.DataFrame([{"change": o.change, "outcome": o.outcome, "error class": o.error_class or "",
                          "batches run": o.batches_run,
                          "provider (checkpoint)": o.conf_after.get("providerClass"),
                          "partitions (checkpoint)": o.conf_after.get("partitions")} for o in outcomes])


def _batches_since(ckpt: Checkpoint, before: int | None) -> int:
    last = ckpt.last_committed_batch()
    if last is None:
        return 0
    return last - (before if before is not None else -1)


def _first_line(error) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


def _session(spark):
    """The given session, else the course's (``sl.spark()`` leaves a running one's settings alone)."""
    return spark if spark is not None else get_spark()
