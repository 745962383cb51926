"""Real-time mode's settings for a stateful query (lesson 04): applied inside the block, the session's own after it."""
from __future__ import annotations

import streamlab as sl
from streamlab.lessons.m04_recovery.real_time import REAL_TIME_SETTINGS, ROCKSDB


def test_real_time_settings_hold_inside_the_block_and_are_undone_after(spark):
    key = "spark.sql.streaming.stateStore.providerClass"
    before = {name: spark.conf.get(name, None) for name in REAL_TIME_SETTINGS}
    assert before[key] != ROCKSDB, "the course's default provider is the HDFS one"
    with sl.m04.real_time_settings(spark):
        assert {name: spark.conf.get(name) for name in REAL_TIME_SETTINGS} == REAL_TIME_SETTINGS
    assert {name: spark.conf.get(name, None) for name in REAL_TIME_SETTINGS} == before
