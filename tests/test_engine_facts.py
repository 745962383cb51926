"""Statements about Flink and Spark that a review found wrong, held by the text (each row: where, what must no
longer be said, what is said instead). Where a fact can be run on the pinned version it is run in its lesson; these
are the ones about Flink, or about Spark's source code, that no cell can show."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def in_both_trees(*rows: tuple[str, str, str]) -> list[tuple[str, str, str]]:
    """(lab, wrong, right) rows, each held in the lab's source (solutions/) and in the student version made from
    it (labs/)."""
    return [(f"{tree}/{lab}/{lab}.ipynb", wrong, right) for tree in ("solutions", "labs") for lab, wrong, right in rows]


FACTS = [
    # (1) savepoints are aligned because a savepoint survives a job upgrade; Flink rescales unaligned checkpoints
    ("notebooks/04_checkpoints_exactly_once.ipynb",
     "channel state is tied to\nthe job's exact topology and parallelism",
     "what an\nunaligned checkpoint cannot survive is a job upgrade"),
    # (2) Spark rounds a partition's share below one record up (KafkaMicroBatchStream.rateLimit)
    ("notebooks/05_offset_replay.ipynb", "(split over partitions, rounded down)", "a batch can exceed the cap"),
    ("notebooks/05_offset_replay.ipynb", "`maxOffsetsPerTrigger` caps the records per micro-batch;",
     "rounds a\nshare below one record *up* to one"),
    # (3) only the legacy FlinkKafkaConsumer kept its offsets in a union list state
    ("notebooks/07b_state_as_data.ipynb", "(the Kafka source does this with its partition offsets)",
     "the legacy `FlinkKafkaConsumer`"),
    *in_both_trees(("lab04_checkpoints_exactly_once", "offsets (union list state)", "even-split list state")),
    # (4) raw state is opaque bytes that are still checkpointed; a dict in foreachBatch is no state at all
    ("notebooks/glossary.md", "is the \"unmanaged\" case", "still checkpointed"),
    # (5) article 004 has sections on unaligned checkpoints
    ("notebooks/glossary.md", "| — (after the articles) | unaligned checkpoints",
     "非对齐的检查点 (unaligned checkpoints, 004)"),
    # (6) Flink names shown with what they are today (2.0 removed enableExternalizedCheckpoints and SinkFunction)
    ("notebooks/04_checkpoints_exactly_once.ipynb", "| `enableExternalizedCheckpoints(RETAIN_ON_CANCELLATION)` |",
     "(removed in 2.0; today the option"),
    ("notebooks/03_state_backends.ipynb", "`state.checkpoints.num-retained` (default 1):",
     "today `execution.checkpointing.num-retained`"),
    ("notebooks/glossary.md", "| `TwoPhaseCommitSinkFunction` / the Kafka sink",
     "removed from the public API in Flink 2.0"),
    # (7) the changelog backend gives the heap backend incremental checkpoints; 2.0 removed the legacy backends
    ("notebooks/03_state_backends.ipynb", "and is the one that supports *incremental* checkpoints",
     "gives the heap backend incremental checkpoints"),
    ("notebooks/03_state_backends.ipynb", "**EmbeddedRocksDBStateBackend**. The limits",
     "Flink 2.0 removed the old classes"),
    ("notebooks/glossary.md", "| *renamed in 1.13*:", "removed in 2.0"),
    # (8) dropDuplicatesWithinWatermark keeps an id until the watermark passes its event time plus the delay
    ("notebooks/02_keyed_state.ipynb", "remembers each id until the watermark has passed it",
     "until the watermark passes the first copy's event time plus\nthe watermark's delay"),
    # (9) Flink 2.0 removed the DataSet API (the 1.9 State Processor API's base), SinkFunction, the setters that take
    # Java objects and enableExternalizedCheckpoints: each is an option or a Sink V2 now (Flink 2.0 release notes)
    ("notebooks/07b_state_as_data.ipynb", "the DataSet API, which Flink has since deprecated",
     "the DataSet API, which Flink 2.0 removed"),
    ("notebooks/glossary.md", "the 1.9 version on DataSet)", "on the DataSet API that Flink 2.0 removed"),
    ("notebooks/04b_crashes_and_sinks.ipynb", "legacy since Flink 2.0", "which Flink 2.0 removed from its public API"),
    ("notebooks/04_checkpoints_exactly_once.ipynb", "to be removed in 2.x",
     "Flink 2.0 removed\n> `enableExternalizedCheckpoints`"),
    ("notebooks/04_checkpoints_exactly_once.ipynb", "are deprecated for\n> options such as",
     "`execution.checkpointing.dir` and `restart-strategy.type`"),
    ("notebooks/glossary.md", "*deprecated since 1.15*, today", "*removed in Flink 2.0*, today the option"),
    ("notebooks/glossary.md", "configured apart since 1.13 | state store provider",
     "as 2.0 removed `setStateBackend` and `setCheckpointStorage`"),
    ("notebooks/glossary.md", "| fixed delay, exponential delay, failure rate |",
     "chosen with `restart-strategy.type` (2.0 removed `setRestartStrategy`)"),
    # (10) the Flink -> Spark table's last row ends its sentence
    ("notebooks/04_checkpoints_exactly_once.ipynb", "says how many versions\n",
     "says how many batches' logs and state versions stay in it |"),
    # (11) Flink writes a snapshot asynchronously while processing goes on; Spark writes state inside the batch
    ("notebooks/04_checkpoints_exactly_once.ipynb", "there is nothing to align. The\nprice is latency",
     "*asynchronously*, while it goes on processing records, Spark's executors write a batch's state files"),
    # (12) the rounding up can make a batch exceed maxOffsetsPerTrigger, so "never more" is wrong
    ("notebooks/05_offset_replay.ipynb", "(never more)", "more only through the rounding\nup above"),
    # (13) article 001 asks only for a replayable source; the idempotent or transactional sink is Flink's and Spark's
    ("notebooks/04b_crashes_and_sinks.ipynb", "article 001 states the condition for *end-to-end* exactly-once",
     "article 001 names the source's part of the condition"),
    # (14) HDFSBackedStateStoreProvider.doSnapshot: a snapshot once the deltas since the last one EXCEED
    # minDeltasForSnapshot; the driver purges offsets/ and commits/; RocksDB's cleanup waits for
    # round(ratioExtraSpaceAllowedInCheckpoint 0.3 x minBatchesToRetain) stale versions (RocksDBFileManager)
    ("notebooks/03_state_backends.ipynb", "snapshot is taken every 2 versions",
     "writes one when *more* than 2 deltas follow the last,\nso at version 3, 6"),
    ("notebooks/03_state_backends.ipynb", "maintenance deletes older files", "the\n**driver** purges older `offsets/`"),
    ("notebooks/03_state_backends.ipynb", "of the state and of\nthe offsets and commit logs",
     "`spark.sql.streaming.ratioExtraSpaceAllowedInCheckpoint`, 0.3 × 100"),
    ("notebooks/03_state_backends.ipynb", "Lab 03 asks you.", "Why? (What does Spark need to rebuild"),
    # (15) StreamingQueryManager.startQuery looks for the id among the application's active queries only
    ("notebooks/07_savepoints_upgrades.ipynb", "(two runs with\n  one id cannot coexist",
     "but only inside one application"),
    # (16) Avro state schema evolution follows Avro's reader rules: INT -> LONG widens (accepted), LONG -> INT does not
    ("notebooks/07b_state_as_data.ipynb", "while changing a field's type does not",
     "so does *widening* a field's type"),
    ("notebooks/07b_state_as_data.ipynb", "changing a field's type is refused",
     "a widened type (`INT` → `LONG`) is accepted"),
    # (17) a pickled BINARY value state is managed state holding opaque bytes, not Flink's raw state
    ("notebooks/02_keyed_state.ipynb", "pickled dict — Flink's *raw state*", "still managed state"),
    ("notebooks/02_keyed_state.ipynb", "as **raw state**: a Python dict", "as **opaque bytes**: a Python dict"),
    # (18) the window functions take any timestamp column; event time needs the event's time and a watermark
    ("notebooks/06_event_time_watermarks.ipynb", "all on event time:", "They take any timestamp column"),
    # (19) article 001's three reasons to manage state: memory, failures, rescaling (为什么要管理状态)
    ("notebooks/01_stateless_vs_stateful.ipynb", "Jobs run 24×7 and machines fail. Let's count",
     "(内存不足); jobs run 24×7 and machines fail"),
    # lab texts (issue 51)
    *in_both_trees(
        # lab 01: approx_count_distinct, which Spark's error suggests, is an estimate; the count must be exact
        ("lab01_stateless_vs_stateful", "(try it and read the error). A stateful operator can feed",
         "your answer must be **exact**"),
        # lab 02: the timer is due at the first send + RESEND_MS; a handler with no output returns an empty iterator
        ("lab02_keyed_state", "the moment no copy of it can arrive any more", "the first send's `ts_ms` + `RESEND_MS`"),
        ("lab02_keyed_state", "names). It forgets the id and outputs nothing.",
         "it returns an empty iterator (`return iter([])`"),
        # lab 02: batches of 25 miss the silences only when the processor relies on its timer alone
        ("lab02_keyed_state", "With batches of 25, two silences", "learns of a silence only from its"),
        # lab 03: the HDFS provider snapshots once MORE than minDeltasForSnapshot deltas follow the last snapshot
        ("lab03_state_backends", '"2")   # a snapshot every 2 versions\ncounts = sl.kafka_stream(visits_topic',
         "once more than minDeltasForSnapshot (2) deltas"),
        # lab 03: minBatchesToRetain keeps version last - keep, one more than Part B's rule (HDFS provider's cleanup)
        ("lab03_state_backends", "Spark's own maintenance does", "keeps **one version more**"),
        # lab 04 and 07: the lessons' sections by the numbers and titles the lessons give them
        ("lab04_checkpoints_exactly_once", "(Lesson 07, section 6.)",
         "(Lesson 07b, section 4, *Changing parallelism*.)"),
        # lab 07: Flink's State Processor API writes savepoints too; Spark's state data source only reads
        ("lab07_savepoints_upgrades", "(section 5 of the\nlesson lists",
         "Spark has no writer for a checkpoint's state"),
        # lab 06: Flink's watermark is periodic by default (pipeline.auto-watermark-interval, 200 ms)
        ("lab06_event_time_watermarks", "the stream, record by record (article 003)",
         "every `pipeline.auto-watermark-interval` (200 ms)"),
        ("lab06_event_time_watermarks", "Flink's per-record watermark", "and with its default periodic one"),
        # lab 06: "behind" is measured from the greatest event time so far
        ("lab06_event_time_watermarks", "the latest reading that arrived **before** it",
         "**greatest event time among the readings that arrived before it**"),
        # lab 06: transformWithState (EventTime) drops late rows before handleInputRows sees them
        ("lab06_event_time_watermarks", "then start a new one with the reading.\n2. Write",
         "Spark drops every row at or behind"),
        # lab 07: which v1 the reflection means; initialState takes grouped data
        ("lab07_savepoints_upgrades", "Is v1's output right?", "not Part A's v1"),
        ("lab07_savepoints_upgrades", "and an `initialState`.\n", "`initialState` takes *grouped* data"),
    ),
]


def _text(path: Path) -> str:
    if path.suffix == ".ipynb":
        return "\n".join("".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"])
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize(("where", "wrong", "right"), FACTS, ids=[f"{i}-{f[0].split('/')[-1]}" for i, f in
                                                                  enumerate(FACTS)])
def test_the_statement_holds_for_the_versions_named(where, wrong, right):
    text = _text(ROOT / where)
    assert wrong not in text, f"{where} still says: {wrong!r}"
    assert right in text, f"{where} no longer says: {right!r}"
