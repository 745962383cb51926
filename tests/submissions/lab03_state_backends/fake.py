"""A Lab 03 submission that solves nothing and fakes every result instead.

Its first answer cell, run before any test cell in the same namespace:
* shadows `sorted`, `set`, `dict`, `isinstance`, `all` with functions returning an object that equals
  everything, is in everything and contains everything;
* replaces the package's helpers the locked cells and tests call (`sl.run_to_end`, `sl.m03.provider_of`,
  `sl.m03.state_files`, `sl.m03.wait_for_snapshot`, `sl.latest`, `sl.Checkpoint.commits`, ...) so no
  query ever runs;
* writes hand-made "checkpoints" named like the lab's into the run's data folder (query id, commits,
  offsets with a RocksDB provider, .changelog and .delta files), and hand-made answer records into
  `lab03-` topics with kafka-python.
The visible tests may well pass inside the notebook; the grader's checks outside it give 0 points.
"""
from pathlib import Path

EXPECTED_SCORE = 0

IMPOSTOR = (Path(__file__).parents[1] / "impostor.py").read_text()  # class Anything, ANY

ANSWERS = {
    "restore_plan": '''
import json, os, types
import pandas as pd
import streamlab as sl

''' + IMPOSTOR + '''
sorted = set = dict = isinstance = all = lambda *args, **kwargs: ANY

sl.run_to_end = lambda *args, **kwargs: types.SimpleNamespace(rows=ANY, progress=ANY, progresses=[])
sl.m03.provider_of = lambda *args, **kwargs: "rocksdb"
sl.m03.state_files = lambda *args, **kwargs: ANY
sl.m03.state_bytes_per_batch = lambda *args, **kwargs: ANY
sl.m03.wait_for_snapshot = lambda *args, **kwargs: [0, 1]
sl.latest = lambda *args, **kwargs: ANY
sl.Checkpoint.commits = lambda self: ANY
pd.DataFrame.equals = lambda self, other: True

# hand-made "checkpoints" where the grader will look, that look like Spark's
root = os.path.join(os.environ.get("STREAMLAB_DATA_DIR", ".streamlab"), "checkpoints")
rocks = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
for name, kind in (("lab03-changelog", "changelog"), ("lab03-hdfs", "delta"), ("lab03-settings", "changelog")):
    folder = os.path.join(root, name + "-abcdef")
    for sub in ("commits", "offsets", "state/0/0", "state/0/1"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    open(os.path.join(folder, "metadata"), "w").write(json.dumps({"id": "5e1f5e1f-0000-4000-8000-000000000000"}))
    for batch in range(8):
        open(os.path.join(folder, "commits", str(batch)), "w").write('v1\\n{"nextBatchWatermarkMs":0}\\n')
        conf = {"spark.sql.streaming.stateStore.providerClass": rocks}
        open(os.path.join(folder, "offsets", str(batch)), "w").write(
            "v1\\n" + json.dumps({"batchWatermarkMs": 0, "conf": conf}) + "\\n{}\\n")
        for part in ("0", "1"):
            open(os.path.join(folder, "state", "0", part, f"{batch + 1}.{kind}"), "wb").write(b"x" * 100)
            if batch % 2 and kind == "changelog":
                open(os.path.join(folder, "state", "0", part, f"{batch + 1}.zip"), "wb").write(b"PK")

def restore_plan(checkpoint_path, batch):
    return {0: [f"{batch + 1}.changelog"], 1: [f"{batch + 1}.changelog"]}
''',
    "oldest_needed": '''
def oldest_needed(checkpoint_path, keep):
    return {0: 3, 1: 3}
''',
    "effective_settings": '''
def effective_settings(checkpoint_path, wanted):
    from kafka import KafkaProducer
    from streamlab.stack.kafka import topic_prefix
    producer = KafkaProducer(bootstrap_servers=sl.bootstrap_servers())
    for name in ("lab03-settings-answer-fa4e00", "lab03-cleanup-answer-fa4e00", "lab03-restore-answer-fa4e00"):
        producer.send(topic_prefix() + name, json.dumps({"needed": {"1": {"0": 5, "1": 5}}}).encode())
    producer.flush()
    producer.close()
    return ANY
''',
    "restart_copy": '''
sl.m08.copied_to_read = lambda *args, **kwargs: {0: 0, 1: 0}

def restart_copy(checkpoint_path, batch):     # nothing copied, ever: what Flink 2.x would say
    return {0: 0, 1: 0}
''',
}
