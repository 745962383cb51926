"""Module 07, savepoints and upgrades: its helpers, as ``sl.m07.<name>``.

* ``savepoints``: a savepoint the Spark way (a committed checkpoint, copied), what it holds, and which
  offsets a query started from it reads (``take_savepoint``, ``savepoint_info``, ``starting_offsets``);
* ``upgrades``: trying a changed query on a copy of a savepoint (``try_change``, ``changes_table``);
* ``version_tree``: which version started from which savepoint, drawn (``plot_version_tree``);
* ``path_stats``: a ``transformWithState`` processor that starts from another job's state;
* ``live_state``: a sink that holds one batch open, to read a running query's state (``HoldBatch``), and a
  running query with such a sink (``HeldQuery``).
"""
from . import path_stats
from .live_state import HeldQuery, HoldBatch
from .path_stats import PATH_STATS_OUTPUT
from .savepoints import (
    SavepointError,
    initial_offsets,
    recorded_conf,
    savepoint_info,
    schema_file_paths,
    starting_offsets,
    take_savepoint,
    write_to_topic,
)
from .upgrades import changes_table, try_change
from .version_tree import plot_version_tree

__all__ = ["take_savepoint", "savepoint_info", "starting_offsets", "recorded_conf", "initial_offsets",
           "write_to_topic", "SavepointError", "try_change", "changes_table", "plot_version_tree",
           "PATH_STATS_OUTPUT", "PathStats", "schema_file_paths", "HoldBatch", "HeldQuery"]


def __getattr__(name):  # sl.m07.PathStats is built on first use, so `import streamlab` stays light (no pyspark)
    if name == "PathStats":
        return path_stats.PathStats
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
