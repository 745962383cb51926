"""A Lab 06 submission that runs no windowed or stateful query at all and forges what the grader could see.

Its first answer cell computes plausible answers with pandas from the lab's seeded events (dropping the
events the generator calls "late"), then replaces ``sl.run_to_end`` with a function that writes a fake
checkpoint (a metadata file with a query id, offsets entries with Spark's header that reach the end of
the input topic in batches of 25, commit files) and produces those rows to the output topic with
kafka-python, and replaces ``sl.Checkpoint.state_table`` so the pending state looks right. The visible
tests pass in the notebook; the grader, which simulates the watermark batch by batch and reads the
checkpoints' state with Spark's state data source in its own process, must give 0 points. Part D forges the
two clocks' replays the same way: event-time windows counted with pandas, processing-time windows at "now".
"""

EXPECTED_SCORE = 0

ANSWERS = {
    "tumbling_counts": '''
import json
import uuid
from pathlib import Path

import pandas as pd
from kafka import KafkaProducer

_table = sl.m06.events_table(EVENTS, batch_size=BATCH)
_kept = _table[_table["arrival"] != "late"]


def _iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _windows(size, slide, with_ids):
    rows = []
    for sensor, group in _kept.groupby("sensor"):
        first = group["event_time"].min().floor(f"{slide}s") - pd.Timedelta(seconds=size - slide)
        start = first
        while start <= group["event_time"].max():
            inside = group[(group["event_time"] >= start) & (group["event_time"] < start + pd.Timedelta(seconds=size))]
            if len(inside):
                row = {"batch_id": 1, "sensor": sensor,
                       "window": {"start": _iso(start), "end": _iso(start + pd.Timedelta(seconds=size))},
                       "count": len(inside)}
                if with_ids:
                    row["ids"] = [int(i) for i in inside["id"]]
                else:
                    row["max_value"] = float(inside["value"].max())
                rows.append(row)
            start += pd.Timedelta(seconds=slide)
    return rows


def _count_windows():
    rows, pending = [], {}
    for event in EVENTS:
        window = pending.setdefault(event["sensor"], [])
        window.append(event)
        if len(window) == 4:
            rows.append({"batch_id": 2, "sensor": event["sensor"], "ids": [e["id"] for e in window],
                         "mean_value": sum(e["value"] for e in window) / 4})
            pending[event["sensor"]] = []
    state = pd.DataFrame([{"sensor": s, "id": e["id"], "value": e["value"], "partition_id": 0}
                          for s, w in pending.items() for e in w])
    return rows, state


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


_count_rows, _pending_state = _count_windows()
_FAKES = {"lab06-tumbling": _windows(10, 10, True), "lab06-sliding": _windows(20, 10, False),
          "lab06-count": _count_rows}


def _fake_run_to_end(frame, *, output_mode="append", checkpoint=None, output_topic=None, **options):
    name = Path(str(checkpoint)).name.rsplit("-", 1)[0]
    rows = _FAKES[name]
    _forge_checkpoint(checkpoint)
    producer = KafkaProducer(bootstrap_servers=sl.bootstrap_servers())
    for row in rows:
        producer.send(output_topic, json.dumps(row).encode())
    producer.flush()
    producer.close()
    latest = max(pd.to_datetime([e["event_time"] for e in EVENTS], utc=True))
    progress = [{"batchId": b, "numInputRows": BATCH, "stateOperators": [{"numRowsDroppedByWatermark": 1}],
                 "eventTime": {"watermark": _iso(latest - pd.Timedelta(seconds=10)), "max": _iso(latest)}}
                for b in range(6)]
    frame_rows = pd.DataFrame(rows)
    if "window" in frame_rows:
        frame_rows["window"] = [{"start": pd.Timestamp(w["start"]), "end": pd.Timestamp(w["end"])}
                                for w in frame_rows["window"]]
    return sl.Run(frame_rows, progress[-1], progress, "fake")


sl.run_to_end = _fake_run_to_end
sl.Checkpoint.state_table = lambda self, *args, **kwargs: _pending_state


def tumbling_counts(events):
    return events
''',
    "sliding_max": '''
def sliding_max(events):
    return events
''',
    "count_window": '''
class CountWindow:
    pass


def count_windows(events):
    return events
''',
    "two_clocks": '''
def _clock_rows(starts):
    counts = pd.Series(starts).value_counts()
    return [{"batch_id": 1, "window": {"start": _iso(s), "end": _iso(s + pd.Timedelta(seconds=5))}, "count": int(n)}
            for s, n in counts.items()]


_event_starts = pd.to_datetime([e["event_time"] for e in EVENTS], utc=True).floor("5s")
for _replay in (1, 2):
    _FAKES[f"lab06-event-{_replay}"] = _clock_rows(_event_starts)
    _FAKES[f"lab06-processing-{_replay}"] = _clock_rows([pd.Timestamp.now(tz="UTC").floor("5s")
                                                         + pd.Timedelta(seconds=5 * _replay)] * len(EVENTS))


def by_event_time(events):
    return events


def by_processing_time(events):
    return events
''',
}
