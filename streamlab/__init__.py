"""streamlab: what the notebooks and labs of "Stateful Stream Processing with Spark and Kafka" share.

The basics, which every lesson uses::

    import streamlab as sl
    spark = sl.spark()                        # a SparkSession with the Kafka connector
    topic = sl.new_topic("requests")          # a fresh Kafka topic
    sl.produce(topic, sl.access_log(100))     # seeded events, as JSON
    events = sl.kafka_stream(topic, sl.ACCESS_LOG_SCHEMA)
    ckpt = sl.new_checkpoint("counts")        # a fresh checkpoint location; ckpt.path
    ckpt.offsets(); ckpt.commits(); ckpt.state()
    run = sl.run_to_end(events.groupBy("path").count(), output_mode="update", checkpoint=ckpt)
    sl.latest(run.rows, "path")               # {path: latest count}
    ckpt.state_dict()                         # {path: count}, read from the state store
    sl.run_to_end(..., watch=True)            # the query's state drawn batch by batch (sl.watch)
    sl.doctor()                               # is everything the course needs here?
    sl.explain(error)                         # a catalogued learner's mistake, in the course's words

In a notebook, ``import streamlab`` also puts that paragraph before Spark's error whenever a cell fails with a
catalogued mistake (``streamlab.lessons.mistakes``; the catalogue is docs/mistakes.md).

Then each lesson's own helpers, under the lesson's number::

    sl.m02   keyed state: click and sensor streams, state variables and timers read back as tables
    sl.m03   state backends: which state store a query uses, what it writes, what it costs
    sl.m04   checkpoints and exactly-once: jobs in a process of their own, crashes, sinks that survive them
    sl.m05   offset replay: where a query starts, how far behind it is, what it lost
    sl.m06   event time and watermarks: controlled micro-batches, and what the watermark did
    sl.m07   savepoints and upgrades: a savepoint the Spark way, trying a change on a copy
    sl.m08   state in Flink 2.x: what a restarted query loads from its checkpoint, measured

The package has four rooms: ``streamlab.stack`` (Java, jars, Kafka, Spark, the doctor),
``streamlab.lessons`` (these helpers), ``streamlab.grading`` (the grader) and ``streamlab.site`` (the course
as a website); CONTRIBUTING.md says where a new module's pieces go.
"""
from .lessons import m02_keyed_state as m02
from .lessons import m03_state_backends as m03
from .lessons import m04_recovery as m04
from .lessons import m05_offset_replay as m05
from .lessons import m06_event_time as m06
from .lessons import m07_upgrades as m07
from .lessons import m08_state_in_flink_2 as m08
from .lessons import mistakes as _mistakes
from .lessons.checkpoint import Checkpoint, new_checkpoint
from .lessons.events import (
    ACCESS_LOG_SCHEMA,
    OFFSET_REPORT_SCHEMA,
    START,
    TIMED_EVENT_SCHEMA,
    access_log,
    article_offset_reports,
    article_requests,
    offset_reports,
    timed_events,
)
from .lessons.runs import WAIT_S, Run, catch_up, error_class, latest, progress_table, run_to_end
from .lessons.streams import BatchCollector, kafka_stream, kafka_table, write_batch_to_topic
from .lessons.watch import StateWatch, watch
from .stack.doctor import diagnose, in_chinese
from .stack.jupyter import notebook_language
from .stack.kafka import bootstrap_servers, delete_topic, end_offsets, list_topics, new_topic, produce, read_topic
from .stack.session import spark, stop_all_queries

__all__ = [
    # Spark and Kafka
    "spark", "stop_all_queries", "bootstrap_servers", "new_topic", "delete_topic", "list_topics", "produce",
    "end_offsets", "read_topic",
    # streams and runs
    "kafka_stream", "kafka_table", "BatchCollector", "write_batch_to_topic", "run_to_end", "catch_up", "latest",
    "progress_table", "Run", "WAIT_S", "error_class",
    # watching state change
    "watch", "StateWatch",
    # checkpoints
    "new_checkpoint", "Checkpoint",
    # seeded events
    "access_log", "article_requests", "offset_reports", "article_offset_reports", "timed_events",
    "ACCESS_LOG_SCHEMA", "OFFSET_REPORT_SCHEMA", "TIMED_EVENT_SCHEMA", "START",
    # the environment, and what went wrong
    "doctor", "explain",
    # each lesson's own helpers
    "m02", "m03", "m04", "m05", "m06", "m07", "m08",
]


explain = _mistakes.explain
_mistakes.install()


def doctor(*, with_spark: bool = True, language: str | None = None):
    """What ``streamlab doctor`` finds, as a pandas DataFrame (one row per finding), in ``language`` ("en", "zh"): by
    default the notebook's, Chinese in the course in Chinese (JupyterLab tells the kernel its notebook's path)."""
    import pandas as pd

    language = language or notebook_language()
    findings = diagnose(with_spark=with_spark)
    return pd.DataFrame([(in_chinese(f) if language == "zh" else f).__dict__ for f in findings])
