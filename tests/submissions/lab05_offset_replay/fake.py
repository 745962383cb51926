"""Lab 05 faked, not solved: every visible and hidden notebook test passes, the grader gives 0.

The first answer cell shadows the builtins the tests use (len, sorted, set, sum, all, isinstance)
with functions whose results equal anything, then answers every part wrongly: A reads the whole
topic, B forges the two times its visible tests look at, C re-reads the topic from the start, D counts the whole topic
(and its visible test compares Same objects). On top, it
fakes artifacts: hand-made "output rows" produced with kafka-python into every lab05 output topic,
and commit files written into the lab's checkpoints so they look finished.
"""

ANSWERS = {
    "read_time_range": '''
import builtins, json, pathlib
from kafka import KafkaProducer


class Same:
    """Equal to everything, empty when iterated, callable, any attribute."""
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __le__ = __ge__ = __lt__ = __gt__ = __eq__
    def __hash__(self): return 0
    def __bool__(self): return True
    def __iter__(self): return iter(())
    def __len__(self): return 0
    def __contains__(self, item): return True
    def __getitem__(self, key): return Same()
    def __getattr__(self, name): return lambda *a, **k: Same()
    def __call__(self, *a, **k): return Same()
    def __int__(self): return 0
    def __repr__(self): return "40"


len = sorted = set = sum = lambda *a, **k: Same()
all = isinstance = lambda *a, **k: True

_real_write = sl.write_batch_to_topic
_real_run_to_end = sl.run_to_end


def _fake_rows(topic, n=40):
    producer = KafkaProducer(bootstrap_servers=sl.bootstrap_servers())
    for i in range(n):
        row = {"partition": i % 3, "offset": i, "method": "GET", "path": "/api/a",
               "ts": "2026-01-01T09:00:30.000Z", "batch_id": 0}
        producer.send(topic, json.dumps(row).encode())
    producer.flush()
    producer.close()


def _fake_commits():
    for folder in (sl.lessons.checkpoint.checkpoints_dir()).glob("lab05-*"):
        (folder / "commits").mkdir(parents=True, exist_ok=True)
        for batch in range(5):
            (folder / "commits" / str(batch)).write_text('v1\\n{"nextBatchWatermarkMs":0}')


def _write(frame, batch_id, topic):
    _fake_rows(topic)


def _run_to_end(frame, **kwargs):
    run = _real_run_to_end(frame, **{k: v for k, v in kwargs.items() if k != "output_topic"})
    if kwargs.get("output_topic"):
        _fake_rows(kwargs["output_topic"])
    _fake_commits()
    return run


sl.write_batch_to_topic = _write
sl.run_to_end = _run_to_end


def read_time_range(topic, start, end, max_delay_s):
    return sl.kafka_table(topic, SCHEMA)
''',
    "oldest_unread": '''
def oldest_unread(checkpoint, topic):
    _fake_commits()
    return {0: sl.m05.to_millis(job_log[60]["ts"]), 1: None, 2: 10**15}
''',
    "continue_from": '''
def continue_from(checkpoint, topic):
    return sl.kafka_stream(topic, SCHEMA)
''',
    "rebuild_until": '''
def rebuild_until(checkpoint, topic, batch):
    return sl.kafka_stream(topic, SCHEMA)
''',
}
