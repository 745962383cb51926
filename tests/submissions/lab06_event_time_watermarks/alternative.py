"""A correct Lab 06 written differently from the reference solution (tests/grading/test_grade_labs.py puts each
answer into the answer cell with the same grade id of the released notebook).

Other APIs: SQL expressions for the windows and aggregates, the window column made first and then
grouped on, other column orders, `collect_set` instead of `collect_list`, and the count window written
with the pandas flavour of the API (`transformWithStateInPandas`); Part D in SQL, its window column named
first and the count as `count(1)`. It must get full marks all the same.
"""

ANSWERS = {
    "tumbling_counts": '''
def tumbling_counts(events):
    on_time = events.withWatermark("event_time", "10 seconds")
    windowed = on_time.selectExpr("window(event_time, '10 seconds') AS window", "sensor", "id")
    return windowed.groupBy("window", "sensor").agg(F.expr("collect_set(id) AS ids"), F.expr("count(id) AS count"))
''',
    "sliding_max": '''
def sliding_max(events):
    every_10s = F.window(F.col("event_time"), "20 seconds", "10 seconds").alias("window")
    return (events.withWatermark("event_time", "10 seconds")
            .groupBy(every_10s, F.col("sensor"))
            .agg(F.expr("max(value)").alias("max_value"), F.expr("count(1)").alias("count")))
''',
    "count_window": '''
import pandas as pd


class CountWindow(StatefulProcessor):
    """Pandas flavour: each call gets the sensor's rows as pandas DataFrames."""

    def init(self, handle):
        self.pending = handle.getListState("pending", "id INT, value DOUBLE")

    def handleInputRows(self, key, rows, timerValues):
        arrived = pd.concat(list(rows), ignore_index=True).sort_values("offset")
        waiting = [tuple(item) for item in self.pending.get()] if self.pending.exists() else []
        complete = []
        for ident, value in zip(arrived["id"], arrived["value"]):
            waiting.append((int(ident), float(value)))
            if len(waiting) == 4:
                complete.append({"sensor": key[0], "ids": [i for i, _ in waiting],
                                 "mean_value": float(pd.Series([v for _, v in waiting]).mean())})
                waiting = []
        self.pending.clear()
        if waiting:
            self.pending.put(waiting)
        if complete:
            yield pd.DataFrame(complete, columns=["sensor", "ids", "mean_value"])

    def close(self):
        pass


def count_windows(events):
    return events.groupBy("sensor").transformWithStateInPandas(
        statefulProcessor=CountWindow(), outputStructType="sensor STRING, ids ARRAY<INT>, mean_value DOUBLE",
        outputMode="Append", timeMode="None")
''',
    "two_clocks": '''
def by_event_time(events):
    return events.selectExpr("window(event_time, '5 seconds') AS window").groupBy("window").agg(F.expr("count(1) AS count"))


def by_processing_time(events):
    now = events.withColumn("processed_at", F.expr("current_timestamp()"))
    return now.groupBy(F.window("processed_at", "5 seconds", "5 seconds").alias("window")).agg(F.count(F.lit(1)).alias("count"))
''',
}
