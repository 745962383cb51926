"""What a running application's Spark UI knows and a query's progress does not: which executor ran
which task. Read from the UI's REST API (``/api/v1``, on while ``spark.ui.enabled`` is true), as the
cluster lessons do to show a query's state partitions spread over the executors."""
from __future__ import annotations

import json
import re
import urllib.request

REST_TIMEOUT_S = 60  # an application's REST API answers slowly on a busy machine


def get_json(url: str, timeout: float = 5):
    """The JSON a Spark web UI (the master's or an application's) serves at url."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read().decode())


def state_partition_executors(spark, query_id: str):
    """Which executor ran each state partition of a query, batch by batch (pandas: batch, stage,
    partition, executor, host), read from the application's REST API (``spark.ui.enabled``): the
    tasks of the query's stages that read a shuffle, which is where its stateful operator runs."""
    import pandas as pd

    sc = spark.sparkContext
    if not sc.uiWebUrl:
        raise RuntimeError("the Spark UI is off (spark.ui.enabled=false): it is where task placement is read")
    base = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    rows = []
    for job in get_json(f"{base}/jobs?status=succeeded", timeout=REST_TIMEOUT_S):
        batch = re.search(rf"id = {re.escape(str(query_id))}\s.*?batch = (\d+)", job.get("description") or "", re.S)
        for stage_id in job["stageIds"] if batch else []:
            for attempt in get_json(f"{base}/stages/{stage_id}", timeout=REST_TIMEOUT_S):
                if attempt["status"] != "COMPLETE" or not attempt.get("shuffleReadBytes"):
                    continue
                tasks = f"{base}/stages/{stage_id}/{attempt['attemptId']}/taskList?length=10000"
                for task in get_json(tasks, timeout=REST_TIMEOUT_S):
                    if task["status"] == "SUCCESS":
                        rows.append((int(batch.group(1)), stage_id, task.get("partitionId", task["index"]),
                                     task["executorId"], task["host"]))
    columns = ["batch", "stage", "partition", "executor", "host"]
    return pd.DataFrame(sorted(set(rows)), columns=columns)
