"""Lab 05 with parts C and D solved, part A answered by copying lesson 05's time-range read (which reads the
range by the offsets Kafka gives for its two ends: wrong on a log whose times are out of order), and part B left as
the student stub (it raises NotImplementedError, so part B's answer never reaches the grader): 0 + 0 + 3 + 3 of 10
points. Part C needs nothing from part B's answer, only from the story its locked cell played before calling it.
"""

EXPECTED_SCORE = 6

ANSWERS = {
    "read_time_range": '''
def read_time_range(topic, start, end, max_delay_s):
    return sl.kafka_table(topic, SCHEMA,
                          startingOffsetsByTimestamp=sl.m05.timestamps_json(topic, start),
                          endingOffsetsByTimestamp=sl.m05.timestamps_json(topic, end))
''',
    "continue_from": '''
def continue_from(checkpoint, topic):
    start = {p: -2 for p in sl.end_offsets(topic)}
    start.update(sl.m05.checkpoint_offsets(checkpoint, topic))
    return sl.kafka_stream(topic, SCHEMA, startingOffsets=sl.m05.offsets_json(topic, start))
''',
    "rebuild_until": '''
def rebuild_until(checkpoint, topic, batch):
    offsets = sl.Checkpoint(checkpoint).offsets().query("batch == @batch")
    keep = F.lit(False)
    for p, o in zip(offsets["partition"], offsets["offset"]):
        keep = keep | ((F.col("partition") == int(p)) & (F.col("offset") < int(o)))
    return sl.kafka_stream(topic, SCHEMA).where(keep)
''',
}
