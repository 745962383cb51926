"""A correct Lab 01 written differently from the reference solution (tests/grading/test_grade_labs.py puts
each answer into the answer cell with the same grade id of the released notebook).

Other APIs (selectExpr with a SQL CASE, a list for the set, collect_set instead of dropDuplicates, a stream's
distinct() for Part C), other column order, another count column name: it must get full marks all the same.
"""

ANSWERS = {
    "lag_alerts": '''
def lag_alerts(reports):
    # lag and alert first, then the report's fields in another order
    return reports.selectExpr(
        "producer_offset - consumer_offset AS lag",
        "CASE WHEN consumer_offset > producer_offset THEN 'bad report' "
        "WHEN producer_offset - consumer_offset >= 25 THEN 'behind' ELSE 'ok' END AS alert",
        "consumer_offset", "producer_offset", "partition", "consumer", "ts")


def alerts_needing_state():
    return ["first report", "max lag", "stuck"]
''',
    "distinct_methods": '''
def distinct_methods(requests):
    seen = F.collect_set("method")
    return requests.groupBy(F.col("path")).agg(F.size(seen).alias("methods_so_far")).select("methods_so_far", "path")
''',
    "new_paths": '''
def new_paths(requests):
    # the distinct paths, as a stream: Spark keeps the paths it has output in state, so each comes out once
    return requests.select("path").distinct()
''',
}
