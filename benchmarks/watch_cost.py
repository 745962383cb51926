"""What watching a query costs (``sl.watch``). Reports numbers; asserts nothing.

    .venv/bin/python benchmarks/watch_cost.py [--runs 5]

One seeded query, lesson 02b's visits with event-time timers (120 clicks, 15 per micro-batch, 10 batches, RocksDB),
run to the end ``--runs`` times without the view and ``--runs`` times with it (``watch_key=``), alternately, so a
machine that slows down slows both. Printed: the medians of the whole run (query start to the last batch drawn)
and, for the watched runs, the view's reading time per batch (the state and the timers as of that batch, read in
the view's own thread while the query goes on).
"""
from __future__ import annotations

import argparse
import statistics
import time

import streamlab as sl


def visits_query(spark, topic):
    from pyspark.sql import Row
    from pyspark.sql import functions as F
    from pyspark.sql.streaming import StatefulProcessor

    class Visits(StatefulProcessor):
        def init(self, handle):
            self.handle = handle
            self.visit = handle.getValueState("visit", "clicks LONG, last_ms LONG")

        def handleInputRows(self, key, rows, timerValues):
            clicks, last = self.visit.get() if self.visit.exists() else (0, 0)
            for row in rows:
                clicks, last = clicks + 1, max(last, row.ts_ms)
            self.visit.update((clicks, last))
            for timer in list(self.handle.listTimers()):
                self.handle.deleteTimer(timer)
            self.handle.registerTimer(last + 30_000)
            return iter([])

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            clicks, _ = self.visit.get()
            self.visit.clear()
            yield Row(user=key[0], clicks=clicks)

    stream = (sl.kafka_stream(topic, sl.m02.CLICK_SCHEMA, spark=spark, maxOffsetsPerTrigger=15)
              .withWatermark("ts", "10 seconds").withColumn("ts_ms", F.unix_millis("ts")))
    return stream.groupBy("user").transformWithState(
        statefulProcessor=Visits(), outputStructType="user STRING, clicks LONG", outputMode="Update",
        timeMode="EventTime")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    spark = sl.spark(state_store="rocksdb")
    clicks = sl.m02.clicks(120, seed=7)
    topic = sl.new_topic("watch-cost", partitions=2)
    sl.produce(topic, clicks, key="user")
    sl.run_to_end(visits_query(spark, topic), output_mode="update", checkpoint=sl.new_checkpoint("warm-up"))
    seconds = {False: [], True: []}
    per_batch = []
    for _ in range(args.runs):
        for watched in (False, True):
            started = time.monotonic()
            run = sl.run_to_end(visits_query(spark, topic), output_mode="update", timeout_s=300,
                                checkpoint=sl.new_checkpoint("watch-cost"),
                                **({"watch_key": clicks[0]["user"]} if watched else {}))
            seconds[watched].append(time.monotonic() - started)
            if watched:
                per_batch.append(run.watch.read_seconds / max(1, len(run.watch.batches)))
    plain, watched = statistics.median(seconds[False]), statistics.median(seconds[True])
    print(f"{args.runs} runs each, 10 micro-batches a run (medians)")
    print(f"  without the view: {plain:6.2f} s")
    print(f"  with the view:    {watched:6.2f} s  ({watched / plain:.2f}x, {watched - plain:+.2f} s a run)")
    print(f"  the view's reading per batch: {statistics.median(per_batch):.3f} s "
          f"(min {min(per_batch):.3f}, max {max(per_batch):.3f})")


if __name__ == "__main__":
    main()
