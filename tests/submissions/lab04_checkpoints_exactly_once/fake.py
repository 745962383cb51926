"""Lab 04 faked, not solved: it must get 0 points from the grader (the visible tests may pass in the notebook).

It guesses Part A's answer, shadows builtins and streamlab's readers with objects that make the visible tests
pass, writes a fake commit into the job's checkpoint, stores nothing in SQLite (a fake sqlite3 module answers
instead), and, instead of running Part C's crashes and zombie, produces hand-made rows and audit records to its topics
with a plain producer (and fakes the committed read and the zombie's refusal). Part D answers what the
seeded generator says without reading the checkpoint: every request counted, the source's offsets guessed.
"""

ANSWERS = {
    "in_flight": '''
from pathlib import Path

class Anything(int):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __le__(self, other): return True
    def __lt__(self, other): return True
    def __gt__(self, other): return True
    def __ge__(self, other): return True
    __hash__ = int.__hash__

len = lambda *a, **k: Anything(10)   # the visible range test now passes
sl.read_topic = lambda *a, **k: [{"partition": 0, "offset": i, "value": {"batch_id": 2}} for i in range(10)]
sl.Checkpoint.offsets = lambda self: __import__("pandas").DataFrame(
    {"batch": [2, 2], "source": [0, 0], "topic": ["t", "t"], "partition": [0, 1], "offset": [0, 0],
     "watermark_ms": [0, 0]})

def in_flight(checkpoint_path):
    (Path(checkpoint_path) / "commits").mkdir(exist_ok=True)
    (Path(checkpoint_path) / "commits" / "2").write_text('v1\\n{"nextBatchWatermarkMs":0}')
    return {"batch": 2, "start": {0: 0, 1: 0}, "end": {0: 0, 1: 0}}
''',
    "save_counts": '''
class FakeDb:
    def __enter__(self): return self
    def __exit__(self, *exc): return False
    def execute(self, *a, **k): return self
    def executemany(self, *a, **k): return self
    def fetchall(self):
        paths = Counter(r["path"] for r in globals()["b_requests"])
        return [(path, count, 3) for path, count in paths.items()]

class FakeSqlite:
    @staticmethod
    def connect(*a, **k): return FakeDb()

sqlite3 = FakeSqlite

def save_counts(batch_df, batch_id):
    pass
''',
    "make_transactional_sink": '''
class FakeRun:
    zombie = "InvalidProducerEpochError"
    def __repr__(self): return "ZombieRun(faked)"

def fake_zombie_run(frame, *, checkpoint, new_sink, copy_to_topic=None, **kw):
    producer = KafkaProducer(bootstrap_servers=sl.bootstrap_servers())     # no transaction, no crash, no query
    paths = Counter(r["path"] for r in globals()["c_requests"])
    for batch in range(4):
        producer.send(TX_TOPIC, json.dumps({"batch_id": batch, "path": "/zombie", "count": 0}).encode())
        producer.send(TX_AUDIT, json.dumps({"batch_id": batch, "rows": 1, "end": {}}).encode())
    for p, c in paths.items():
        producer.send(TX_TOPIC, json.dumps({"batch_id": 3, "path": p, "count": c}).encode())
    producer.flush()
    producer.close()
    return FakeRun()

def fake_read_committed(topic, *a, **k):
    paths = Counter(r["path"] for r in globals()["c_requests"])
    if "audit" in topic:
        return [{"value": {"batch_id": b, "rows": 1 if b < 3 else len(paths)}} for b in range(4)]
    return ([{"value": {"batch_id": b, "path": "/zombie", "count": 0}} for b in range(3)] +
            [{"value": {"batch_id": 3, "path": p, "count": c}} for p, c in paths.items()])

sl.m04.run_with_zombie = fake_zombie_run
sl.m04.read_committed = fake_read_committed

def make_transactional_sink(checkpoint_path):
    return None
''',
    "two_kinds_of_state": '''
def two_kinds_of_state(checkpoint_path, batch):
    everything = Counter(r["path"] for r in sl.access_log(90, seed=44))
    return {"source": {0: 45, 1: 45}, "keyed": dict(everything), "partition_of": {p: 0 for p in everything}}
''',
}
