"""A Lab 06 submission whose Part C never closes a window as quiet when its sensor's next reading comes first, and
that rewires the lab's own micro-batches so that it does not have to.

Its Part C answer replaces ``sl.m06.batched_stream`` for the rest of the kernel with one that reads the whole topic
in ONE micro-batch, whatever batch size the locked cell asks for. Its processor only closes windows by count and
when their timer fires (no check against the watermark in ``handleInputRows``, as a first try would be). With one
batch of data the watermark is still 0 while the readings are processed; every pending window's timer then fires in
the batch without data that follows, so nothing ever needs that check: the output and the state are exactly what
the grader expects *from the batches the checkpoint committed*, and the visible tests pass. The grader's checks first
compare the batches the checkpoint committed with the lab's cut (25 records per micro-batch): 0.
"""

EXPECTED_SCORE = 0

ANSWERS = {
    "count_window": '''
_real_batched_stream = sl.m06.batched_stream


def _one_batch(topic, *args, batch_size=20, **kwargs):   # the locked cell's batch size, ignored
    return _real_batched_stream(topic, *args, batch_size=1_000_000, **kwargs)


sl.m06.batched_stream = _one_batch


class CountOrQuiet(StatefulProcessor):
    def init(self, handle):
        self.handle = handle
        self.pending = handle.getListState("pending", "id INT, value DOUBLE, event_ms LONG")

    def handleInputRows(self, key, rows, timerValues):
        window = [tuple(r) for r in self.pending.get()]
        for row in sorted(rows, key=lambda r: r.offset):
            window.append((row.id, row.value, row.event_ms))
            if len(window) == WINDOW_SIZE:
                yield Row(sensor=key[0], ids=[w[0] for w in window],
                          mean_value=sum(w[1] for w in window) / WINDOW_SIZE, closed_by="count")
                window = []
        for timer in list(self.handle.listTimers()):
            self.handle.deleteTimer(timer)
        self.pending.clear()
        if window:
            self.pending.put(window)
            self.handle.registerTimer(max(w[2] for w in window) + QUIET_MS)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        window = [tuple(r) for r in self.pending.get()]
        self.pending.clear()
        if window:
            yield Row(sensor=key[0], ids=[w[0] for w in window],
                      mean_value=sum(w[1] for w in window) / len(window), closed_by="quiet")


def count_windows(events):
    return (events.withWatermark("event_time", "5 seconds").groupBy("sensor")
            .transformWithState(CountOrQuiet(), "sensor STRING, ids ARRAY<INT>, mean_value DOUBLE, closed_by STRING",
                                "Append", "EventTime"))
''',
}
