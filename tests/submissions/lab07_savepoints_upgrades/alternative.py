"""A correct Lab 07 written differently from the reference solution: `where`/SQL strings instead
of column expressions, `agg(count(lit(1)))` instead of `count()`, v2's processor in the pandas API
(transformWithStateInPandas), its initial state through a SQL view, the savepoint's position built by hand from
its offsets log, and the report as one SQL
query over two views; Part D's growth as the difference of the state as of two batches (no change feed), through a SQL view,
its batch from the commits table. It must get full
marks all the same.
"""

ANSWERS = {
    "upgrade": '''
def fix(topic, savepoint, name):
    # the savepoint's counts hold v0's POSTs: read everything again, on a checkpoint of its own
    fresh = sl.new_checkpoint(name)
    replay = sl.kafka_stream(topic, sl.ACCESS_LOG_SCHEMA, spark=spark, startingOffsets="earliest")
    per_path = replay.where("method <> 'POST'").groupBy(F.col("path")).agg(F.count(F.lit(1)).alias("count"))
    return per_path.selectExpr("count", "path"), fresh
''',
    "bootstrap": '''
import json

import pandas as pd


class MethodCounts(StatefulProcessor):
    def init(self, handle):
        self.requests = handle.getMapState("requests", "method STRING", "n BIGINT")

    def handleInitialState(self, key, initialState, timerValues):   # pandas: the key's initial rows, as a DataFrame
        for count in initialState["count"]:
            self.requests.updateValue((V0_METHOD,), (int(count),))

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        for method, n in batch["method"].value_counts().items():
            old = self.requests.getValue((method,)) if self.requests.containsKey((method,)) else (0,)
            self.requests.updateValue((method,), (int(old[0]) + int(n),))
        yield pd.DataFrame({"path": [key[0]], "requests": [sum(int(v[0]) for v in self.requests.values())]})


def bootstrap(savepoint, topic):
    spark.read.format("statestore").load(savepoint.path).createOrReplaceTempView("old_counts")
    initial = spark.sql("SELECT key.path AS path, value.count AS count FROM old_counts")
    offsets = savepoint.offsets()
    last = offsets[offsets["batch"] == savepoint.last_committed_batch()]
    position = {topic: {str(p): int(o) for p, o in zip(last["partition"], last["offset"])}}
    stream = sl.kafka_stream(topic, sl.ACCESS_LOG_SCHEMA, spark=spark, startingOffsets=json.dumps(position))
    return stream.groupBy("path").transformWithStateInPandas(
        statefulProcessor=MethodCounts(), outputStructType="path STRING, requests BIGINT",
        outputMode="Update", timeMode="None", initialState=initial.groupBy("path"))
''',
    "state_report": '''
def state_report(spark, checkpoint, before, after):
    for name, batch in (("state_before", before), ("state_after", after)):
        (spark.read.format("statestore").option("batchId", batch).load(checkpoint.path)
         .createOrReplaceTempView(name))
    return spark.sql("""
        SELECT a.key.path AS path,
               COALESCE(b.value.count, 0) AS before,
               a.value.count AS after,
               a.value.count - COALESCE(b.value.count, 0) AS growth
        FROM state_after a LEFT JOIN state_before b ON a.key.path = b.key.path
    """)
''',
    "live_state": '''
def batch_growth(spark, checkpoint):
    batch = int(checkpoint.commits()["batch"].max())

    def as_of(b):   # the counts as of batch b, through a SQL view (none before batch 0)
        if b < 0:
            return {}
        spark.read.format("statestore").option("batchId", b).load(checkpoint.path).createOrReplaceTempView("live_counts")
        rows = spark.sql("SELECT key.path AS path, value.count AS n FROM live_counts").toPandas()
        return dict(zip(rows["path"], rows["n"]))

    now, then = as_of(batch), as_of(batch - 1)
    return dict(batch=batch, grew={p: n - then.get(p, 0) for p, n in now.items() if n != then.get(p, 0)})
''',
}
