"""A correct Lab 04 written differently from the reference solution.

Part A reads the checkpoint's offsets files directly (JSON) instead of ``sl.Checkpoint``; Part B reads each
row's batch_id first and writes only the newer rows (INSERT OR REPLACE, not an upsert with a WHERE), with pandas; Part C is a class whose producer starts
on the first batch, which finds the last committed batch with ``sl.m04.last_committed_batch`` and reads
``offsets/<batch>`` as JSON. Part D reads
``offsets/<batch>`` as JSON and the state with ``spark.read.format("statestore")`` and ``collect()``.
"""

ANSWERS = {
    "in_flight": '''
def in_flight(checkpoint_path):
    from pathlib import Path
    root = Path(checkpoint_path)
    planned = sorted(int(f.name) for f in (root / "offsets").iterdir() if f.name.isdigit())
    commits = root / "commits"
    done = {int(f.name) for f in commits.iterdir() if f.name.isdigit()} if commits.exists() else set()
    open_batches = [b for b in planned if b not in done]
    if not open_batches:
        return None

    def read_up_to(b):
        if b < 0:
            return None
        lines = (root / "offsets" / str(b)).read_text().splitlines()
        positions = json.loads(lines[2])           # line 0: version, line 1: batch metadata, line 2: source 0
        (per_partition,) = positions.values()
        return {int(p): int(o) for p, o in per_partition.items()}

    batch = open_batches[0]
    end = read_up_to(batch)
    start = read_up_to(batch - 1) or dict.fromkeys(end, 0)
    return dict(end=end, start=start, batch=batch)
''',
    "save_counts": '''
def save_counts(batch_df, batch_id):
    frame = batch_df.toPandas()
    with sqlite3.connect(STORE) as db:
        held = dict(db.execute("SELECT path, batch_id FROM latest").fetchall())
        newer = [(p, int(c), batch_id) for p, c in zip(frame["path"], frame["count"])
                 if held.get(p, -1) <= batch_id]   # a row of a later batch stays: this one is a late replay
        db.executemany("INSERT OR REPLACE INTO latest (path, count, batch_id) VALUES (?, ?, ?)", newer)
''',
    "make_transactional_sink": '''
class TwoPhaseSink:
    def __init__(self, checkpoint_path):
        self.root = checkpoint_path
        self.producer = None
        self.last_done = None
        self.in_transaction = None

    def _connect(self):                      # on the first batch of this driver
        last = sl.m04.last_committed_batch(TX_AUDIT)
        self.last_done = -1 if last is None else last
        self.producer = KafkaProducer(bootstrap_servers=sl.bootstrap_servers(), acks="all",
                                      transactional_id=TX_TOPIC + ":exactly-once", enable_idempotence=True)
        self.producer.init_transactions()

    def _read_up_to(self, batch_id):
        import pathlib
        lines = (pathlib.Path(self.root) / "offsets" / str(batch_id)).read_text().splitlines()
        (positions,) = json.loads(lines[2]).values()      # one source, one topic
        return {str(p): int(o) for p, o in positions.items()}

    def pre_commit(self, batch_df, batch_id):
        if self.producer is None:
            self._connect()
        if batch_id <= self.last_done:
            return
        table = batch_df.toPandas()
        self.producer.begin_transaction()
        self.in_transaction = batch_id
        for path, count in zip(table["path"], table["count"]):
            record = {"batch_id": batch_id, "path": path, "count": int(count)}
            self.producer.send(TX_TOPIC, json.dumps(record).encode("utf-8"))
        summary = {"batch_id": batch_id, "rows": len(table), "end": self._read_up_to(batch_id)}
        self.producer.send(TX_AUDIT, json.dumps(summary).encode("utf-8")).get(timeout=30)
        self.producer.flush()

    def commit(self, batch_id):
        if self.in_transaction != batch_id:
            return
        self.producer.commit_transaction()
        self.last_done, self.in_transaction = batch_id, None


def make_transactional_sink(checkpoint_path):
    return TwoPhaseSink(checkpoint_path)
''',
    "two_kinds_of_state": '''
def two_kinds_of_state(checkpoint_path, batch):
    from pathlib import Path
    lines = (Path(checkpoint_path) / "offsets" / str(batch)).read_text().splitlines()
    (positions,) = [json.loads(line) for line in lines[2:]]          # one source: {topic: {partition: offset}}
    source = {int(p): o for per_topic in positions.values() for p, o in per_topic.items()}
    rows = (spark.read.format("statestore").option("batchId", batch).load(checkpoint_path)
            .selectExpr("key.path AS path", "value.count AS n", "partition_id").collect())
    return dict(source=source, keyed={r.path: r.n for r in rows}, partition_of={r.path: r.partition_id for r in rows})
''',
}
