"""A correct Lab 01 written differently from the reference solution (tests/grading/test_grade_labs.py puts
each answer into the answer cell with the same grade id of the released notebook).

Other APIs (selectExpr, agg(sum(1)), processAllAvailable), other column order, other names,
another count column name: it must get full marks all the same.
"""

ANSWERS = {
    "lag_query": '''
def lag_query(reports):
    # lag first, then the report's fields in another order
    return reports.selectExpr("producer_offset - consumer_offset AS lag",
                              "consumer_offset", "producer_offset", "partition", "consumer", "ts")
''',
    "count_requests": '''
def count_requests(requests):
    hits = F.sum(F.lit(1)).alias("requests_so_far")
    return requests.groupBy(F.col("path")).agg(hits).select("requests_so_far", "path")
''',
    "run_counts": '''
def run_counts(topic, checkpoint):
    batches = sl.BatchCollector()
    per_path = count_requests(sl.kafka_stream(topic, sl.ACCESS_LOG_SCHEMA))
    running = (per_path.writeStream
               .foreachBatch(batches)
               .option("checkpointLocation", checkpoint)
               .outputMode("update")
               .start())
    try:
        running.processAllAvailable()
    finally:
        running.stop()
    return batches.frame()
''',
}
