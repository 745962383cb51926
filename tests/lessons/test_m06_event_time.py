"""streamlab.lessons.m06_event_time: controlled micro-batches, watermark tables and the rules they show.

The pure-pandas helpers are tested on hand-made inputs (milliseconds). One test runs a real query on
hand-made events through the real broker and pins down what Spark 4.2 does with a watermark: which
batch a window is final in, which rows it drops as late, and how it counts them.
"""
from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest

import streamlab as sl
from streamlab.lessons.events import iso_time


def _event(i, second, sensor="s1", arrival="on_time"):
    return {"id": i, "sensor": sensor, "value": float(i), "arrival": arrival,
            "event_time": iso_time(sl.START + timedelta(seconds=second))}


def _at(second):
    return pd.Timestamp(sl.START + timedelta(seconds=second))


def _progress(batch, rows, max_second=None, watermark_second=None, dropped=0, state=0):
    event_time = {"watermark": "1970-01-01T00:00:00.000Z" if watermark_second is None
                  else iso_time(sl.START + timedelta(seconds=watermark_second))}
    if max_second is not None:
        event_time["max"] = iso_time(sl.START + timedelta(seconds=max_second))
    return {"batchId": batch, "numInputRows": rows, "eventTime": event_time,
            "stateOperators": [{"numRowsTotal": state, "numRowsDroppedByWatermark": dropped}]}


def test_events_table_numbers_arrivals_and_batches():
    table = sl.m06.events_table([_event(i, s) for i, s in enumerate([0, 5, 3, 9, 1])], batch_size=2)
    assert table["arrival_position"].tolist() == [0, 1, 2, 3, 4]
    assert table["batch"].tolist() == [0, 0, 1, 1, 2]
    assert table["event_time"].iloc[2] == _at(3)
    assert "batch" not in sl.m06.events_table([_event(0, 0)])


def test_watermark_table_adds_what_the_watermark_did():
    progresses = [_progress(0, 3, 22, None, state=2), _progress(1, 3, 17, 17, state=2),
                  _progress(2, 3, 35, 17, dropped=1, state=3), _progress(3, 0, None, 30, state=1)]
    table = sl.m06.watermark_table(progresses)
    assert table["batch"].tolist() == [0, 1, 2, 3]
    assert table["max_seen"].tolist()[:3] == [_at(22), _at(22), _at(35)]
    assert table["watermark"].tolist()[1:] == [_at(17), _at(17), _at(30)]
    # the previous batch's watermark decides what is late; the first batch has nothing before it
    assert table["late_cutoff"].tolist()[2:] == [_at(17), _at(17)]
    assert table["late_cutoff"].iloc[0] == table["watermark"].iloc[0]
    assert table["late_rows_dropped"].tolist() == [0, 0, 1, 0]
    run = sl.Run(pd.DataFrame(), progresses[-1], progresses)
    assert sl.m06.watermark_table(run).equals(table)
    assert sl.m06.watermark_table([]).empty


def test_window_columns_and_final_result():
    rows = pd.DataFrame({"batch_id": [2, 1, 2], "sensor": ["a", "a", "b"],
                         "window": [{"start": _at(10), "end": _at(20)}, {"start": _at(0), "end": _at(10)},
                                    {"start": _at(0), "end": _at(10)}],
                         "count": [3, 1, 2]})
    flat = sl.m06.window_columns(rows)
    assert list(flat.columns) == ["batch_id", "sensor", "window_start", "window_end", "count"]
    assert flat["window_start"].tolist() == [_at(0).tz_convert("UTC"), _at(0), _at(10)]
    assert flat["batch_id"].tolist() == [1, 2, 2]
    final = sl.m06.final_result(rows)
    assert final[["sensor", "count"]].values.tolist() == [["a", 3], ["b", 2]]   # batch 2 only
    with pytest.raises(ValueError, match="no window column"):
        sl.m06.window_columns(rows.drop(columns="window"))


def test_dropped_as_late_applies_the_previous_batch_watermark():
    # batch 0: 09:00:30, 09:00:00; batch 1: 09:00:08, 09:00:12
    events = sl.m06.events_table([_event(0, 30), _event(1, 0), _event(2, 8), _event(3, 12)], batch_size=2)
    table = pd.DataFrame({"batch": [0, 1], "late_cutoff": [_at(-3600), _at(17)]})
    # 09:00:08 is in [0, 10), which had ended by 09:00:17; [10, 20) had not, although 12 < 17
    assert sl.m06.dropped_as_late(events, table, window_s=10)["id"].tolist() == [2]
    table["late_cutoff"] = [_at(-3600), _at(20)]
    assert sl.m06.dropped_as_late(events, table, window_s=10)["id"].tolist() == [2, 3]   # end == cutoff: dropped
    table["late_cutoff"] = [_at(-3600), _at(9)]
    assert sl.m06.dropped_as_late(events, table, window_s=10).empty


def test_missing_from_output_finds_events_left_out_of_output_windows():
    # sensor s1: [0, 10) output with ids 0 and 2 (1 is missing); [10, 20) never output (still open)
    events = sl.m06.events_table([_event(0, 1), _event(1, 5), _event(2, 9), _event(3, 12),
                                  _event(4, 3, sensor="s2")], batch_size=5)
    windows = sl.m06.window_columns(pd.DataFrame({
        "sensor": ["s1", "s2"], "window": [{"start": _at(0), "end": _at(10)}, {"start": _at(0), "end": _at(10)}],
        "count": [2, 1], "ids": [[0, 2], [4]]}))
    lost = sl.m06.missing_from_output(events, windows, window_s=10)
    assert lost["id"].tolist() == [1]
    windows.at[1, "ids"] = []                                     # s2's window output, its event not counted
    assert sl.m06.missing_from_output(events, windows, window_s=10)["id"].tolist() == [1, 4]


def test_emissions_lists_each_batch_output_per_mode():
    progresses = [_progress(0, 2, 12, None), _progress(1, 0, None, 7)]
    window = {"start": _at(0), "end": _at(10)}
    runs = {"append": sl.Run(pd.DataFrame({"batch_id": [1], "window": [window], "count": [2]}), None, progresses),
            "update": sl.Run(pd.DataFrame({"batch_id": [0], "window": [window], "count": [2]}), None, progresses)}
    table = sl.m06.emissions(runs)
    assert table.to_dict("index") == {0: {"watermark": "-", "append": "", "update": "09:00:00→2"},
                                      1: {"watermark": "09:00:07", "append": "09:00:00→2", "update": ""}}


def test_plots_draw_without_a_display():
    import matplotlib

    matplotlib.use("Agg")
    events = sl.m06.events_table([_event(i, s, arrival="late" if s < 5 else "on_time")
                              for i, s in enumerate([9, 12, 1, 25])], batch_size=2)
    table = sl.m06.watermark_table([_progress(0, 2, 12, None), _progress(1, 2, 25, 2), _progress(2, 0, None, 15)])
    ax = sl.m06.plot_watermark(table, events, dropped=events[events["id"] == 2])
    assert ax.get_xlabel() == "micro-batch" and len(ax.collections) == 3
    rows = sl.m06.window_columns(pd.DataFrame({"batch_id": [0, 0], "count": [2, 1],
                                           "window": [{"start": _at(0), "end": _at(10)},
                                                      {"start": _at(5), "end": _at(15)}]}))
    ax = sl.m06.plot_windows({"sliding": rows}, events)
    assert len(ax.lines) == 2
    assert sl.m06.plot_arrivals(events).get_xlabel().startswith("arrival position")


def test_batched_stream_needs_one_partition(kafka_bootstrap):
    topic = sl.new_topic("event-time-two", partitions=2)
    with pytest.raises(ValueError, match="2 partitions"):
        sl.m06.batched_stream(topic, batch_size=5)
    one = sl.m06.arrival_topic("event-time-one", [_event(i, i) for i in range(3)])
    assert sl.end_offsets(one) == {0: 3}
    assert [r["value"]["id"] for r in sl.read_topic(one)] == [0, 1, 2]


@pytest.mark.notebooks  # ~20 s: a real query of 6 micro-batches
def test_watermark_rules_on_spark(spark):
    """What the notebook teaches, pinned on hand-made events: batches of 3, 5-second watermark.

    batch 0: 30 0 1  -> uses watermark 0
    batch 1: 40 2 3  -> uses 09:00:25; window [0,10) is final here, with 0 1 2 3
    batch 2: 8 24 45 -> uses 09:00:35, late cutoff 09:00:25: 8 is dropped (window ended at 10),
                        24 is older than the watermark but its window [20,30) is still open: counted
    batch 3: 25 35 50 -> cutoff 09:00:35: 25 is dropped ([20,30) is gone)
    batch 4: 39 41 55 -> cutoff 09:00:40: 39 is dropped (its window ended exactly at the cutoff)
    batch 5: no data  -> uses 09:00:50: window [40,50) is final
    """
    from pyspark.sql import functions as F

    seconds = [30, 0, 1, 40, 2, 3, 8, 24, 45, 25, 35, 50, 39, 41, 55]
    topic = sl.m06.arrival_topic("event-time-rules", [_event(i, s) for i, s in enumerate(seconds)])
    counts = (sl.m06.batched_stream(topic, batch_size=3, spark=spark).withWatermark("event_time", "5 seconds")
              .groupBy(F.window("event_time", "10 seconds"))
              .agg(F.count("*").alias("count"), F.sort_array(F.collect_list(F.second("event_time"))).alias("seconds")))
    run = sl.run_to_end(counts, output_mode="append")
    table = sl.m06.watermark_table(run)
    assert table["watermark"].tolist() == [pd.Timestamp(0, tz="UTC"), _at(25), _at(35), _at(40), _at(45), _at(50)]
    assert table["late_rows_dropped"].tolist() == [0, 0, 1, 1, 1, 0]
    out = sl.m06.window_columns(run.rows)
    got = [(b, s.second, list(secs)) for b, s, secs in zip(out["batch_id"], out["window_start"], out["seconds"])]
    assert got == [(1, 0, [0, 1, 2, 3]), (2, 20, [24]), (3, 30, [30, 35]), (5, 40, [40, 41, 45])]
    arrivals = sl.m06.events_table([_event(i, s) for i, s in enumerate(seconds)], batch_size=3)
    assert sl.m06.dropped_as_late(arrivals, table, window_s=10)["event_time"].dt.second.tolist() == [8, 25, 39]


def test_quiet_spells_leave_out_one_sensor_for_a_while():
    events = sl.timed_events(120, seed=5)
    kept = sl.m06.quiet_spells(events, seed=3, spells=3, length_s=(15, 30))
    assert kept == sl.m06.quiet_spells(events, seed=3, spells=3, length_s=(15, 30))   # seeded
    assert [e for e in events if e in kept] == kept                                    # arrival order, ids kept
    assert 0 < len(events) - len(kept) < len(events) // 2
    table = sl.m06.events_table(kept).sort_values("event_time")
    longest = table.groupby("sensor")["event_time"].diff().max()
    assert longest >= pd.Timedelta(seconds=15)                                         # some sensor went quiet
    assert sl.m06.quiet_spells(events, seed=3, spells=0) == events
    assert sl.m06.quiet_spells([], seed=3) == []
