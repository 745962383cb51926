"""A correct Lab 05 written differently from the reference solution (tests/grading/test_grade_labs.py puts
each answer into the answer cell with the same grade id of the released notebook).

A: reads the whole topic and filters on Kafka's `timestamp` column, then parses the JSON itself
(instead of startingOffsetsByTimestamp/endingOffsetsByTimestamp and the delay). B: reads the checkpoint's
offsets and commits logs with sl.Checkpoint (instead of sl.m05.checkpoint_offsets), and each partition's first
unread record with a batch read of one offset (instead of sl.read_topic), answering None where there is none. C: builds the
startingOffsets JSON by hand, with each new partition's earliest offset instead of -2. D: reads offsets/<batch>
as JSON and keeps the records below it with one SQL CASE expression (instead of sl.Checkpoint and F.when).
It must get full marks all the same.
"""

ANSWERS = {
    "read_time_range": '''
def read_time_range(topic, start, end, max_delay_s):
    raw = sl.kafka_table(topic)                      # key, value, partition, offset, timestamp
    millis = F.unix_millis(F.col("timestamp"))
    kept = raw.where((millis >= F.lit(sl.m05.to_millis(start))) & (millis < F.lit(sl.m05.to_millis(end))))
    parsed = kept.select(F.from_json("value", SCHEMA).alias("request"), "offset", "partition")
    return parsed.select("partition", "offset", "request.*")
''',
    "oldest_unread": '''
def oldest_unread(checkpoint, topic):
    ckpt = sl.Checkpoint(checkpoint)
    commits = ckpt.commits()
    offsets = ckpt.offsets()
    done = {}
    if not commits.empty:
        last = offsets[(offsets["batch"] == commits["batch"].max()) & (offsets["topic"] == topic)]
        done = {int(p): int(o) for p, o in zip(last["partition"], last["offset"])}
    first = sl.m05.earliest_offsets(topic)
    answer = {}
    for partition, end in sl.end_offsets(topic).items():
        at = done.get(partition, first[partition])
        if at >= end:
            answer[int(partition)] = None
            continue
        start = dict(sl.end_offsets(topic))                # every partition, or Spark refuses the JSON:
        end = dict(start)                                   # end..end reads nothing of the others
        start[partition], end[partition] = at, at + 1
        one = sl.kafka_table(topic, startingOffsets=sl.m05.offsets_json(topic, start),
                             endingOffsets=sl.m05.offsets_json(topic, end))
        stamp = one.where(F.col("partition") == partition).select(F.unix_millis("timestamp").alias("ms")).first()
        answer[int(partition)] = int(stamp["ms"])
    return answer
''',
    "continue_from": '''
import json

def continue_from(checkpoint, topic):
    ckpt = sl.Checkpoint(checkpoint)
    last_committed = ckpt.last_committed_batch()
    logged = ckpt.offsets()
    logged = logged[logged["batch"] == last_committed]
    positions = dict(sl.m05.earliest_offsets(topic))    # partitions version 1 never saw: from their start
    for partition, offset in zip(logged["partition"], logged["offset"]):
        positions[int(partition)] = int(offset)
    starting = json.dumps({topic: {str(p): o for p, o in sorted(positions.items())}})
    return sl.kafka_stream(topic, SCHEMA, startingOffsets=starting)
''',
    "rebuild_until": '''
def rebuild_until(checkpoint, topic, batch):
    import json
    import pathlib
    lines = (pathlib.Path(checkpoint) / "offsets" / str(batch)).read_text().splitlines()
    ends = json.loads(lines[2])[topic]                  # line 2: the source's {topic: {partition: offset}}
    cases = " ".join(f"WHEN {int(p)} THEN offset < {int(o)}" for p, o in ends.items())
    everything = sl.kafka_stream(topic, SCHEMA, startingOffsets=sl.m05.offsets_json(topic, sl.m05.earliest_offsets(topic)))
    return everything.where(F.expr(f"CASE partition {cases} ELSE false END"))
''',
}
