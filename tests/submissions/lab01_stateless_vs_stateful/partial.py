"""A partly solved Lab 01: parts A and B are right, part C (new_paths) is left as handed out.

Part C's cells then fail; parts A (3 points) and B (4 points) still count.
"""

EXPECTED_SCORE = 7

ANSWERS = {
    "lag_alerts": '''
def lag_alerts(reports):
    lag = reports["producer_offset"] - reports["consumer_offset"]
    alert = F.when(lag >= 25, "behind").when(lag < 0, "bad report").otherwise("ok")
    return reports.withColumn("lag", lag).withColumn("alert", alert)


def alerts_needing_state():
    return {"stuck", "max lag", "first report"}
''',
    "distinct_methods": '''
def distinct_methods(requests):
    return requests.groupBy("path").agg(F.approx_count_distinct("method").alias("methods"))
''',
}
