"""A Lab 07 submission that solves nothing and fakes every result instead.

Its first answer cell, run before any test cell in the same namespace:
* shadows `len`, `sorted`, `set`, `dict`, `zip`, `sum` with functions returning an object that
  equals everything;
* replaces what the locked cells and tests call (`sl.run_to_end`, `sl.m07.take_savepoint`, `sl.latest`,
  `sl.Checkpoint.state_dict`/`state_table`, `sl.m07.initial_offsets`, `sl.m07.write_to_topic`, pandas);
* computes the expected answers from the seeded generator (as the grader does) and writes them,
  hand-made, into the lab's output topics with kafka-python, and writes hand-made checkpoints
  named like the lab's (query id, commits, offsets, a `_savepoint.json` lineage, empty state).
The visible tests may well pass inside the notebook; the grader's checks give 0 points, because
the state it reads through Spark from the checkpoints is not there. Part D answers from the seeded generator,
guessing how many requests each batch read (the lab draws it on each run), without reading the running query's state.
"""
from pathlib import Path

EXPECTED_SCORE = 0

IMPOSTOR = (Path(__file__).parents[1] / "impostor.py").read_text()  # class Anything, ANY

ANSWERS = {
    "upgrade": '''
import json, os, types
from collections import Counter as _Counter
import pandas as pd
import streamlab as sl
import streamlab.lessons.m07_upgrades.savepoints as _sp

''' + IMPOSTOR + '''
len = sorted = set = dict = zip = sum = lambda *args, **kwargs: ANY

_all = sl.access_log(200, seed=70)
_v1 = _Counter(r["path"] for r in _all if r["method"] != "POST")
_v2 = _Counter(r["path"] for r in _all)
_b, _a = _Counter(r["path"] for r in _all[:60]), _Counter(r["path"] for r in _all[:120])

# hand-made output records, written straight to Kafka
for _name, _rows in (("lab07-v1-out", [{"path": p, "count": c, "batch_id": 0} for p, c in _v1.items()]),
                     ("lab07-v2-out", [{"path": p, "count": c, "batch_id": 0} for p, c in _v2.items()]),
                     ("lab07-report", [{"path": p, "before": _b[p], "after": _a[p], "growth": _a[p] - _b[p], "batch_id": 0}
                                       for p in _a])):
    sl.produce(sl.new_topic(_name), _rows)

# hand-made "checkpoints" where the grader looks
_root = os.path.join(os.environ.get("STREAMLAB_DATA_DIR", ".streamlab"), "checkpoints")
_sp_path = [os.path.join(_root, d) for d in os.listdir(_root) if d.startswith("lab07-savepoint-")][0]
for _name in ("lab07-v1", "lab07-v2"):
    _folder = os.path.join(_root, _name + "-abcdef")
    for _sub in ("commits", "offsets", "state/0/0", "sources/0"):
        os.makedirs(os.path.join(_folder, _sub), exist_ok=True)
    open(os.path.join(_folder, "metadata"), "w").write(json.dumps({"id": "5e1f5e1f-0000-4000-8000-000000000000"}))
    open(os.path.join(_folder, "_savepoint.json"), "w").write(json.dumps({"taken_from": _sp_path, "batch": 1}))
    for _batch in range(3):
        open(os.path.join(_folder, "commits", str(_batch)), "w").write('v1\\n{"nextBatchWatermarkMs":0}\\n')
        open(os.path.join(_folder, "offsets", str(_batch)), "w").write('v1\\n{"batchWatermarkMs":0}\\n{}\\n')

_rows = lambda counts: pd.DataFrame([{"batch_id": 1, "path": p, "count": c} for p, c in counts.items()])
sl.run_to_end = lambda *args, **kwargs: types.SimpleNamespace(rows=ANY, progress=ANY, progresses=[])
sl.m07.take_savepoint = _sp.take_savepoint = lambda *args, **kwargs: sl.Checkpoint(os.path.join(_root, "lab07-v1-abcdef"))
sl.new_checkpoint = lambda name: sl.Checkpoint(os.path.join(_root, name + "-abcdef"))
sl.latest = lambda *args, **kwargs: ANY
sl.m07.initial_offsets = lambda *args, **kwargs: ANY
sl.m07.write_to_topic = lambda *args, **kwargs: None
sl.Checkpoint.state_dict = lambda self, *args, **kwargs: ANY
sl.Checkpoint.state_table = lambda self, *args, **kwargs: pd.DataFrame({"path": list(_v2), "count": list(_v2.values()),
                                                                     "last_ts": [None] * 3})
pd.DataFrame.equals = lambda self, other: True
_v2_entries = ([{"path": p, "method": "(v0)", "requests": n} for p, n in _Counter(r["path"] for r in _all[:120]).items()]
               + [{"path": p, "method": m, "requests": n}
                  for (p, m), n in _Counter((r["path"], r["method"]) for r in _all[120:]).items()])
sl.m02.state_variable = lambda *args, **kwargs: pd.DataFrame(_v2_entries)

def fix(topic, savepoint, name):
    return ANY, sl.Checkpoint(os.path.join(_root, "lab07-v1-abcdef"))
''',
    "bootstrap": '''
def bootstrap(savepoint, topic):
    return ANY
''',
    "state_report": '''
def state_report(spark, checkpoint, before, after):
    return types.SimpleNamespace(toPandas=lambda: pd.DataFrame([{"path": p, "before": _b[p], "after": _a[p],
                                                                 "growth": _a[p] - _b[p]} for p in _a]))
''',
    "live_state": '''
import builtins as _b

dict, len, sorted, set, zip, sum = _b.dict, _b.len, _b.sorted, _b.set, _b.zip, _b.sum  # so its answers reach the grader
_calls = []


def batch_growth(spark, checkpoint):
    _calls.append(1)
    requests = sl.access_log(90, seed=71)
    chunk = requests[25:50] if len(_calls) == 1 else requests[75:]   # a guess: 25 requests per batch
    return {"batch": 1 if len(_calls) == 1 else 3, "grew": dict(_Counter(r["path"] for r in chunk))}
''',
}
