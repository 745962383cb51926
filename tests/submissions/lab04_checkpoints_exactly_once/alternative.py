"""A correct Lab 04 written differently from the reference solution.

Part A reads the checkpoint's offsets files directly (JSON) instead of ``sl.Checkpoint``; Part B skips a batch
that is already stored (instead of replacing it) and writes with pandas; Part C is a class whose producer starts
on the first batch and which finds the last committed batch with its own read_committed consumer. Part D reads
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
    frame.insert(0, "batch_id", batch_id)
    with sqlite3.connect(STORE) as db:
        (already,) = db.execute("SELECT COUNT(*) FROM counts WHERE batch_id = ?", (batch_id,)).fetchone()
        if already:
            return                      # this batch was stored before the crash: storing it again would double it
        frame[["batch_id", "path", "count"]].to_sql("counts", db, if_exists="append", index=False)
''',
    "make_transactional_sink": '''
class OncePerBatch:
    def __init__(self):
        self.producer = None
        self.done_up_to = -1

    def _open(self):
        from kafka import KafkaConsumer, TopicPartition
        reader = KafkaConsumer(bootstrap_servers=sl.bootstrap_servers(), isolation_level="read_committed",
                               enable_auto_commit=False, consumer_timeout_ms=3000)
        part = TopicPartition(TX_BATCHES, 0)
        reader.assign([part])
        reader.seek_to_beginning(part)
        for message in reader:
            self.done_up_to = max(self.done_up_to, json.loads(message.value)["batch_id"])
        reader.close()
        self.producer = KafkaProducer(bootstrap_servers=sl.bootstrap_servers(), transactional_id=TX_ID,
                                      enable_idempotence=True, acks="all")
        self.producer.init_transactions()

    def __call__(self, batch_df, batch_id):
        if self.producer is None:
            self._open()
        if batch_id <= self.done_up_to:
            return
        self.producer.begin_transaction()
        for row in batch_df.toPandas().to_dict("records"):
            record = {"batch_id": batch_id, "path": row["path"], "count": int(row["count"])}
            self.producer.send(TX_TOPIC, json.dumps(record).encode("utf-8"))
        self.producer.send(TX_BATCHES, json.dumps({"batch_id": batch_id}).encode("utf-8"))
        self.producer.commit_transaction()
        self.done_up_to = batch_id


def make_transactional_sink():
    return OncePerBatch()
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
