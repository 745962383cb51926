"""A Lab 02 submission that never de-duplicates and rewires the lab's own input so that it does not have to.

Its Part A answer replaces ``sl.produce`` for the rest of the kernel with one that drops every retry (a second send
of an event id) before it reaches Kafka. Its processor declares the value state ``first_sent`` and passes every
row through: on the rewired input each id arrives once, so the output is "each click once, as first sent" and the
visible output test passes. The grader's checks of Part A used to look only at the output and the state, so this
got Part A's output point (1/10, measured with ``streamlab grade``). Now every part's check first compares the
input topic with the lab's input, computed from the seeded generator: 0.

Its Part C answer rewires the readings instead, in place, after the locked cell made them: every silence but the
last is filled with a reading every 10 s, so that its processor, which never says `back` and never takes an alarm
back, passes both visible tests of Part C. The same check of the input topic gives it 0.
"""

ANSWERS = {
    "dedup": '''
_real_produce = sl.produce


def _first_sends_only(topic, records, **kw):   # the lab's own input, its retries dropped before Kafka sees them
    seen = set()
    kept = [r for r in records if "event_id" not in r or not (r["event_id"] in seen or seen.add(r["event_id"]))]
    return _real_produce(topic, kept, **kw)


sl.produce = _first_sends_only


class RetryFilter(StatefulProcessor):
    def init(self, handle):
        self.first_sent = handle.getValueState("first_sent", "x BOOLEAN")

    def handleInputRows(self, key, rows, timerValues):
        for row in rows:
            yield Row(event_id=row.event_id, user=row.user, page=row.page, ts=row.ts)


def deduplicate(clicks):
    return clicks.groupBy("event_id").transformWithState(RetryFilter(), sl.m02.CLICK_SCHEMA, "Append", "EventTime")
''',
    "alarms": '''
from datetime import datetime, timedelta

_filled, _last = [], {}
for _r in quiet_readings:                   # the lab's readings, every silence but the last filled with readings
    _t = datetime.fromisoformat(_r["ts"])
    while _r["sensor"] in _last and _t - _last[_r["sensor"]] > timedelta(seconds=10):
        _last[_r["sensor"]] += timedelta(seconds=10)
        _filled.append(dict(_r, ts=_last[_r["sensor"]].strftime("%Y-%m-%dT%H:%M:%S.000Z")))
    _filled.append(_r)
    _last[_r["sensor"]] = _t
quiet_readings[:] = sorted(_filled, key=lambda r: r["ts"])   # what the locked cells send, and test against


class SilenceAlarm(StatefulProcessor):       # never says `back`, and keeps an alarm out for good
    def init(self, handle):
        self.handle = handle
        self.alarmed = handle.getValueState("alarmed", "since_ms LONG")

    def handleInputRows(self, key, rows, timerValues):
        times = [row.ts_ms for row in rows]
        for t in list(self.handle.listTimers()):
            self.handle.deleteTimer(t)
        self.handle.registerTimer(max(times) + SILENT_MS)
        return iter([])

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        due = expiredTimerInfo.getExpiryTimeInMs()
        self.alarmed.update((due - SILENT_MS,))
        yield Row(sensor=key[0], status="silent", since_ms=due - SILENT_MS, at_ms=due)


def silence_alarms(readings):
    return readings.groupBy("sensor").transformWithState(SilenceAlarm(), ALARM_SCHEMA, "Append", "EventTime")
''',
}
