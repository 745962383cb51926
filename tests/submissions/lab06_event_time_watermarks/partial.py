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
def by_event_time(events):
    return events.groupBy(F.window(F.col("event_time"), "5 seconds")).agg(F.count("*").alias("count"))


def by_processing_time(events):
    return events.groupBy(F.window(F.current_timestamp(), "5 seconds")).agg(F.count("*").alias("count"))
''',
}
