"""A correct Lab 06 written differently from the reference solution (tests/grading/test_grade_labs.py puts each
answer into the answer cell with the same grade id of the released notebook).

Part A finds the tightest watermark delay directly from each reading's margin (instead of trying delays one by
one); Part B walks the batches as the query does (instead of a table of cut-offs). Other APIs: SQL expressions for the windows and aggregates, the window column made first and then
grouped on, other column orders, `collect_set` instead of `collect_list`; Parts C and D written with the
pandas flavour of the API (`transformWithStateInPandas`): Part C keeps its timer's time in a value state of its
own next to `pending`, Part D computes a shifted running maximum with pandas over a key of another type. It must
get full marks all the same.
"""

ANSWERS = {
    "safe_delay": '''
import math


def safe_delay(arrivals):
    # The tightest delay directly: a reading of batch k (k >= 2) is dropped when its window ended by the watermark
    # of batch k - 1, which is made from the latest event time of batches <= k - 2, less the delay.
    seen = arrivals.groupby("batch")["event_time"].max().cummax()
    need = 0
    for batch, event_time in zip(arrivals["batch"], arrivals["event_time"]):
        if batch < 2:
            continue
        end = event_time.floor("10s") + pd.Timedelta(seconds=10)
        gap = (seen[batch - 2] - end).total_seconds()
        if gap >= 0:
            need = max(need, math.floor(gap) + 1)
    return need
''',
    "half_counted": '''
def half_counted(arrivals):
    # Batch by batch, as the query runs: the watermark each batch uses, and each reading's two windows judged
    # against the watermark of the batch before.
    kept = {}
    watermark, before, latest = pd.Timestamp(0, tz="UTC"), pd.Timestamp(0, tz="UTC"), None
    for batch, rows in arrivals.sort_values("arrival_position").groupby("batch", sort=True):
        for reading_id, t in zip(rows["id"], rows["event_time"]):
            ends = [t.floor("10s") + pd.Timedelta(seconds=s) for s in (10, 20)]
            kept[int(reading_id)] = sum(end > before for end in ends)
        before = watermark
        latest = rows["event_time"].max() if latest is None else max(latest, rows["event_time"].max())
        watermark = max(watermark, latest - pd.Timedelta(seconds=10))
    return {i for i, n in kept.items() if n == 1}
''',
    "count_window": '''
import pandas as pd


class CountOrQuiet(StatefulProcessor):
    """Pandas flavour: rows arrive as DataFrames; the timer's time is kept in a value state `quiet_at` next to the
    window instead of being read back with listTimers(), and moved only when it changes."""

    def init(self, handle):
        self.handle = handle
        self.pending = handle.getListState("pending", "id INT, value DOUBLE, event_ms LONG")
        self.quiet_at = handle.getValueState("quiet_at", "ms LONG")

    @staticmethod
    def _window(sensor, held, why):
        return {"sensor": sensor, "ids": [int(i) for i, _, _ in held],
                "mean_value": float(pd.Series([v for _, v, _ in held]).mean()), "closed_by": why}

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True).sort_values("offset")
        held = [(int(i), float(v), int(m)) for i, v, m in self.pending.get()]
        before = self.quiet_at.get()[0] if self.quiet_at.exists() else None
        due, closed = before, []
        for ident, value, ms in zip(batch["id"], batch["value"], batch["event_ms"]):
            if due is not None and due <= timerValues.getCurrentWatermarkInMs():
                closed.append(self._window(key[0], held, "quiet"))
                held = []
            held.append((int(ident), float(value), int(ms)))
            if len(held) == WINDOW_SIZE:
                closed.append(self._window(key[0], held, "count"))
                held = []
            due = max(m for _, _, m in held) + QUIET_MS if held else None
        if before is not None and before != due:
            self.handle.deleteTimer(before)
        self.pending.clear()
        if held:
            self.pending.put(held)
            self.quiet_at.update((due,))
            if due != before:
                self.handle.registerTimer(due)
        else:
            self.quiet_at.clear()
        if closed:
            yield pd.DataFrame(closed, columns=["sensor", "ids", "mean_value", "closed_by"])

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        held = [tuple(item) for item in self.pending.get()]
        self.pending.clear()
        self.quiet_at.clear()
        if held:
            yield pd.DataFrame([self._window(key[0], held, "quiet")])


def count_windows(events):
    on_time = events.withWatermark("event_time", "5 seconds")
    return on_time.groupBy(on_time["sensor"]).transformWithStateInPandas(
        statefulProcessor=CountOrQuiet(),
        outputStructType="sensor STRING, ids ARRAY<INT>, mean_value DOUBLE, closed_by STRING",
        outputMode="Append", timeMode="EventTime")
''',
    "two_clocks": '''
import pandas as pd


class LateFlag(StatefulProcessor):
    """Pandas flavour: the latest event time before each row with a shifted running maximum."""

    def init(self, handle):
        self.max_seen = handle.getValueState("max_seen", "latest BIGINT")

    def handleInputRows(self, key, rows, timerValues):
        frame = pd.concat(list(rows), ignore_index=True).sort_values("offset")
        before = frame["event_ms"].cummax().shift(1)
        if self.max_seen.exists():
            stored = self.max_seen.get()[0]
            before = before.fillna(stored).clip(lower=stored)
        behind = ((before - frame["event_ms"]).clip(lower=0).fillna(0) // 1000).astype("int32")
        newest = int(frame["event_ms"].max()) if before.isna().all() else int(max(before.max(), frame["event_ms"].max()))
        self.max_seen.update((newest,))
        yield pd.DataFrame({"id": frame["id"].astype("int32"), "behind_s": behind, "late": behind > LATE_S})


def flag_late(events):
    return (events.select(F.lit(0).alias("one"), "id", "offset", "event_ms").groupBy("one")
            .transformWithStateInPandas(LateFlag(), "id INT, behind_s INT, late BOOLEAN", "Append", "None"))
''',
}
