"""Statements about Flink and Spark that a review found wrong, held by the text (each row: where, what must no
longer be said, what is said instead). Where a fact can be run on the pinned version it is run in its lesson; these
are the ones about Flink, or about Spark's source code, that no cell can show."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

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
    ("solutions/lab04_checkpoints_exactly_once/lab04_checkpoints_exactly_once.ipynb",
     "offsets (union list state)", "even-split list state"),
    ("labs/lab04_checkpoints_exactly_once/lab04_checkpoints_exactly_once.ipynb",
     "offsets (union list state)", "even-split list state"),
    # (4) raw state is opaque bytes that are still checkpointed; a dict in foreachBatch is no state at all
    ("notebooks/glossary.md", "is the \"unmanaged\" case", "still checkpointed"),
    # (5) article 004 has sections on unaligned checkpoints
    ("notebooks/glossary.md", "| — (after the articles) | unaligned checkpoints",
     "非对齐的检查点 (unaligned checkpoints, 004)"),
    # (6) Flink names shown with what they are today
    ("notebooks/04_checkpoints_exactly_once.ipynb", "| `enableExternalizedCheckpoints(RETAIN_ON_CANCELLATION)` |",
     "deprecated since 1.15"),
    ("notebooks/03_state_backends.ipynb", "`state.checkpoints.num-retained` (default 1):",
     "today `execution.checkpointing.num-retained`"),
    ("notebooks/glossary.md", "| `TwoPhaseCommitSinkFunction` / the Kafka sink", "legacy since Flink 2.0"),
    # (7) the changelog backend gives the heap backend incremental checkpoints; 2.0 removed the legacy backends
    ("notebooks/03_state_backends.ipynb", "and is the one that supports *incremental* checkpoints",
     "gives the heap backend incremental checkpoints"),
    ("notebooks/03_state_backends.ipynb", "**EmbeddedRocksDBStateBackend**. The limits",
     "Flink 2.0 removed the old classes"),
    ("notebooks/glossary.md", "| *renamed in 1.13*:", "removed in 2.0"),
    # (8) dropDuplicatesWithinWatermark keeps an id until the watermark passes its event time plus the delay
    ("notebooks/02_keyed_state.ipynb", "remembers each id until the watermark has passed it",
     "until the watermark passes the first copy's event time plus\nthe watermark's delay"),
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
