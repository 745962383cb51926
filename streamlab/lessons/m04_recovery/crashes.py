"""A crash injected inside the notebook's own driver: the batch reaches the sink, then the query
fails before Spark commits it, exactly as a killed driver leaves the checkpoint (module 04)."""
from __future__ import annotations

import time

from ..runs import WAIT_S
from ..streams import BatchCollector, write_batch_to_topic


class InjectedCrash(RuntimeError):
    """Raised by ``fail_after_batch``: the batch reached the sink, and the 'driver' died."""


def fail_after_batch(sink, batch: int):
    """Wrap a ``foreachBatch`` function: the FIRST time batch ``batch`` comes, it is written by
    ``sink`` and then the query fails (``InjectedCrash``) before Spark commits it — the
    checkpoint is left exactly as a killed driver leaves it. Later attempts run normally.

    Quicker than killing a ``StreamingJob`` (no new process), for labs and experiments; the
    query's exception says ``InjectedCrash``. ``wrapped.crashed`` tells whether it happened.
    """
    state = {"crashed": False}

    def crashing(batch_df, batch_id):
        sink(batch_df, batch_id)
        if batch_id == batch and not state["crashed"]:
            state["crashed"] = True
            raise InjectedCrash(f"injected crash: batch {batch_id} reached the sink, commit never written")

    crashing.crashed = lambda: state["crashed"]
    return crashing


class CrashRun:
    """What ``run_with_crash`` saw: ``rows`` (every row the sink was given, per attempt, with
    ``batch_id`` and ``attempt``: 0 before the crash, 1 after), ``before`` / ``after`` (the progress
    reports of the two runs) and their durations in seconds."""

    def __init__(self, rows, before, after, seconds_before, seconds_after, crash_batch):
        self.rows, self.before, self.after = rows, before, after
        self.seconds_before, self.seconds_after = seconds_before, seconds_after
        self.crash_batch = crash_batch

    def __repr__(self) -> str:
        return (f"CrashRun(crash after batch {self.crash_batch}; {len(self.before)} batches committed before, "
                f"{len(self.after)} after the restart)")

    def replayed_rows(self) -> int:
        """How many input records the restart read again: the input of the re-run batch."""
        first = [p for p in self.after if p.get("batchId") == self.crash_batch]
        return int(first[0]["numInputRows"]) if first else 0


def run_with_crash(frame, *, checkpoint, crash_after_batch: int, output_mode: str = "update", sink=None,
                   new_sink=None, copy_to_topic: str | None = None, timeout_s: float = WAIT_S) -> CrashRun:
    """Run the streaming DataFrame ``frame`` (availableNow) with ``checkpoint``; let batch
    ``crash_after_batch`` reach the sink, then fail the query before its commit (``fail_after_batch``);
    then restart it from the same checkpoint and run it to the end. A crash inside this driver:
    no new process, so it is quick (``StreamingJob`` kills a real separate driver).

    ``sink``: a ``foreachBatch`` function to give every batch to (default: just collect the rows);
    ``new_sink``: instead of ``sink``, a function that MAKES the sink: it is called once per run, so
    the restarted query gets a fresh sink with no memory, as a restarted driver would;
    ``copy_to_topic``: also write every batch attempt to that Kafka topic with Spark's Kafka sink
    (at-least-once: the re-run batch lands there twice). Raises ``TimeoutError`` after ``timeout_s``
    per run, and the query's error if it fails for another reason than the injected crash.
    """

    collected = BatchCollector()
    attempt = {"n": 0, "sink": sink}

    def give(batch_df, batch_id):
        batch_df.persist()
        try:
            if copy_to_topic:
                write_batch_to_topic(batch_df, batch_id, copy_to_topic)
            if attempt["sink"] is not None:
                attempt["sink"](batch_df, batch_id)
            collected(batch_df.selectExpr("*", f"{attempt['n']} AS attempt"), batch_id)
        finally:
            batch_df.unpersist()

    def start(function):
        return (frame.writeStream.outputMode(output_mode).foreachBatch(function)
                .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())

    runs, seconds = [], []
    for number, function in enumerate([fail_after_batch(give, crash_after_batch), give]):
        attempt["n"] = number
        if new_sink is not None:
            attempt["sink"] = new_sink()
        started = time.monotonic()
        query = start(function)
        _await_run(query, timeout_s, crash_expected=number == 0)
        if number == 0 and not function.crashed():
            raise RuntimeError(f"the query ended before batch {crash_after_batch}: nothing was crashed")
        runs.append(list(query.recentProgress))
        seconds.append(round(time.monotonic() - started, 2))
    return CrashRun(collected.frame(), runs[0], runs[1], seconds[0], seconds[1], crash_after_batch)


class ZombieRun:
    """What ``run_with_zombie`` saw: ``rows`` (every row given to the sink, with ``batch_id`` and ``attempt``: the
    run, 0 to 2), ``runs`` (the progress reports of the three runs), and ``zombie``: what the old driver's sink
    did when it woke up and committed its open transaction after the new driver had taken over — the name of
    the error it raised (``"InvalidProducerEpochError"``: the broker refused it), or ``None`` if nothing stopped it
    (``"not woken"`` if the run never got that far)."""

    def __init__(self, rows, runs, zombie, replayed_batch, zombie_batch):
        self.rows, self.runs, self.zombie = rows, runs, zombie
        self.replayed_batch, self.zombie_batch = replayed_batch, zombie_batch

    def __repr__(self) -> str:
        woke = "NOT refused" if self.zombie is None else f"refused ({self.zombie})"
        return (f"ZombieRun(run 0 crashed after batch {self.replayed_batch} was committed by the sink; run 1 crashed "
                f"inside batch {self.zombie_batch}'s transaction; run 2 finished; the zombie's late commit: {woke})")


def run_with_zombie(frame, *, checkpoint, new_sink, replayed_batch: int = 1, zombie_batch: int = 2,
                    output_mode: str = "update", copy_to_topic: str | None = None,
                    timeout_s: float = WAIT_S) -> ZombieRun:
    """Run ``frame`` into a **two-phase-commit sink** through two crashes and a zombie, as a cluster can do to a
    driver, and return a ``ZombieRun``.

    ``new_sink()`` makes a fresh sink for every driver run (no memory of earlier runs). A sink has two methods,
    the two phases of Flink's ``TwoPhaseCommitSinkFunction``: ``pre_commit(batch_df, batch_id)`` writes the batch
    (or decides to skip it) and ``commit(batch_id)`` makes what ``pre_commit`` wrote final. For every batch the
    query calls ``pre_commit`` and then ``commit``; then Spark writes ``commits/<batch>``. Three runs, one
    checkpoint:

    * run 0: after the sink committed batch ``replayed_batch`` the driver dies, before Spark's ``commits/``:
      the restart runs that batch again, and the sink must see it was already committed;
    * run 1: batch ``zombie_batch``'s ``pre_commit`` returns, and the driver "dies" before ``commit``. It is
      not dead: a zombie (a long GC pause, a network partition), its sink still holding the open transaction;
    * run 2: a new driver with a new sink runs from the checkpoint to the end. Right after the new sink
      committed batch ``zombie_batch``, the zombie wakes up and calls ``commit(zombie_batch)`` on its old sink:
      ``ZombieRun.zombie`` names the error that stopped it, or is ``None``.

    ``copy_to_topic``: also write every batch attempt there with Spark's Kafka sink (at-least-once).
    Raises ``TimeoutError`` after ``timeout_s`` per run, and a query's error if it is not an injected crash.
    """
    collected = BatchCollector()
    current = {"run": 0, "sink": None, "crashed": False}

    def give(batch_df, batch_id):
        batch_df.persist()
        try:
            if copy_to_topic:
                write_batch_to_topic(batch_df, batch_id, copy_to_topic)
            sink, run = current["sink"], current["run"]
            collected(batch_df.selectExpr("*", f"{run} AS attempt"), batch_id)
            sink.pre_commit(batch_df, batch_id)
            if run == 1 and batch_id == zombie_batch:
                current["crashed"] = True
                raise InjectedCrash(f"injected crash: batch {batch_id} pre-committed, never committed")
            sink.commit(batch_id)
            if run == 2 and batch_id == zombie_batch:  # the new driver has written the batch: the zombie wakes up
                current["zombie"] = _late_commit(zombies[0], batch_id)
            if run == 0 and batch_id == replayed_batch:
                current["crashed"] = True
                raise InjectedCrash(f"injected crash: batch {batch_id} committed by the sink, not by Spark")
        finally:
            batch_df.unpersist()

    runs, zombies = [], []
    current["zombie"] = "not woken"
    for run in range(3):
        current.update(run=run, sink=new_sink(), crashed=False)
        if run == 1:
            zombies.append(current["sink"])
        query = (frame.writeStream.outputMode(output_mode).foreachBatch(give)
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        _await_run(query, timeout_s, crash_expected=run < 2)
        if run < 2 and not current["crashed"]:
            raise RuntimeError(f"run {run} ended before its crash: the input has too few batches")
        runs.append(list(query.recentProgress))
    return ZombieRun(collected.frame(), runs, current["zombie"], replayed_batch, zombie_batch)


def _await_run(query, timeout_s: float, *, crash_expected: bool) -> None:
    """Wait for one run of a crash demo and always stop it. A run meant to crash may end with the injected
    crash; any other error is real and raised, and a run still going after ``timeout_s`` raises ``TimeoutError``."""
    try:
        finished = query.awaitTermination(timeout_s)
    except Exception as err:
        if not crash_expected or "InjectedCrash" not in str(err):
            raise
        finished = True
    finally:
        query.stop()
    if not finished:
        raise TimeoutError(f"the query did not finish within {timeout_s:g} s (it was stopped)")


def _late_commit(zombie, batch_id: int) -> str | None:
    """The zombie's sink commits its open transaction of ``batch_id``: the error that stopped it, or None."""
    try:
        zombie.commit(batch_id)
    except Exception as err:  # what a fenced producer raises (InvalidProducerEpochError, ProducerFencedError)
        return type(err).__name__
    return None
