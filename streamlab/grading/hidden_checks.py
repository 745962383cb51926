"""Hidden checks: how a graded lab is verified *outside* the student's kernel.

A student's code runs before the lab's test cells, in the same Python namespace, so it can replace
anything those cells call (builtins, the lab's helpers, ``streamlab``, pandas). A grade therefore
comes from what the run **left behind** — checkpoints, Kafka topics — read by the grader in its own
process after the notebook's kernel is gone, against expected values the grader computes itself.

How a lab is written for it (see docs/contributors.md, "Writing a lab"):

* each graded part's locked cells make the part leave artifacts with fixed names: a checkpoint
  from ``sl.new_checkpoint("lab02-dedup")`` and topics from ``sl.new_topic("lab02-dedup-out")``;
  a query's output reaches a topic through ``sl.run_to_end(..., output_topic=topic)`` (sent batch
  by batch, before each batch commits, with each row's ``batch_id``);
* beside the solution notebook, ``solutions/<lab>/hidden_checks.py`` (never released to students) holds
  one function per part, decorated with the test cells it confirms::

      from streamlab.grading.hidden_checks import check

      @check("test_dedup_output", "test_dedup_state")
      def dedup(run):
          ckpt = run.checkpoint("lab02-dedup")          # missing, empty or half-written: fails
          out = run.output("lab02-dedup-out")            # pandas, with batch_id
          run.require_reached_end(ckpt, "lab02-events")  # the query read the whole input
          assert sorted(out["id"]) == expected_ids(), "some duplicates were kept"

  A check passes by returning; ``assert`` (or ``CheckFailed``) fails it with its message, which
  the student sees in the feedback. Any other exception fails it too, with its type and message.
* a test cell's nbgrader points count only when its check passes: the visible tests give quick
  feedback in the notebook but cannot earn points by themselves;
* a lab has no hidden tests: anything that runs in the student's kernel, their code can read and
  print, so the answer key is the lab's ``hidden_checks.py`` alone. A value only the kernel holds (what
  a student's function returned) is handed out by a locked cell,
  ``sl.produce(sl.new_topic("lab03-cleanup-answer"), [...])``, read by the check with
  ``run.records("lab03-cleanup-answer")`` and compared with the truth it computes from the artifacts,
  never trusted alone.
* a part with state can also show the student *where* their state went wrong: ``run.trace_state(...)`` reads
  the student's state as of each committed batch from the checkpoint (here, outside the kernel) and sets it
  beside the reference's, computed by the check from the lab's input cut into the student's own batches.
  The feedback page draws both and names the first batch where they differ.
"""
from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..lessons.checkpoint import Checkpoint
from ..stack.kafka import RecordTooLarge, end_offsets, list_topics, read_topic
from ..stack.paths import data_dir
from ..stack.session import spark as get_spark
from . import bounds
from .bounds import FETCH_BYTES, RECORD_BYTES, TooLarge, scan_checkpoint
from .outputs.results import CheckResult

_HEX = re.compile(r"^[0-9a-f]{6}$")


class CheckFailed(AssertionError):
    """A hidden check found the part unsolved; the message says why (shown to the student)."""


@dataclass
class Check:
    name: str
    cells: tuple[str, ...]
    function: Callable


def check(*cells: str):
    """Mark a function of a lab's ``hidden_checks.py`` as the hidden check confirming these test cells."""
    if not cells:
        raise ValueError("name the test cells (grade ids) this check confirms")

    def mark(function):
        function.hidden_check = Check(function.__name__, tuple(cells), function)
        return function

    return mark


def checks_of(module) -> list[Check]:
    """The hidden checks defined in a lab's ``hidden_checks.py`` module, in file order."""
    found = [value.hidden_check for value in vars(module).values() if hasattr(value, "hidden_check")]
    return sorted(found, key=lambda c: c.function.__code__.co_firstlineno)


class Artifacts:
    """What one graded run of a lab left behind: its checkpoints and its Kafka topics.

    ``data`` is the run's data folder (``STREAMLAB_DATA_DIR``), ``topic_prefix`` the prefix every
    topic of the run carries (``STREAMLAB_TOPIC_PREFIX``). Both default to this process's.
    """

    def __init__(self, data: str | Path | None = None, topic_prefix: str | None = None, spark=None,
                 start_spark: Callable[[], object] = get_spark):
        self.data = Path(data) if data else data_dir()
        self.topic_prefix = os.environ.get("STREAMLAB_TOPIC_PREFIX", "") if topic_prefix is None else topic_prefix
        self._spark, self._start_spark = spark, start_spark  # no Spark yet: started by the first check asking
        # What the run left in Kafka, asked once: the checks run after the student's kernel and every process of
        # theirs are gone, so nothing changes it while they read (each ask is a new client of the broker's)
        self._topics: list[str] | None = None
        self._ends: dict[str, dict[int, int]] = {}
        self._records: dict[tuple[str, int], list[dict]] = {}
        self.traces: list[dict] = []  # what trace_state drew during the check that runs now

    # -- the student's state beside the reference's, batch by batch
    def state_rows(self, ckpt: Checkpoint, batch: int, **options):
        """The state as of ``batch`` as a pandas table (``ckpt.state_table`` with ``batchId``), or None
        when it holds more than ``bounds.TRACE_ROWS`` rows (a student's state is read only when it is small)."""
        table = ckpt.state_table(self.spark(), max_rows=bounds.TRACE_ROWS + 1, batchId=batch, **options)
        return None if len(table) > bounds.TRACE_ROWS else table

    def inputs_by_batch(self, ckpt: Checkpoint, topic_name: str, limit: int = 100_000) -> dict[int, list]:
        """{batch: the values of the topic's records the query had read by the end of that batch}, for every
        committed batch, cut by the checkpoint's offsets log: what a reference state is computed from."""
        topic = self.topic(topic_name)
        records = self.records(topic_name, limit)
        offsets = ckpt.offsets()
        rows = offsets[offsets["topic"] == topic]
        committed = set(ckpt.commits()["batch"])
        read = {}
        for batch, group in rows.groupby("batch"):
            if batch in committed:
                ends = {int(p): int(o) for p, o in zip(group["partition"], group["offset"])}
                read[int(batch)] = [r["value"] for r in records if r["offset"] < ends.get(r["partition"], 0)]
        return read

    def trace_state(self, title: str, ckpt: Checkpoint, expected: dict[int, dict],
                    read: Callable[[object], dict], **options) -> int | None:
        """Set the student's state beside the reference's after each batch; return the first batch where they
        differ (None: never).

        ``expected`` is ``{batch: {key: value}}``, the reference's state after each committed batch, computed by
        the check from the lab's input cut into the batches the student's checkpoint committed. ``read`` turns
        the state table ``state_rows`` gives into the same ``{key: value}`` shape; ``options`` go to the state
        reader (``stateVarName="..."`` for a transformWithState variable). The comparison is recorded for the
        feedback page (rows per batch, and the first difference)."""
        rows, diverged = [], None
        for batch in sorted(expected)[:bounds.TRACE_BATCHES]:
            want = expected[batch]
            table = self.state_rows(ckpt, batch, **options)
            if table is None:
                rows.append({"batch": batch, "yours": None, "reference": len(want), "differ": None,
                             "example": f"more than {bounds.TRACE_ROWS} rows: not read"})
                diverged = batch if diverged is None else diverged
                break
            got = read(table)
            keys = sorted(set(got) | set(want), key=repr)
            differ = [k for k in keys if got.get(k, _ABSENT) != want.get(k, _ABSENT)]
            example = ""
            if differ:
                key = differ[0]
                example = (f"{_short(key)}: yours {_short(got.get(key, _ABSENT))}, "
                           f"reference {_short(want.get(key, _ABSENT))}")
                diverged = batch if diverged is None else diverged
            rows.append({"batch": batch, "yours": len(got), "reference": len(want), "differ": len(differ),
                         "example": example})
        self.traces.append({"title": title[:120], "rows": rows, "diverged_at": diverged})
        return diverged

    # -- finding artifacts
    def spark(self):
        """The checks' Spark session, started now if none was (``start_spark`` may raise ``RuntimeBroke``)."""
        if self._spark is None:
            self._spark = self._start_spark()
        return self._spark

    @property
    def spark_started(self) -> bool:
        return self._spark is not None

    def checkpoint(self, name: str, *, committed: bool = True) -> Checkpoint:
        """The checkpoint the lab created with ``sl.new_checkpoint(name)``.

        Fails if there is none, or if several (the run is ambiguous); with ``committed`` (the
        default) also if it is not the work of a Spark query that finished a batch: a ``metadata``
        file with a query id, and every committed batch with its offsets entry.
        """
        folder = self.data / "checkpoints"
        found = sorted(p for p in folder.glob(f"{name}-*")
                       if p.is_dir() and _HEX.match(p.name[len(name) + 1:])) if folder.is_dir() else []
        if not found:
            raise CheckFailed(f"no checkpoint named {name!r}: the part's query did not run")
        if len(found) > 1:
            raise CheckFailed(f"{len(found)} checkpoints named {name!r}: run the notebook once, top to bottom")
        try:
            scan_checkpoint(found[0])  # every size bounded before Spark or this process reads a byte of it
        except TooLarge as err:
            raise CheckFailed(f"the checkpoint {name!r} is not one a Spark query of this lab writes: {err}") from err
        ckpt = Checkpoint(found[0])
        if committed:
            require_real_checkpoint(ckpt)
        return ckpt

    def topic(self, name: str) -> str:
        """The full name of the topic the lab created with ``sl.new_topic(name)``."""
        stem = f"{self.topic_prefix}{name}-"
        if self._topics is None:
            self._topics = list_topics()
        found = [t for t in self._topics if t.startswith(stem) and _HEX.match(t[len(stem):])]
        if not found:
            raise CheckFailed(f"no topic named {name!r}: the part's cells did not run")
        if len(found) > 1:
            raise CheckFailed(f"{len(found)} topics named {name!r}: run the notebook once, top to bottom")
        return found[0]

    def records(self, name: str, limit: int = 100_000) -> list[dict]:
        """Every record of the topic ``name`` (see ``sl.read_topic``)."""
        topic = self.topic(name)
        total = sum(self._end_offsets(topic).values())
        if total > limit:
            raise CheckFailed(f"topic {name!r} holds {total} records, more than the {limit} expected")
        if (topic, limit) not in self._records:
            try:
                self._records[topic, limit] = read_topic(topic, limit=limit, max_record_bytes=RECORD_BYTES,
                                                         fetch_bytes=FETCH_BYTES)
            except RecordTooLarge as err:
                raise CheckFailed(f"topic {name!r}: {err}") from err
        return copy.deepcopy(self._records[topic, limit])  # a check may change what it was given

    def _end_offsets(self, topic: str) -> dict[int, int]:
        if topic not in self._ends:
            self._ends[topic] = end_offsets(topic)
        return dict(self._ends[topic])

    def output(self, name: str):
        """A query's output written with ``output_topic=``: a pandas DataFrame of its rows with
        their ``batch_id``, in the order they were written. Fails on records that are not rows."""
        import pandas as pd

        rows = []
        for record in self.records(name):
            value = record["value"]
            if not isinstance(value, dict) or not isinstance(value.get("batch_id"), int):
                raise CheckFailed(f"topic {name!r} holds a record that is not an output row: {str(value)[:80]}")
            rows.append(value)
        return pd.DataFrame(rows)

    # -- what a checkpoint proves
    def require_reached_end(self, ckpt: Checkpoint, topic_name: str) -> dict[int, int]:
        """Fails unless the checkpoint's last committed batch read the topic up to its end.
        Returns the topic's end offsets {partition: offset}."""
        topic = self.topic(topic_name)
        ends = self._end_offsets(topic)
        read = committed_offsets(ckpt, topic)
        if read != ends:
            raise CheckFailed(f"the query's checkpoint has read {topic_name!r} up to {read}, "
                              f"but the topic ends at {ends}")
        return ends


def committed_offsets(ckpt: Checkpoint, topic: str) -> dict[int, int]:
    """{partition: offset} that the last *committed* batch of ``ckpt`` read ``topic`` up to."""
    return ckpt.committed_offsets(topic)


def require_real_checkpoint(ckpt: Checkpoint) -> None:
    """Fails unless ``ckpt`` looks like a Spark query's: a query id in ``metadata``, at least one
    committed batch, and an offsets entry (with Spark's header) for every committed batch."""
    try:
        query_id = ckpt.query_id()
    except (OSError, ValueError, AttributeError):  # unreadable, not JSON, or not a JSON object
        query_id = None
    if not query_id:
        raise CheckFailed("the checkpoint has no query id: it was not written by a Spark query")
    commits = ckpt.commits()
    if commits.empty:
        raise CheckFailed("the checkpoint has no committed batch: the query never finished one")
    for batch in commits["batch"]:
        if not ckpt.is_planned(batch):
            raise CheckFailed(f"batch {batch} is committed but has no offsets: the checkpoint was not "
                              f"written by a Spark query")


class _Absent:
    def __repr__(self) -> str:
        return "absent"


_ABSENT = _Absent()


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class RuntimeBroke(RuntimeError):
    """A check could not give a verdict: the checks' own runtime failed (see ``run_checks``'s ``broke``)."""


def run_checks(module, artifacts: Artifacts, broke=None) -> list[CheckResult]:
    """Run every hidden check of a lab's ``hidden_checks.py``; never raises for a failing part. ``broke``: a
    function that says why an exception a check raised is the checks' runtime failing (their JVM, the broker),
    not the part being wrong (None: it is the part's); then ``RuntimeBroke`` is raised, and no verdict given."""
    results = []
    for item in checks_of(module):
        artifacts.traces = []
        try:
            item.function(artifacts)
        except RuntimeBroke:
            raise  # the grader's own runtime (its Spark did not start): no verdict on the part
        except AssertionError as err:
            message = str(err).strip() or "a hidden check failed"
            result = CheckResult(item.name, list(item.cells), False, message.splitlines()[0][:300])
        except Exception as err:  # a missing or malformed artifact: the part scores 0, with why
            why = broke(err) if broke is not None else None
            if why:
                raise RuntimeBroke(f"{item.name}: {why}") from err
            first = (str(err).strip().splitlines() or [""])[0][:300]
            result = CheckResult(item.name, list(item.cells), False, f"{type(err).__name__}: {first}")
        else:
            result = CheckResult(item.name, list(item.cells), True)
        result.traces = list(artifacts.traces)
        results.append(result)
    return results


def load_checks(path: str | Path, expected_sha256: str | None = None):
    """Load a lab's ``hidden_checks.py`` as a fresh module, from its bytes: read once, hashed, compiled and run,
    never through a bytecode cache (a ``__pycache__`` file next to it is not even looked at).
    ``expected_sha256``: refuse (RuntimeError) if the bytes are not the ones the grader read."""
    import hashlib
    import sys
    import types

    path = Path(path)
    source = path.read_bytes()
    if expected_sha256 and hashlib.sha256(source).hexdigest() != expected_sha256:
        raise RuntimeError(f"{path} changed since the grader read it")
    name = f"hidden_checks_{path.parent.name}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses in the checks look their module up there
    try:
        exec(compile(source, str(path), "exec", dont_inherit=True), module.__dict__)
    finally:
        sys.modules.pop(name, None)
    return module
