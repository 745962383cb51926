"""A Lab 07 submission with Part A solved and Parts B and C left as the stub (or wrong):
Part B reads Kafka from the beginning, so v0's requests are counted twice; Part C is not done.
Part A's 3 points, and only those."""

EXPECTED_SCORE = 3

ANSWERS = {
    "upgrade": '''
def upgrade(events):
    return (events.filter(F.col("method") != "POST").groupBy("path").count()
            .withColumn("busy", F.col("count") >= 50))
''',
    "bootstrap": '''
def bootstrap(savepoint, topic):
    # wrong: reads the topic from the beginning AND starts with v0's counts
    initial = spark.read.format("statestore").load(savepoint.path).selectExpr("key.path AS path", "value.count AS count")
    return sl.kafka_stream(topic, sl.ACCESS_LOG_SCHEMA, spark=spark).groupBy("path").transformWithState(
        statefulProcessor=sl.m07.PathStats(), outputStructType=sl.m07.PATH_STATS_OUTPUT,
        outputMode="Update", timeMode="None", initialState=initial.groupBy("path"))
''',
}
