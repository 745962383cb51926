"""Lab 06 with Parts A (4 points) and D (3 points) solved and Parts B and C left as the student stubs."""

EXPECTED_SCORE = 7

ANSWERS = {
    "safe_delay": '''
def safe_delay(arrivals):
    ends = arrivals["event_time"].dt.floor("10s") + pd.Timedelta(seconds=10)
    seen = arrivals.groupby("batch")["event_time"].max().cummax()
    for delay in range(0, 3600):
        watermark = {0: pd.Timestamp(0, tz="UTC")}
        for batch in range(1, int(arrivals["batch"].max()) + 1):
            watermark[batch] = max(watermark[batch - 1], seen[batch - 1] - pd.Timedelta(seconds=delay))
        cutoff = arrivals["batch"].map(lambda b: watermark[max(b - 1, 0)])
        if not (ends <= cutoff).any():
            return delay
''',
    "two_clocks": '''
class LateFlag(StatefulProcessor):
    def init(self, handle):
        self.max_seen = handle.getValueState("max_seen", "ms LONG")

    def handleInputRows(self, key, rows, timerValues):
        latest = self.max_seen.get()[0] if self.max_seen.exists() else None
        for row in sorted(rows, key=lambda r: r.offset):
            behind = 0 if latest is None or row.event_ms >= latest else (latest - row.event_ms) // 1000
            yield Row(id=row.id, behind_s=behind, late=behind > LATE_S)
            latest = row.event_ms if latest is None else max(latest, row.event_ms)
        self.max_seen.update((latest,))


def flag_late(events):
    return events.withColumn("k", F.lit(1)).groupBy("k").transformWithState(
        LateFlag(), "id INT, behind_s INT, late BOOLEAN", "Append", "None")
''',
}
