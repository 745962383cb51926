"""A Lab 02 submission that runs no stateful query at all and forges everything the grader could see.

Its first answer cell computes every answer in plain Python from the seeded inputs the run cells
define, then replaces ``sl.run_to_end`` with a function that writes a fake checkpoint (a metadata
file with a query id, offsets entries with Spark's header that reach the end of the input topic,
commit files) and produces the "right" output rows to the output topic with kafka-python; it also
replaces ``sl.m02.state_variable`` and ``sl.m02.timers`` with functions returning the expected state. The
visible tests pass in the notebook; the grader, reading the checkpoints' state with Spark's state
data source in its own process, must give 0 points.
"""

EXPECTED_SCORE = 0

ANSWERS = {
    "dedup": '''
import json
import os
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
from kafka import KafkaProducer


def _when(ts):
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def _expected(part):
    g = globals()
    if part == "dedup":
        first, rows = {}, []
        for i, c in enumerate(g["dup_clicks"]):
            if c["event_id"] not in first:
                first[c["event_id"]] = _when(c["ts"])
                rows.append({"batch_id": i // 20, "event_id": c["event_id"], "user": c["user"],
                             "page": c["page"], "ts": c["ts"]})
        watermark = max(_when(c["ts"]) for c in g["dup_clicks"]) - timedelta(seconds=2)
        window = timedelta(milliseconds=RESEND_MS)
        still = sorted(e for e, t in first.items() if t + window > watermark)
        state = pd.DataFrame({"event_id": still, "ts_ms": [int(first[e].timestamp() * 1000) for e in still],
                              "partition_id": 0})
        timers = pd.DataFrame({"event_id": still, "expires_at": [pd.Timestamp(first[e] + window) for e in still],
                               "partition_id": 0})
        return rows, state, timers, g["dedup_in"]
    if part == "pages":
        events, rows, seconds, last = g["page_clicks"], [], {}, {}
        for b in range(0, len(events), 20):
            grew = set()
            for c in events[b:b + 20]:
                if c["user"] in last:
                    page, since = last[c["user"]]
                    seconds[(c["user"], page)] = seconds.get((c["user"], page), 0) + int(
                        (_when(c["ts"]) - since).total_seconds())
                    grew.add((c["user"], page))
                last[c["user"]] = (c["page"], _when(c["ts"]))
            rows += [{"batch_id": b // 20, "user": u, "page": p, "seconds": seconds[(u, p)]} for u, p in sorted(grew)]
        state = {"seconds_on": pd.DataFrame([{"user": u, "page": p, "seconds": n, "partition_id": 0}
                                             for (u, p), n in seconds.items()]),
                 "last_click": pd.DataFrame([{"user": u, "page": p, "at_ms": int(t.timestamp() * 1000),
                                              "partition_id": 0} for u, (p, t) in last.items()])}
        return rows, state, None, g["pages_in"]
    readings = g["quiet_readings"]
    last, rows = {}, []
    for i, r in enumerate(readings):
        sensor, t = r["sensor"], int(_when(r["ts"]).timestamp() * 1000)
        if sensor in last and t - last[sensor] > SILENT_MS:
            rows.append({"batch_id": i // 10, "sensor": sensor, "status": "silent", "since_ms": last[sensor],
                         "at_ms": last[sensor] + SILENT_MS})
            rows.append({"batch_id": i // 10, "sensor": sensor, "status": "back", "since_ms": last[sensor], "at_ms": t})
        last[sensor] = t
    watermark = max(last.values()) - 5_000
    silent = sorted(s for s, t in last.items() if t + SILENT_MS <= watermark)
    rows += [{"batch_id": len(readings) // 10, "sensor": s, "status": "silent", "since_ms": last[s],
              "at_ms": last[s] + SILENT_MS} for s in silent]
    state = pd.DataFrame({"sensor": silent, "since_ms": [last[s] for s in silent], "partition_id": 0})
    armed = sorted(set(last) - set(silent))
    timers = pd.DataFrame({"sensor": armed, "partition_id": 0,
                           "expires_at": pd.to_datetime([last[s] + SILENT_MS for s in armed], unit="ms", utc=True)})
    return rows, state, timers, g["alarms_in"]


def _forge_checkpoint(path, topic, batches=3):
    root = Path(str(path))
    (root / "offsets").mkdir(parents=True, exist_ok=True)
    (root / "commits").mkdir(parents=True, exist_ok=True)
    (root / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}))
    ends = {str(p): o for p, o in sl.end_offsets(topic).items()}
    for b in range(batches):
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}
        (root / "offsets" / str(b)).write_text("v1\\n" + json.dumps(meta) + "\\n" + json.dumps({topic: ends}))
        (root / "commits" / str(b)).write_text("v1\\n" + json.dumps({"nextBatchWatermarkMs": 0}))


_fake_states, _fake_timers = {}, {}


def _fake_run_to_end(frame, *, output_mode="append", checkpoint=None, output_topic=None, **options):
    part = Path(str(checkpoint)).name.split("-")[1]
    rows, state, timers, topic = _expected(part)
    _forge_checkpoint(checkpoint, topic)
    _fake_states[str(checkpoint)], _fake_timers[str(checkpoint)] = state, timers
    producer = KafkaProducer(bootstrap_servers=sl.bootstrap_servers())
    for row in rows:
        producer.send(output_topic, json.dumps(row).encode())
    producer.flush()
    producer.close()
    shown = pd.DataFrame(rows)
    if "ts" in shown:  # as Spark hands timestamps to pandas: UTC, without a time zone
        shown["ts"] = pd.to_datetime(shown["ts"], utc=True).dt.tz_convert(None)
    return sl.Run(shown, None, [])


sl.run_to_end = _fake_run_to_end
sl.m02.state_variable = lambda ckpt, name, spark=None, **options: (
    _fake_states[str(ckpt)][name] if isinstance(_fake_states[str(ckpt)], dict) else _fake_states[str(ckpt)])
sl.m02.timers = lambda ckpt, spark=None, **options: _fake_timers[str(ckpt)]


class RetryFilter(StatefulProcessor):
    def init(self, handle):
        pass

    def handleInputRows(self, key, rows, timerValues):
        return iter([])


def deduplicate(clicks):
    return clicks
''',
    "pages": '''
def time_on_pages(clicks):
    return clicks
''',
    "alarms": '''
def silence_alarms(readings):
    return readings
''',
}
