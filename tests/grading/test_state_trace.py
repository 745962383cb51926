"""The student's state beside the reference's, batch by batch (no Spark: the state reader is stood in for).

``Artifacts.trace_state`` compares what a check's reference says the state holds after each batch with what the
student's checkpoint holds as of that batch; the feedback page draws both and names the first batch where they
differ. The real reading, from real checkpoints, is in the lab tests (tests/grading/test_grade_labs.py).
"""
from __future__ import annotations

import types

import pandas as pd
import pytest

from streamlab.grading import bounds
from streamlab.grading.hidden_checks import Artifacts, check, run_checks
from streamlab.grading.outputs.results import CheckResult, clean_traces
from streamlab.grading.outputs.verdicts import summary_html

REFERENCE = {0: {"a": 1}, 1: {"a": 2, "b": 1}, 2: {"a": 3, "b": 1}}


class Tables(Artifacts):
    """Artifacts whose state reader returns the tables given, one per batch (None: too many rows)."""

    def __init__(self, tables):
        super().__init__(data="/nowhere", topic_prefix="")
        self.tables = tables
        self.read_batches = []

    def state_rows(self, ckpt, batch, **options):
        self.read_batches.append((batch, options))
        return self.tables[batch]


def _table(counts):
    return pd.DataFrame({"path": list(counts), "count": list(counts.values())})


def _counts(table):
    return dict(zip(table["path"], table["count"]))


def test_the_first_batch_that_differs_is_named_with_its_first_difference():
    run = Tables({0: _table({"a": 1}), 1: _table({"a": 1, "b": 1}), 2: _table({"a": 2, "b": 1})})
    assert run.trace_state("Part B", None, REFERENCE, _counts, stateVarName="counts") == 1
    assert run.read_batches == [(0, {"stateVarName": "counts"}), (1, {"stateVarName": "counts"}),
                                (2, {"stateVarName": "counts"})]
    (trace,) = run.traces
    assert trace["title"] == "Part B" and trace["diverged_at"] == 1
    assert [(r["batch"], r["yours"], r["reference"], r["differ"]) for r in trace["rows"]] == \
        [(0, 1, 1, 0), (1, 2, 2, 1), (2, 2, 2, 1)]
    assert trace["rows"][1]["example"] == "'a': yours 1, reference 2"
    assert trace["rows"][0]["example"] == ""


def test_a_key_missing_on_either_side_is_a_difference():
    run = Tables({0: _table({"a": 1, "x": 5}), 1: _table({"a": 2}), 2: _table({"a": 3, "b": 1})})
    assert run.trace_state("t", None, REFERENCE, _counts) == 0
    assert run.traces[0]["rows"][0]["example"] == "'x': yours 5, reference absent"
    assert run.traces[0]["rows"][1]["example"] == "'b': yours absent, reference 1"


def test_a_state_matching_in_every_batch_has_no_divergence():
    run = Tables({b: _table(counts) for b, counts in REFERENCE.items()})
    assert run.trace_state("t", None, REFERENCE, _counts) is None
    assert all(r["differ"] == 0 for r in run.traces[0]["rows"])


def test_an_oversized_state_is_not_read_and_ends_the_trace():
    run = Tables({0: _table({"a": 1}), 1: None, 2: _table({"a": 3, "b": 1})})
    assert run.trace_state("t", None, REFERENCE, _counts) == 1
    rows = run.traces[0]["rows"]
    assert [r["batch"] for r in rows] == [0, 1], "nothing is read after an oversized batch"
    assert rows[1]["yours"] is None and rows[1]["example"] == f"more than {bounds.TRACE_ROWS} rows: not read"


def test_each_check_result_carries_its_own_traces():
    @check("test_one")
    def one(run):
        run.trace_state("one", None, REFERENCE, _counts)
        raise AssertionError("wrong")

    @check("test_two")
    def two(run):
        pass

    module = types.SimpleNamespace(one=one, two=two)
    run = Tables({b: _table(counts) for b, counts in REFERENCE.items()})
    first, second = run_checks(module, run)
    assert not first.passed and [t["title"] for t in first.traces] == ["one"]
    assert second.passed and second.traces == []


def test_traces_from_the_checks_process_are_kept_to_their_shape():
    hostile = [{"title": "x" * 500, "rows": [{"batch": 0, "yours": "7", "reference": 2, "differ": True,
                                              "example": "e" * 900}] * 100, "diverged_at": "0"},
               "not a trace", {"rows": "not rows"}]
    (kept,) = clean_traces(hostile)
    assert len(kept["title"]) == 120 and len(kept["rows"]) == 40 and kept["diverged_at"] is None
    assert kept["rows"][0] == {"batch": 0, "yours": None, "reference": 2, "differ": None, "example": "e" * 200}
    assert clean_traces("nothing") == []


def test_the_feedback_block_says_where_the_state_diverged_and_draws_it():
    run = Tables({0: _table({"a": 1}), 1: _table({"<script>alert(1)</script>": 1}), 2: _table({"a": 3, "b": 1})})
    run.trace_state("Part B, counts", None, REFERENCE, _counts)
    good = Tables({b: _table(counts) for b, counts in REFERENCE.items()})
    good.trace_state("Part C", None, REFERENCE, _counts)
    page = summary_html([CheckResult("counts", ["test_b"], False, "wrong", clean_traces(run.traces)),
                         CheckResult("other", ["test_c"], True, "", clean_traces(good.traces))])
    assert "Your state diverged from the reference's at batch 1</strong>" in page
    assert "Your state matched the reference's after every batch." in page
    assert page.count("<svg") == 2 and page.count("<polyline") == 4
    assert "<script>" not in page and "&lt;script&gt;" in page, "a student's key is shown, never run"


@pytest.mark.slow
def test_a_real_checkpoint_is_read_batch_by_batch_and_a_large_state_is_not(kafka_bootstrap, monkeypatch, tmp_path):
    """The reading itself, through Spark's state reader: the counts per key as of each batch, and a state over
    ``TRACE_ROWS`` left unread (a student's query can hold millions of keys; the checks read a bounded slice)."""
    from collections import Counter

    import streamlab as sl
    from streamlab.grading import hidden_checks
    from streamlab.lessons.checkpoint import Checkpoint

    monkeypatch.setenv("STREAMLAB_TOPIC_PREFIX", "trace-")
    topic = sl.new_topic("lab99-trace-in", partitions=1)
    try:
        keys = [f"k{i % 120:03d}" for i in range(240)]
        sl.produce(topic, [{"path": k} for k in keys])
        ckpt = Checkpoint(tmp_path / "ckpt")
        counts = sl.kafka_stream(topic, "path STRING", maxOffsetsPerTrigger=80).groupBy("path").count()
        sl.run_to_end(counts, output_mode="update", checkpoint=ckpt)
        run = hidden_checks.Artifacts(tmp_path, "trace-")
        reference = {b: dict(Counter(v["path"] for v in read))
                     for b, read in run.inputs_by_batch(ckpt, "lab99-trace-in").items()}
        assert sorted(reference) == [0, 1, 2] and len(reference[0]) == 80
        as_counts = lambda table: dict(zip(table["path"], table["count"]))  # noqa: E731
        assert run.trace_state("counts", ckpt, reference, as_counts) is None
        assert [r["yours"] for r in run.traces[0]["rows"]] == [80, 120, 120]
        monkeypatch.setattr(bounds, "TRACE_ROWS", 100)
        assert run.trace_state("counts", ckpt, reference, as_counts) == 1
        assert run.traces[1]["rows"][-1]["example"] == "more than 100 rows: not read"
    finally:
        sl.delete_topic(topic)
