"""Lab 06 with Part A solved (4 points) and Parts B and C left as the student stubs."""

EXPECTED_SCORE = 4

ANSWERS = {
    "tumbling_counts": '''
def tumbling_counts(events):
    return (events.withWatermark("event_time", "10 seconds")
            .groupBy("sensor", F.window("event_time", "10 seconds"))
            .agg(F.count("*").alias("count"), F.collect_list("id").alias("ids")))
''',
}
