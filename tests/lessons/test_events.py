"""streamlab.lessons.events: the seeded generators the lessons and labs produce to Kafka."""
from __future__ import annotations

from collections import Counter

import pytest

import streamlab as sl


def test_generators_are_deterministic():
    assert sl.access_log(50, seed=3) == sl.access_log(50, seed=3)
    assert sl.access_log(50, seed=3) != sl.access_log(50, seed=4)
    assert sl.timed_events(100, seed=1) == sl.timed_events(100, seed=1)
    assert sl.offset_reports(20, seed=2) == sl.offset_reports(20, seed=2)


def test_article_examples():
    assert [(r["method"], r["path"]) for r in sl.article_requests()] == [
        ("GET", "/api/a"), ("POST", "/api/b"), ("GET", "/api/a")]
    lags = [r["producer_offset"] - r["consumer_offset"] for r in sl.article_offset_reports()]
    assert lags == [5, 8, 3]


def test_offset_reports_never_have_negative_lag():
    assert all(r["producer_offset"] >= r["consumer_offset"] >= 0 for r in sl.offset_reports(500, seed=9))


def test_timed_events_have_the_requested_disorder():
    events = sl.timed_events(2000, seed=5, out_of_order=0.2, late=0.05, max_delay_s=5, late_by_s=120)
    kinds = Counter(e["arrival"] for e in events)
    assert abs(kinds["late"] / 2000 - 0.05) < 0.02 and abs(kinds["out_of_order"] / 2000 - 0.2) < 0.03
    # On-time events arrive in event-time order; a late event arrives after much newer ones.
    on_time = [e["event_time"] for e in events if e["arrival"] == "on_time"]
    assert on_time == sorted(on_time)
    position = {e["id"]: i for i, e in enumerate(events)}
    late = next(e for e in events if e["arrival"] == "late")
    newer_seen_before = [e for e in events[: position[late["id"]]] if e["id"] > late["id"] + 100]
    assert newer_seen_before, "a late event must arrive after events far newer than itself"
    with pytest.raises(ValueError):
        sl.timed_events(10, out_of_order=0.8, late=0.5)
