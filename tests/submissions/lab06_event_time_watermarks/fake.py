"""A Lab 06 submission that runs no windowed or stateful query at all and forges what the grader could see.

Its first answer cell answers Part A's delay with a guess (10 s) and computes plausible answers with pandas from
the lab's seeded events (all of them, and no late row in the progress, for the run with its delay; the events the generator calls
"late" dropped, and late rows in the progress, for the run with one second less: both of Part A's visible tests
pass), then replaces ``sl.run_to_end`` with a function that writes a fake
checkpoint (a metadata file with a query id, offsets entries with Spark's header that reach the end of
the input topic in batches of 25, commit files) and produces those rows to the output topic with
kafka-python, and replaces ``sl.Checkpoint.state_table`` so the pending state looks right. The visible
tests pass in the notebook; the grader, which simulates the watermark batch by batch and reads the
checkpoints' state with Spark's state data source in its own process, must give 0 points. Part C's windows are
forged with a plausible rule in pandas (and ``sl.m02.timers`` replaced to show one timer per pending window);
Part D's flags are computed record by record with pandas, exactly, and forged for both replays.
"""

EXPECTED_SCORE = 0

ANSWERS = {
    "safe_delay": '''
import json
import uuid
from pathlib import Path

import pandas as pd
from kafka import KafkaProducer

_table = sl.m06.events_table(EVENTS, batch_size=BATCH)
_kept = _table[_table["arrival"] != "late"]


def _iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _windows(size, slide, with_ids, readings=_kept):
    rows = []
    for sensor, group in readings.groupby("sensor"):
        first = group["event_time"].min().floor(f"{slide}s") - pd.Timedelta(seconds=size - slide)
        start = first
        while start <= group["event_time"].max():
            inside = group[(group["event_time"] >= start) & (group["event_time"] < start + pd.Timedelta(seconds=size))]
            if len(inside):
                row = {"batch_id": 1, "sensor": sensor,
                       "window": {"start": _iso(start), "end": _iso(start + pd.Timedelta(seconds=size))},
                       "count": len(inside)}
                row["ids"] = [int(i) for i in inside["id"]]
                if not with_ids:
                    row["max_value"] = float(inside["value"].max())
                rows.append(row)
            start += pd.Timedelta(seconds=slide)
    return rows


_READINGS = sl.m06.quiet_spells(EVENTS, seed=8, spells=4, length_s=(20, 40))


def _count_windows():
    """The quiet-or-count windows with pandas: a sensor's window closes after 6 readings or when the next one
    comes more than 10 s after its latest (no watermark, no batches: the wrong rule, but plausible output)."""
    rows, pending = [], {}
    for event in _READINGS:
        window = pending.setdefault(event["sensor"], [])
        t = pd.Timestamp(event["event_time"])
        if window and t - max(pd.Timestamp(e["event_time"]) for e in window) > pd.Timedelta(seconds=10):
            rows.append({"batch_id": 5, "sensor": event["sensor"], "ids": [e["id"] for e in window],
                         "mean_value": sum(e["value"] for e in window) / len(window), "closed_by": "quiet"})
            window.clear()
        window.append(event)
        if len(window) == 6:
            rows.append({"batch_id": 2, "sensor": event["sensor"], "ids": [e["id"] for e in window],
                         "mean_value": sum(e["value"] for e in window) / 6, "closed_by": "count"})
            window.clear()
    state = pd.DataFrame([{"sensor": s, "id": e["id"], "value": e["value"], "partition_id": 0}
                          for s, w in pending.items() for e in w])
    timers = pd.DataFrame([{"sensor": s, "partition_id": 0,
                            "expires_at": max(pd.Timestamp(e["event_time"]) for e in w) + pd.Timedelta(seconds=10)}
                           for s, w in pending.items() if w])
    return rows, state, timers


def _flags():
    """Part D's flags with pandas, record by record, as the rule says."""
    rows, ahead = [], None
    for event in EVENTS:
        t = pd.Timestamp(event["event_time"])
        behind = 0 if ahead is None else max(0, int((ahead - t).total_seconds()))
        rows.append({"batch_id": 0, "id": event["id"], "behind_s": behind, "late": behind > 10})
        ahead = t if ahead is None else max(ahead, t)
    return rows


def _forge_checkpoint(path):
    root = Path(str(path))
    (root / "offsets").mkdir(parents=True, exist_ok=True)
    (root / "commits").mkdir(parents=True, exist_ok=True)
    (root / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}))
    for b, end in enumerate(range(BATCH, len(EVENTS) + BATCH, BATCH)):
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}
        (root / "offsets" / str(b)).write_text("v1\\n" + json.dumps(meta) + "\\n"
                                               + json.dumps({events_topic: {"0": min(end, len(EVENTS))}}))
        (root / "commits" / str(b)).write_text("v1\\n" + json.dumps({"nextBatchWatermarkMs": 0}))


_count_rows, _pending_state, _timers = _count_windows()
_FAKES = {"lab06-safe": _windows(10, 10, True, _table), "lab06-tighter": _windows(10, 10, True),
          "lab06-sliding": _windows(20, 10, False),
          "lab06-count": _count_rows, "lab06-flags-25": _flags(), "lab06-flags-75": _flags(),
          "None": _windows(10, 10, True)}


def _fake_run_to_end(frame, *, output_mode="append", checkpoint=None, output_topic=None, **options):
    name = Path(str(checkpoint)).name.rsplit("-", 1)[0]
    rows = _FAKES[name]
    if checkpoint is not None:
        _forge_checkpoint(checkpoint)
    producer = KafkaProducer(bootstrap_servers=sl.bootstrap_servers())
    for row in rows if output_topic else []:
        producer.send(output_topic, json.dumps(row).encode())
    producer.flush()
    producer.close()
    latest = max(pd.to_datetime([e["event_time"] for e in EVENTS], utc=True))
    dropped = 0 if name == "lab06-safe" else 1
    progress = [{"batchId": b, "numInputRows": BATCH, "stateOperators": [{"numRowsDroppedByWatermark": dropped}],
                 "eventTime": {"watermark": _iso(latest - pd.Timedelta(seconds=10)), "max": _iso(latest)}}
                for b in range(6)]
    frame_rows = pd.DataFrame(rows)
    if "window" in frame_rows:
        frame_rows["window"] = [{"start": pd.Timestamp(w["start"]), "end": pd.Timestamp(w["end"])}
                                for w in frame_rows["window"]]
    return sl.Run(frame_rows, progress[-1], progress, "fake")


sl.run_to_end = _fake_run_to_end
sl.Checkpoint.state_table = lambda self, *args, **kwargs: _pending_state
sl.m02.timers = lambda ckpt, spark=None, **options: _timers


def safe_delay(arrivals):
    return 10
''',
    "half_counted": '''
def half_counted(arrivals):
    return set(arrivals.loc[arrivals["arrival"] == "late", "id"])
''',
    "count_window": '''
class CountOrQuiet:
    pass


def count_windows(events):
    return events
''',
    "two_clocks": '''
class LateFlag:
    pass


def flag_late(events):
    return events
''',
}
