"""streamlab.lessons.m08_state_in_flink_2: what a restarted query loads from its checkpoint.

The table's pure parts (key counts, Spark's log line, a progress report made into a row, the medians) are tested
on hand-made input, in milliseconds; the last test measures real queries on RocksDB against the broker.
"""
from __future__ import annotations

import pytest

from streamlab.lessons import m08_state_in_flink_2 as m08

LOG = """\
05:01:02 INFO RocksDBFileManager StateStoreProviderId[ ... partitionId=0 ... ]: Copied 1 files (5191712 bytes) \
from DFS to local with 0 files reused.
05:01:02 INFO RocksDBFileManager StateStoreProviderId[ ... partitionId=1 ... ]: Copied 2 files (5188977 bytes) \
from DFS to local with 0 files reused.
05:01:03 INFO RocksDBFileManager StateStoreProviderId[ ... ]: Copied 1 files (1234 bytes) from local to DFS for \
version 2. 1 files reused without copying.
"""


def _progress(*, ms: int = 1200, add: int = 900, rows: int = 1001, sst: int | None = 2**20, load: int = 0) -> dict:
    metrics = {"rocksdbLoadLatencyMs": load}
    if sst is not None:
        metrics["rocksdbSstFileSize"] = sst
    return {"batchId": 3, "numInputRows": 1, "durationMs": {"triggerExecution": ms, "addBatch": add},
            "stateOperators": [{"numRowsTotal": rows, "customMetrics": metrics}]}


def test_key_counts_come_back_sorted_and_one_number_is_a_list():
    assert m08.check_key_counts([100_000, 10_000]) == [10_000, 100_000]
    assert m08.check_key_counts(500) == [500]
    assert m08.check_key_counts(range(1, 4)) == [1, 2, 3]


@pytest.mark.parametrize(("n_keys", "error", "words"), [
    ([], ValueError, "at least one"),
    ([0], ValueError, "between 1 and"),
    ([-5], ValueError, "between 1 and"),
    ([m08.MAX_KEYS + 1], ValueError, "between 1 and"),
    ([10, 10], ValueError, "each key count once"),
    ([1.5], TypeError, "whole number"),
    ([True], TypeError, "whole number"),
    (["10"], TypeError, "whole number"),
])
def test_bad_key_counts_are_refused_with_a_reason(n_keys, error, words):
    with pytest.raises(error, match=words):
        m08.check_key_counts(n_keys)


@pytest.mark.parametrize("tries", [0, 11, 2.0, True])
def test_bad_tries_are_refused_before_anything_runs(tries):
    with pytest.raises(ValueError, match="tries"):
        m08.restart_cost([10], tries=tries)


def test_the_log_gives_what_was_loaded_not_what_was_uploaded():
    assert m08.loaded_from_checkpoint(LOG) == (3, 5191712 + 5188977)
    assert m08.loaded_from_checkpoint("05:01:03 INFO ... Copied 1 files (1234 bytes) from local to DFS") is None
    assert m08.loaded_from_checkpoint("") is None


def test_the_log_counts_only_the_query_run_asked_for():
    """Two drivers (the suite's workers) may write one log: a load by another query run is not this one's."""
    mine, other = "6c5b6302-1673-4ea3-ac97-284fb5c78e75", "b23e16be-9494-42fc-92c8-e86cf1890542"
    line = ("12:00:37 INFO RocksDBFileManager StateStoreProviderId[ storeId=StateStoreId[ operatorId=0, partitionId=0, "
            "storeName=default ], queryRunId={} ]: Copied {} files ({} bytes) from DFS to local with 0 files reused.")
    log = "\n".join([line.format(other, 2, 10005), line.format(mine, 1, 9000)])
    assert m08.loaded_from_checkpoint(log, mine) == (1, 9000)
    assert m08.loaded_from_checkpoint(log, "not-a-run") is None
    assert m08.loaded_from_checkpoint(log) == (3, 19005)


def test_a_progress_report_becomes_a_row():
    row = m08.first_batch_row(_progress(), keys=1000, mode="restarted", copied=(2, 3 * 2**20), attempt=2)
    assert list(row) == m08.COLUMNS
    assert row == {"keys": 1000, "mode": "restarted", "try": 2, "batch_ms": 1200, "add_batch_ms": 900,
                   "state_rows": 1001, "state_mib": 1.0, "files_copied": 2, "mib_copied": 3.0,
                   "reported_load_ms": 0}


def test_a_restart_without_its_log_line_is_unknown_not_zero():
    restarted = m08.first_batch_row(_progress(sst=None), keys=10, mode="restarted", copied=None)
    assert restarted["files_copied"] is None and restarted["mib_copied"] is None and restarted["state_mib"] is None
    running = m08.first_batch_row(_progress(), keys=10, mode="kept running", copied=None)
    assert running["files_copied"] == 0 and running["mib_copied"] == 0


def test_a_row_needs_a_known_mode_and_a_stateful_operator():
    with pytest.raises(ValueError, match="mode is one of"):
        m08.first_batch_row(_progress(), keys=10, mode="warm", copied=None)
    with pytest.raises(ValueError, match="no stateful operator"):
        m08.first_batch_row({"durationMs": {"triggerExecution": 5}}, keys=10, mode="restarted", copied=None)


def test_the_wide_table_has_one_row_per_key_count_and_the_medians():
    rows = []
    for keys, scale in [(100, 1), (1000, 10)]:
        for attempt, (run_ms, restart_ms) in enumerate([(900, 1500), (1000, 1100), (1100, 1300)], start=1):
            rows.append(m08.first_batch_row(_progress(ms=run_ms, sst=scale * 2**20), keys=keys,
                                            mode="kept running", copied=(0, 0), attempt=attempt))
            rows.append(m08.first_batch_row(_progress(ms=restart_ms, sst=scale * 2**20), keys=keys,
                                            mode="restarted", copied=(2, scale * 2**20), attempt=attempt))
    table = m08.cost_table(reversed(rows))
    assert list(table.columns) == m08.COLUMNS and len(table) == 12
    assert table[["keys", "mode", "try"]].head(3).values.tolist() == [[100, "kept running", 1],
                                                                      [100, "kept running", 2],
                                                                      [100, "kept running", 3]]
    wide = m08.wide_table(table)
    assert wide.index.tolist() == [100, 1000]
    assert list(wide.columns) == ["state MiB", "kept running: batch ms", "restarted: batch ms",
                                  "restarted: MiB copied"]
    assert wide.loc[1000].tolist() == [10.0, 1000, 1300, 10.0]


@pytest.mark.notebooks
def test_a_restart_copies_the_state_a_running_query_keeps_open(spark):
    """Real queries on RocksDB: 300 and 600 keys, one try each; the state reader then counts what they left."""
    from streamlab.lessons.m03_state_backends import PROVIDER_CONF

    before = spark.conf.get(PROVIDER_CONF)
    cost = m08.restart_cost([600, 300], tries=1, warm_up=False, spark=spark)
    assert spark.conf.get(PROVIDER_CONF) == before, "the session's provider is put back"
    table = cost.table
    assert table[["keys", "mode"]].astype(str).values.tolist() == [["300", "kept running"], ["300", "restarted"],
                                                                   ["600", "kept running"], ["600", "restarted"]]
    assert table["state_rows"].tolist() == [301, 302, 601, 602], "one new key per measured batch"
    running, restarted = table[table["mode"] == "kept running"], table[table["mode"] == "restarted"]
    assert (running["files_copied"] == 0).all(), "a running query's state store is open: nothing to load"
    assert (restarted["files_copied"] > 0).all(), "a restart copies the state's files from the checkpoint"
    assert (table["batch_ms"] > 0).all() and (table["state_mib"] >= 0).all()
    assert sorted(cost.checkpoints) == [300, 600]
    assert cost.checkpoints[600].state(spark).count() == 602
    assert cost.wide().index.tolist() == [300, 600]


def test_the_plot_has_a_panel_for_time_and_one_for_bytes():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [m08.first_batch_row(_progress(ms=ms, sst=keys * 2**10), keys=keys, mode=mode,
                                copied=(1, keys * 2**10) if mode == "restarted" else (0, 0))
            for keys in (1000, 10_000) for mode, ms in (("kept running", 900), ("restarted", 1200))]
    figure = m08.RestartCost(m08.cost_table(rows)).plot()
    try:
        left, right = figure.axes
        assert [t.get_text() for t in left.get_xticklabels()] == ["1,000", "10,000"]
        assert len(left.patches) == 4 and len(right.patches) == 4
        assert max(p.get_height() for p in left.patches) == pytest.approx(1.2)
    finally:
        plt.close(figure)
