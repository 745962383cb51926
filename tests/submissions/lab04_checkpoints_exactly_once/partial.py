"""Lab 04 with Parts A and D solved and Parts B and C left as the student stub: 6 of 13 points."""

EXPECTED_SCORE = 6

ANSWERS = {
    "in_flight": '''
def in_flight(checkpoint_path):
    ckpt = sl.Checkpoint(checkpoint_path)
    offsets, committed = ckpt.offsets(), set(ckpt.commits()["batch"])
    batch = max(b for b in offsets["batch"] if b not in committed)
    per = lambda b: {int(p): int(o) for p, o in offsets[offsets["batch"] == b][["partition", "offset"]].values}
    return {"batch": int(batch), "start": per(batch - 1), "end": per(batch)}
''',
    "two_kinds_of_state": '''
def two_kinds_of_state(checkpoint_path, batch):
    ckpt = sl.Checkpoint(checkpoint_path)
    offsets = ckpt.offsets().query("batch == @batch")
    state = ckpt.state_table(spark, batchId=batch)
    return {"source": dict(zip(offsets["partition"].astype(int), offsets["offset"].astype(int))),
            "keyed": dict(zip(state["path"], state["count"].astype(int))),
            "partition_of": dict(zip(state["path"], state["partition_id"].astype(int)))}
''',
}
