"""Seeded, deterministic event generators for the course's examples.

Every generator takes a ``seed``: the same seed gives the same events, in the same order, on
every machine. Timestamps start at ``START`` (UTC) so results do not depend on when you run.
Each generator has a matching ``*_SCHEMA`` (a Spark DDL string) for ``from_json``.
"""
from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

START = datetime(2026, 1, 1, 9, 0, 0, tzinfo=UTC)

ACCESS_LOG_SCHEMA = "method STRING, path STRING, ts TIMESTAMP"
OFFSET_REPORT_SCHEMA = "consumer STRING, partition INT, producer_offset BIGINT, consumer_offset BIGINT, ts TIMESTAMP"
TIMED_EVENT_SCHEMA = "id INT, sensor STRING, value DOUBLE, event_time TIMESTAMP, arrival STRING"

API_ENDPOINTS = [("GET", "/api/a"), ("POST", "/api/b"), ("GET", "/api/c"), ("PUT", "/api/a"), ("GET", "/api/b")]


def iso_time(moment: datetime) -> str:
    """``2026-01-01T09:00:00.000Z``: how the course's events write a time."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def article_requests() -> list[dict]:
    """The source article's example: GET /api/a, POST /api/b, GET /api/a (counts 1, 1, 2)."""
    steps = [("GET", "/api/a"), ("POST", "/api/b"), ("GET", "/api/a")]
    return [{"method": m, "path": p, "ts": iso_time(START + timedelta(seconds=i))} for i, (m, p) in enumerate(steps)]


def access_log(n: int = 100, *, seed: int = 42, endpoints=API_ENDPOINTS) -> list[dict]:
    """``n`` web-server requests: {"method", "path", "ts"}, a few endpoints much busier than others."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(endpoints))]
    moment = START
    events = []
    for _ in range(n):
        method, path = rng.choices(endpoints, weights=weights)[0]
        moment += timedelta(milliseconds=rng.randint(50, 1500))
        events.append({"method": method, "path": path, "ts": iso_time(moment)})
    return events


def article_offset_reports() -> list[dict]:
    """The source article's consumer-lag example: producer 15 vs consumer 10, 7, 12 (lag 5, 8, 3)."""
    return [{"consumer": "c1", "partition": 0, "producer_offset": 15, "consumer_offset": c,
             "ts": iso_time(START + timedelta(seconds=i))} for i, c in enumerate([10, 7, 12])]


def offset_reports(n: int = 30, *, seed: int = 42, consumers=("c1", "c2"), partitions: int = 2) -> list[dict]:
    """``n`` reports of producer and consumer offsets per (consumer, partition); lag = difference."""
    rng = random.Random(seed)
    produced = {p: 0 for p in range(partitions)}
    consumed = {(c, p): 0 for c in consumers for p in range(partitions)}
    moment = START
    reports = []
    for _ in range(n):
        consumer, partition = rng.choice(consumers), rng.randrange(partitions)
        produced[partition] += rng.randint(0, 20)
        consumed[(consumer, partition)] = rng.randint(consumed[(consumer, partition)], produced[partition])
        moment += timedelta(seconds=1)
        reports.append({"consumer": consumer, "partition": partition, "producer_offset": produced[partition],
                        "consumer_offset": consumed[(consumer, partition)], "ts": iso_time(moment)})
    return reports


def timed_events(n: int = 200, *, seed: int = 42, sensors=("s1", "s2", "s3"), every_s: float = 1.0,
                 out_of_order: float = 0.2, late: float = 0.05, max_delay_s: float = 5.0,
                 late_by_s: float = 120.0) -> list[dict]:
    """Sensor readings in *arrival* order, with a controlled share of disorder.

    Event i happens at ``START + i * every_s``. A share ``out_of_order`` of events arrives up to
    ``max_delay_s`` late (overtaken by later events, but inside a watermark of that size); a share
    ``late`` arrives ``late_by_s`` behind (far behind any reasonable watermark). ``arrival`` says
    which kind each event is: "on_time", "out_of_order" or "late", so results can be checked.
    """
    if out_of_order + late > 1:
        raise ValueError("out_of_order + late must be at most 1")
    rng = random.Random(seed)
    events = []
    for i in range(n):
        event_time = START + timedelta(seconds=i * every_s)
        draw = rng.random()
        if draw < late:
            kind, delay = "late", late_by_s
        elif draw < late + out_of_order:
            kind, delay = "out_of_order", rng.uniform(every_s, max_delay_s)
        else:
            kind, delay = "on_time", 0.0
        events.append({"id": i, "sensor": rng.choice(sensors), "value": round(rng.gauss(20, 5), 2),
                       "event_time": iso_time(event_time), "arrival": kind,
                       "_arrives_at": event_time + timedelta(seconds=delay)})
    events.sort(key=lambda e: (e["_arrives_at"], e["id"]))
    for event in events:
        del event["_arrives_at"]
    return events
