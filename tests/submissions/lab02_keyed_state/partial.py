"""Lab 02 partly solved: part A right, part B wrong in a way that shows only from the second batch on, part C
with a handler that returns nothing (a catalogued mistake: its feedback shows the course's paragraph first).

Part B writes each user's latest click to its value state but never reads it back: the time from a user's last click
of one batch to their first of the next is lost. Right after the first batch, wrong from the next. Missing ids keep
the released stub (raise NotImplementedError()). Part C's `handleExpiredTimer` updates the state and returns
nothing: Spark fails the query when the first timer fires ("'NoneType' object is not iterable", 80 lines into
Spark's error), so part C's run cell fails and its tests score nothing. The feedback page shows Part B's
state beside the reference's and the batch where it diverged (DIVERGES_AT), and part C's error with the learner's
paragraph first (MISTAKE).
"""

EXPECTED_SCORE = 3
DIVERGES_AT = {"Part B, seconds_on": 1}  # batch 1 is the first with a user who clicked in batch 0
MISTAKE = "expired_timer_returned_none"   # streamlab.lessons.mistakes: what part C's error is explained as

ANSWERS = {
    "dedup": '''
class RetryFilter(StatefulProcessor):
    def init(self, handle):
        self.handle = handle
        self.first_sent = handle.getValueState("first_sent", "at_ms LONG")

    def handleInputRows(self, key, rows, timerValues):
        if not self.first_sent.exists():
            row = sorted(rows, key=lambda r: r.ts)[0]
            self.first_sent.update((row.ts_ms,))
            self.handle.registerTimer(row.ts_ms + RESEND_MS)
            yield Row(event_id=row.event_id, user=row.user, page=row.page, ts=row.ts)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        self.first_sent.clear()
        return iter([])


def deduplicate(clicks):
    return clicks.groupBy("event_id").transformWithState(RetryFilter(), sl.m02.CLICK_SCHEMA, "Append", "EventTime")
''',
    "pages": '''
class TimeOnPage(StatefulProcessor):
    def init(self, handle):
        self.last_click = handle.getValueState("last_click", "page STRING, at_ms LONG")
        self.seconds_on = handle.getMapState("seconds_on", "page STRING", "seconds LONG")

    def handleInputRows(self, key, rows, timerValues):
        grew, last = set(), None  # wrong: the click before this batch is forgotten (the state is written, never read)
        for row in sorted(rows, key=lambda r: r.ts):
            at_ms = int(row.ts.timestamp() * 1000)
            if last is not None:
                before = self.seconds_on.getValue((last[0],))
                self.seconds_on.updateValue((last[0],), ((before[0] if before else 0) + (at_ms - last[1]) // 1000,))
                grew.add(last[0])
            last = (row.page, at_ms)
            self.last_click.update(last)
        for page in sorted(grew):
            yield Row(user=key[0], page=page, seconds=self.seconds_on.getValue((page,))[0])


def time_on_pages(clicks):
    return clicks.groupBy("user").transformWithState(
        TimeOnPage(), "user STRING, page STRING, seconds LONG", "Update", "None")
''',
    "alarms": '''
class SilenceAlarm(StatefulProcessor):
    def init(self, handle):
        self.handle = handle
        self.alarmed = handle.getValueState("alarmed", "since_ms LONG")

    def handleInputRows(self, key, rows, timerValues):
        times = [row.ts_ms for row in rows]
        if self.alarmed.exists():
            (since_ms,) = self.alarmed.get()
            self.alarmed.clear()
            yield Row(sensor=key[0], status="back", since_ms=since_ms, at_ms=min(times))
        for deadline in list(self.handle.listTimers()):
            self.handle.deleteTimer(deadline)
        self.handle.registerTimer(max(times) + SILENT_MS)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        deadline = expiredTimerInfo.getExpiryTimeInMs()
        self.alarmed.update((deadline - SILENT_MS,))  # wrong: the `silent` message is never output, nor an iterator


def silence_alarms(readings):
    return readings.groupBy("sensor").transformWithState(
        statefulProcessor=SilenceAlarm(), outputStructType=ALARM_SCHEMA, outputMode="Append", timeMode="EventTime")
''',
}
