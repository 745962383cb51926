"""A Lab 02 submission that never de-duplicates and rewires the lab's own input so that it does not have to.

Its Part A answer replaces ``sl.produce`` for the rest of the kernel with one that drops every retry (a second send
of an event id) before it reaches Kafka. Its processor declares the value state ``first_sent`` and passes every
row through: on the rewired input each id arrives once, so the output is "each click once, as first sent" and the
visible output test passes. The grader's checks of Part A used to look only at the output and the state, so this
got Part A's output point (1/10, measured with ``streamlab grade``). Now every part's check first compares the
input topic with the lab's input, computed from the seeded generator: 0.
"""

ANSWERS = {
    "dedup": '''
_real_produce = sl.produce


def _first_sends_only(topic, records, **kw):   # the lab's own input, its retries dropped before Kafka sees them
    seen = set()
    kept = [r for r in records if not (r.get("event_id") in seen or seen.add(r.get("event_id")))]
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
}
