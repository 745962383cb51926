"""streamlab: what the notebooks and labs of "Stateful Stream Processing with Spark and Kafka" share.

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
"""
from .checkpoint import Checkpoint, new_checkpoint
from .checks import run_checks
from .events import (
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
from .kafka import bootstrap_servers, delete_topic, end_offsets, list_topics, new_topic, produce, read_topic
from .runs import WAIT_S, Run, catch_up, latest, progress_table, run_to_end
from .session import spark, stop_all_queries
from .streams import BatchCollector, kafka_stream, kafka_table

__all__ = [
    "spark", "stop_all_queries",
    "bootstrap_servers", "new_topic", "delete_topic", "list_topics", "produce", "end_offsets", "read_topic",
    "kafka_stream", "kafka_table", "BatchCollector",
    "run_to_end", "catch_up", "latest", "progress_table", "Run", "WAIT_S",
    "new_checkpoint", "Checkpoint",
    "access_log", "article_requests", "offset_reports", "article_offset_reports", "timed_events",
    "ACCESS_LOG_SCHEMA", "OFFSET_REPORT_SCHEMA", "TIMED_EVENT_SCHEMA", "START",
    "doctor",
]


def doctor(*, with_spark: bool = True):
    """Run the environment checks; returns a pandas DataFrame (one row per check)."""
    import pandas as pd

    return pd.DataFrame([c.__dict__ for c in run_checks(with_spark=with_spark)])
