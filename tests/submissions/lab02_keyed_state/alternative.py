"""A correct Lab 02 written differently from the reference solution (tests/grading/test_grade_labs.py puts
each answer into the answer cell with the same grade id of the released notebook).

The pandas form of the processor API (transformWithStateInPandas: rows arrive as pandas DataFrames),
other state schemas (Part A's keeps the time its id is forgotten and counts the retries), counting with
pandas, a map state iterated instead of looked up, and Part C's deadline kept in a state of its own instead of
read with listTimers(): full marks all the same.
"""

ANSWERS = {
    "dedup": '''
import pandas as pd


class RetryFilter(StatefulProcessor):
    def init(self, handle):
        self.timers = handle
        self.first_sent = handle.getValueState("first_sent", "forget_at_ms BIGINT, sends INT")

    def handleInputRows(self, key, rows, timerValues):
        sends = pd.concat(list(rows), ignore_index=True).sort_values(["ts_ms", "offset"])
        if self.first_sent.exists():
            forget_at, count = self.first_sent.get()
            self.first_sent.update((forget_at, count + len(sends)))  # a retry is counted; its timer stays put
            return
        forget_at = int(sends["ts_ms"].iloc[0]) + RESEND_MS
        self.first_sent.update((forget_at, len(sends)))
        self.timers.registerTimer(forget_at)
        yield sends[["event_id", "user", "page", "ts"]].head(1)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        self.first_sent.clear()
        yield from ()


def deduplicate(clicks):
    schema = "event_id STRING, user STRING, page STRING, ts TIMESTAMP"
    return (clicks.groupBy(clicks["event_id"])
            .transformWithStateInPandas(RetryFilter(), schema, "Append", "EventTime"))
''',
    "pages": '''
import pandas as pd


class PageCounts(StatefulProcessor):
    def init(self, handle):
        self.page_counts = handle.getMapState("page_counts", "page STRING", "visits BIGINT")

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        totals = {page: visits for (page,), (visits,) in self.page_counts.iterator()}
        for page, n in batch["page"].value_counts().items():
            totals[page] = totals.get(page, 0) + int(n)
            self.page_counts.updateValue((page,), (totals[page],))
        clicked = sorted(set(batch["page"]))
        yield pd.DataFrame({"user": [key[0]] * len(clicked), "page": clicked,
                            "visits": [totals[p] for p in clicked]})


def count_pages(clicks):
    return clicks.groupBy("user").transformWithStateInPandas(
        PageCounts(), "user STRING, page STRING, visits LONG", "Update", "None")
''',
    "alarms": '''
import pandas as pd


class SilenceAlarm(StatefulProcessor):
    def init(self, handle):
        self.clock = handle
        self.alarmed = handle.getValueState("alarmed", "last_reading BIGINT, raised_at BIGINT")
        self.deadline = handle.getValueState("deadline", "at BIGINT")   # the timer's time, kept in state

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        if self.alarmed.exists():
            last_reading, _ = self.alarmed.get()
            self.alarmed.clear()
            yield pd.DataFrame({"sensor": [key[0]], "status": ["back"], "since_ms": [int(last_reading)],
                                "at_ms": [int(batch["ts_ms"].min())]})
        if self.deadline.exists():
            self.clock.deleteTimer(int(self.deadline.get()[0]))
        due = int(batch["ts_ms"].max()) + SILENT_MS
        self.clock.registerTimer(due)
        self.deadline.update((due,))

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        (due,) = self.deadline.get()
        self.deadline.clear()
        self.alarmed.update((int(due) - SILENT_MS, int(due)))
        yield pd.DataFrame({"sensor": [key[0]], "status": ["silent"], "since_ms": [int(due) - SILENT_MS],
                            "at_ms": [int(due)]})


def silence_alarms(readings):
    return readings.groupBy(readings["sensor"]).transformWithStateInPandas(
        statefulProcessor=SilenceAlarm(), outputStructType="sensor STRING, status STRING, since_ms BIGINT, at_ms BIGINT",
        outputMode="Append", timeMode="EventTime")
''',
}
