"""A partly solved Lab 01: parts A and B are right, part C (run_counts) is left as handed out.

Part C's cells then fail; parts A (3 points) and B (4 points) still count.
"""

EXPECTED_SCORE = 7

ANSWERS = {
    "lag_query": '''
def lag_query(reports):
    return reports.withColumn("lag", reports["producer_offset"] - reports["consumer_offset"])
''',
    "count_requests": '''
def count_requests(requests):
    return requests.groupBy("path").count()
''',
}
