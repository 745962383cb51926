"""Lab 06 with Parts A (4 points) and D (3 points) solved and Parts B and C left as the student stubs."""

EXPECTED_SCORE = 7

ANSWERS = {
    "tumbling_counts": '''
def tumbling_counts(events):
    return (events.withWatermark("event_time", "10 seconds")
            .groupBy("sensor", F.window("event_time", "10 seconds"))
            .agg(F.count("*").alias("count"), F.collect_list("id").alias("ids")))
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
