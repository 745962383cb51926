"""A correct Lab 07 written differently from the reference solution: `where`/SQL strings instead
of column expressions, `agg(count(lit(1)))` instead of `count()`, the initial state through a SQL
view, the savepoint's position built by hand from its offsets log, and the report as one SQL
query over two views; the live state read through a SQL view, its batch from the commits table. It must get full
marks all the same.
"""

ANSWERS = {
    "upgrade": '''
def upgrade(events):
    per_path = events.where("method <> 'POST'").groupBy(F.col("path")).agg(F.count(F.lit(1)).alias("count"))
    return per_path.selectExpr("count >= 50 AS busy", "count", "path")
''',
    "bootstrap": '''
import json

def bootstrap(savepoint, topic):
    spark.read.format("statestore").load(savepoint.path).createOrReplaceTempView("old_counts")
    initial = spark.sql("SELECT key.path AS path, value.count AS count FROM old_counts")
    offsets = savepoint.offsets()
    last = offsets[offsets["batch"] == savepoint.last_committed_batch()]
    position = {topic: {str(p): int(o) for p, o in zip(last["partition"], last["offset"])}}
    stream = sl.kafka_stream(topic, sl.ACCESS_LOG_SCHEMA, spark=spark, startingOffsets=json.dumps(position))
    return stream.groupBy("path").transformWithState(
        statefulProcessor=sl.m07.PathStats(), outputStructType=sl.m07.PATH_STATS_OUTPUT,
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
def live_state(spark, checkpoint):
    committed = checkpoint.commits()["batch"]
    batch = int(committed.max())
    (spark.read.format("statestore").option("batchId", batch).load(checkpoint.path)
     .createOrReplaceTempView("live_counts"))
    rows = spark.sql("SELECT key.path AS path, value.count AS n FROM live_counts").toPandas()
    return dict(batch=batch, counts=dict(zip(rows["path"], rows["n"].astype(int))))
''',
}
