"""``PathStats``: a ``transformWithState`` processor that can start from another job's state.

Module 07 bootstraps a new job with the counts of an old one: ``PathStats`` keeps, per path, how
many requests (``count``) and the latest request time (``last_ts``), and takes an initial state
with a ``count`` column (``initialState=old_counts.groupBy("path")``). It is a pyspark class, so it
is built the first time you ask for it (``sl.m07.PathStats``): ``import streamlab`` does not
import pyspark.
"""
from __future__ import annotations

from datetime import UTC

PATH_STATS_OUTPUT = "path STRING, count LONG, last_ts TIMESTAMP"
"""The output schema of ``PathStats`` (give it as ``outputStructType``)."""


def _make_path_stats():
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor

    class PathStats(StatefulProcessor):
        """Per path: how many requests (``count``) and the latest request time (``last_ts``), in
        one value state called ``stats``. Group by ``path``. It can start from an initial state
        with a ``count`` column (``initialState=frame.groupBy("path")``): another job's counts."""

        def init(self, handle):
            self.stats = handle.getValueState("stats", "count LONG, last_ts TIMESTAMP")

        def handleInitialState(self, key, initialState, timerValues):
            fields = initialState.asDict()
            self.stats.update((int(fields["count"]), fields.get("last_ts")))

        def handleInputRows(self, key, rows, timerValues):
            count, last = self.stats.get() if self.stats.exists() else (0, None)
            last = _as_utc(last)
            for row in rows:
                count += 1
                ts = _as_utc(row.ts)
                if ts is not None and (last is None or ts > last):
                    last = ts
            self.stats.update((count, last))
            yield Row(path=key[0], count=count, last_ts=last)

        def close(self):
            pass

    PathStats.__module__ = __name__
    return PathStats


def __getattr__(name):  # PathStats is built on first use, so `import streamlab` stays light (no pyspark)
    if name == "PathStats":
        globals()["PathStats"] = cls = _make_path_stats()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _as_utc(moment):
    """Timestamps come back from state and from rows as naive or aware datetimes: compare them in UTC."""
    if moment is None:
        return None
    return moment.astimezone(UTC)
