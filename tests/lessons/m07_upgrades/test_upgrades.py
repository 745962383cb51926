"""streamlab.lessons.m07_upgrades.upgrades: what Spark said when a changed query started on a copy of a savepoint.

The end-to-end run (two changes tried on a real savepoint) is in tests/lessons/m07_upgrades/test_savepoints.py
(marked ``notebooks``); these build the outcomes by hand.
"""
from __future__ import annotations

import streamlab as sl
from streamlab.lessons.m07_upgrades import upgrades


def test_error_class_finds_the_innermost_spark_error():
    failed = Exception("[STREAM_FAILED] Query [id = x] terminated with exception: "
                       "[STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE] Provided key schema does not match")
    assert upgrades.error_class(failed) == "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE"
    nested = Exception("[UNSUPPORTED_FEATURE.STORE_BACKEND_NOT_SUPPORTED_FOR_TWS] The feature is not supported")
    assert upgrades.error_class(nested) == "UNSUPPORTED_FEATURE.STORE_BACKEND_NOT_SUPPORTED_FOR_TWS"
    assert upgrades.error_class(ValueError("no class here")) == "ValueError"


def test_changes_table_has_one_row_per_change():
    outcomes = [upgrades.ChangeOutcome("filter", "accepted", batches_run=1,
                                       conf_after={"providerClass": "HDFS", "partitions": "2"}),
                upgrades.ChangeOutcome("new key", "refused", "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE")]
    table = sl.m07.changes_table(outcomes)
    assert table["change"].tolist() == ["filter", "new key"]
    assert table["outcome"].tolist() == ["accepted", "refused"]
    assert table["error class"].tolist() == ["", "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE"]
