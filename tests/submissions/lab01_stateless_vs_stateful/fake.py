"""A Lab 01 submission that solves nothing and fakes every result instead (issue 16).

Its first answer cell, run before any test cell in the same namespace:
* shadows `len`, `sorted`, `set`, `dict` and `zip` with functions returning an object that equals
  everything, is in everything and contains everything;
* replaces the package's helpers the locked cells and tests call (`sl.run_to_end`, `sl.catch_up`,
  `sl.latest`, `sl.Checkpoint.state_dict`, `sl.BatchCollector.frame`, ...) and patches pandas;
* writes hand-made "checkpoints" named like the lab's into the run's data folder, with a query id,
  commits and offsets that look like Spark's, and a hand-made record into a `lab01-` topic.
The visible tests may well pass inside the notebook; the grader's checks outside it give 0 points.
"""
from pathlib import Path

EXPECTED_SCORE = 0

IMPOSTOR = (Path(__file__).parents[1] / "impostor.py").read_text()  # class Anything, ANY

ANSWERS = {
    "lag_alerts": '''
import json, os, types
import pandas as pd
import streamlab as sl

''' + IMPOSTOR + '''
len = sorted = set = dict = zip = lambda *args, **kwargs: ANY

sl.run_to_end = lambda *args, **kwargs: types.SimpleNamespace(rows=ANY, progress=ANY, progresses=[])
sl.catch_up = lambda *args, **kwargs: None
sl.latest = lambda *args, **kwargs: ANY
sl.Checkpoint.state_dict = lambda self, *args, **kwargs: ANY
sl.Checkpoint.commits = lambda self: ANY
sl.Checkpoint.offsets = lambda self: ANY
sl.BatchCollector.frame = lambda self: ANY
sl.end_offsets = lambda *args, **kwargs: ANY
pd.DataFrame.equals = lambda self, other: True

# hand-made "checkpoints" where the grader will look, that look like Spark's
root = os.path.join(os.environ.get("STREAMLAB_DATA_DIR", ".streamlab"), "checkpoints")
for name in ("lab01-alerts", "lab01-alerts-reversed", "lab01-requests", "lab01-restart"):
    folder = os.path.join(root, name + "-abcdef")
    for sub in ("commits", "offsets", "state/0/0"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    open(os.path.join(folder, "metadata"), "w").write(json.dumps({"id": "5e1f5e1f-0000-4000-8000-000000000000"}))
    for batch in range(2):
        open(os.path.join(folder, "commits", str(batch)), "w").write('v1\\n{"nextBatchWatermarkMs":0}\\n')
        open(os.path.join(folder, "offsets", str(batch)), "w").write('v1\\n{"batchWatermarkMs":0}\\n{}\\n')

# a hand-made output record, written straight to Kafka
fake_out = sl.new_topic("lab01-alerts-out")
sl.produce(fake_out, [{"consumer": "c1", "partition": 0, "producer_offset": 15, "consumer_offset": 10,
                       "lag": 5, "alert": "ok", "batch_id": 0}])

def lag_alerts(reports):
    return reports


def alerts_needing_state():
    return ANY
''',
    "distinct_methods": '''
def distinct_methods(requests):
    return requests
''',
    "new_paths": '''
def new_paths(requests):
    return requests
''',
}
