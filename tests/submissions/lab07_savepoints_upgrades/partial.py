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
class MethodCounts(StatefulProcessor):
    def init(self, handle):
        self.requests = handle.getMapState("requests", "method STRING", "requests LONG")

    def handleInitialState(self, key, initialState, timerValues):
        self.requests.updateValue((V0_METHOD,), (initialState["count"],))

    def handleInputRows(self, key, rows, timerValues):
        for row in rows:
            old = self.requests.getValue((row.method,))
            self.requests.updateValue((row.method,), ((old[0] if old else 0) + 1,))
        yield Row(path=key[0], requests=sum(v[0] for v in self.requests.values()))


def bootstrap(savepoint, topic):
    # wrong: reads the topic from the beginning AND starts with v0's counts
    initial = spark.read.format("statestore").load(savepoint.path).selectExpr("key.path AS path", "value.count AS count")
    return sl.kafka_stream(topic, sl.ACCESS_LOG_SCHEMA, spark=spark).groupBy("path").transformWithState(
        statefulProcessor=MethodCounts(), outputStructType=V2_OUTPUT,
        outputMode="Update", timeMode="None", initialState=initial.groupBy("path"))
''',
}
