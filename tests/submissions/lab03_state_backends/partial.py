"""A Lab 03 submission with part A solved and part B half right; part C left as the stub.

Part B counts only the .delta files (forgets .changelog), so the HDFS figures are right and the
changelog ones are not: test_bytes_hdfs (2) passes, test_bytes_changelog (2) fails.
Expected: part A 3 + part B 2 = 5 of 10 points.
"""

EXPECTED_SCORE = 5

ANSWERS = {
    "changelog_settings": '''
def changelog_settings():
    return {"spark.sql.streaming.stateStore.providerClass":
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
''',
    "bytes_per_batch": '''
def bytes_per_batch(checkpoint_path):
    totals = {}
    for path in Path(checkpoint_path, "state").glob("*/*/*.delta"):
        batch = int(path.name.split(".")[0]) - 1
        totals[batch] = totals.get(batch, 0) + path.stat().st_size
    return totals
''',
}
