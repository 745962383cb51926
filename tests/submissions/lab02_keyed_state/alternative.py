"""A correct Lab 02 written differently from the reference solution (tests/grading/test_grade_labs.py puts
each answer into the answer cell with the same grade id of the released notebook).

The pandas form of the processor API (transformWithStateInPandas: rows arrive as pandas DataFrames),
other state schemas (Part A's keeps the time its id is forgotten and counts the retries; Part B's last click is
epoch seconds in a DOUBLE, before the page), intervals summed with pandas, and Part C's deadline kept in a state of
its own instead of read with listTimers(): full marks all the same.
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


class TimeOnPage(StatefulProcessor):
    def init(self, handle):
        self.last_click = handle.getValueState("last_click", "at_s DOUBLE, page STRING")  # epoch seconds, then page
        self.seconds_on = handle.getMapState("seconds_on", "page STRING", "seconds BIGINT")

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True).sort_values("ts")
        seconds = pd.to_datetime(batch["ts"]).astype("int64") / 1e9
        held = self.last_click.get()
        steps = ([tuple(held)] if held else []) + list(zip(seconds, batch["page"]))
        added = {}
        for (since, page), (until, _) in zip(steps, steps[1:]):
            added[page] = added.get(page, 0) + round(until - since)
        for page, more in added.items():
            old = self.seconds_on.getValue((page,))
            self.seconds_on.updateValue((page,), (int((old[0] if old else 0) + more),))
        self.last_click.update((float(steps[-1][0]), steps[-1][1]))
        grew = sorted(added)
        if grew:  # a user's first click adds no time: no rows, no frame
            yield pd.DataFrame({"user": [key[0]] * len(grew), "page": grew,
                                "seconds": [self.seconds_on.getValue((p,))[0] for p in grew]})


def time_on_pages(clicks):
    return clicks.groupBy("user").transformWithStateInPandas(
        TimeOnPage(), "user STRING, page STRING, seconds LONG", "Update", "None")
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
