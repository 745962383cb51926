"""Lab 04 with Part A solved and Parts B and C left as the student stub: 3 of 10 points."""

EXPECTED_SCORE = 3

ANSWERS = {
    "in_flight": '''
def in_flight(checkpoint_path):
    ckpt = sl.Checkpoint(checkpoint_path)
    offsets, committed = ckpt.offsets(), set(ckpt.commits()["batch"])
    batch = max(b for b in offsets["batch"] if b not in committed)
    per = lambda b: {int(p): int(o) for p, o in offsets[offsets["batch"] == b][["partition", "offset"]].values}
    return {"batch": int(batch), "start": per(batch - 1), "end": per(batch)}
''',
}
