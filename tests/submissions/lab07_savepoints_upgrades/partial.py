"""A Lab 07 submission with Part C solved and Parts A and B wrong:
Part A upgrades the way lesson 07 does, on a copy of the savepoint with the filter added, so the POSTs v0 counted
stay in its counts (the feedback shows its state differ from the first batch on, v0's batch 0 that came with the
copy); Part B reads Kafka from the beginning, so v0's requests are counted twice; Part D is not done.
Part C's 3 points, and only those."""

EXPECTED_SCORE = 3
DIVERGES_AT = {"Part A, v1's count per path": 0}

ANSWERS = {
    "upgrade": '''
def fix(topic, savepoint, name):
    return events.filter(F.col("method") != "POST").groupBy("path").count(), sl.m07.take_savepoint(savepoint, name)
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

ANSWERS["state_report"] = '''
def state_report(spark, checkpoint, before, after):
    def as_of(batch):
        return spark.read.format("statestore").option("batchId", batch).load(checkpoint.path)

    old = as_of(before).selectExpr("key.path AS path", "value.count AS before")
    new = as_of(after).selectExpr("key.path AS path", "value.count AS after")
    return new.join(old, "path", "left_outer").selectExpr("path", "coalesce(before, 0) AS before", "after",
                                                        "after - coalesce(before, 0) AS growth")
'''
