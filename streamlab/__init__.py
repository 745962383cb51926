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
from .backends import (
    KEYS_SCHEMA,
    Measurement,
    checkpoint_conf,
    heap_max,
    heap_used,
    measure_state_store,
    produce_new_keys,
    provider_of,
    state_bytes_per_batch,
    state_files,
    use_state_store,
)
from .checkpoint import Checkpoint, new_checkpoint
from .checks import run_checks
from .event_time import (
    arrival_topic,
    batched_stream,
    dropped_as_late,
    emissions,
    events_table,
    final_result,
    plot_arrivals,
    plot_watermark,
    plot_windows,
    watermark_table,
    window_columns,
)
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
from .jobs import (
    JobFailed,
    PrivateBroker,
    SqliteSink,
    StreamingJob,
    TransactionalTopicSink,
    fail_after_batch,
    read_committed,
)
from .kafka import bootstrap_servers, delete_topic, end_offsets, list_topics, new_topic, produce, read_topic
from .keyed_state import (
    CLICK_SCHEMA,
    READING_SCHEMA,
    clicks,
    plot_state_rows,
    sensor_readings,
    state_rows_per_batch,
    state_variable,
    state_variables,
    timers,
)
from .offsets import (
    add_partitions,
    checkpoint_lag,
    checkpoint_offsets,
    consumer_groups,
    data_loss_message,
    delete_records,
    earliest_offsets,
    offset_ranges,
    offsets_at,
    offsets_json,
    produce_with_event_time,
    timestamps_json,
    to_millis,
)
from .path_stats import PATH_STATS_OUTPUT
from .runs import WAIT_S, Run, catch_up, latest, progress_table, run_to_end
from .savepoints import (
    SavepointError,
    initial_offsets,
    recorded_conf,
    savepoint_info,
    starting_offsets,
    take_savepoint,
    write_to_topic,
)
from .session import spark, stop_all_queries
from .streams import BatchCollector, kafka_stream, kafka_table
from .upgrades import changes_table, try_change
from .version_tree import plot_version_tree

__all__ = [
    "spark", "stop_all_queries", "bootstrap_servers", "new_topic", "delete_topic", "list_topics", "produce",
    "end_offsets", "read_topic", "kafka_stream", "kafka_table", "BatchCollector", "run_to_end", "catch_up",
    "latest", "progress_table", "Run", "WAIT_S", "new_checkpoint", "Checkpoint", "access_log", "article_requests",
    "offset_reports", "article_offset_reports", "timed_events", "ACCESS_LOG_SCHEMA", "OFFSET_REPORT_SCHEMA",
    "TIMED_EVENT_SCHEMA", "START", "earliest_offsets", "offsets_at", "offsets_json", "timestamps_json", "to_millis",
    "offset_ranges", "checkpoint_offsets", "checkpoint_lag", "delete_records", "add_partitions",
    "produce_with_event_time", "consumer_groups", "data_loss_message", "doctor", "arrival_topic", "batched_stream",
    "events_table", "watermark_table", "window_columns", "dropped_as_late", "final_result", "emissions",
    "plot_watermark", "plot_windows", "plot_arrivals", "StreamingJob", "JobFailed", "fail_after_batch",
    "SqliteSink", "TransactionalTopicSink", "read_committed", "PrivateBroker", "clicks", "sensor_readings",
    "CLICK_SCHEMA", "READING_SCHEMA", "state_variable", "state_variables", "timers", "state_rows_per_batch",
    "plot_state_rows", "use_state_store", "provider_of", "checkpoint_conf", "state_files", "state_bytes_per_batch",
    "heap_used", "heap_max", "produce_new_keys", "KEYS_SCHEMA", "measure_state_store", "Measurement",
    "take_savepoint", "savepoint_info", "starting_offsets", "recorded_conf", "try_change", "changes_table",
    "plot_version_tree", "SavepointError", "PATH_STATS_OUTPUT", "write_to_topic", "initial_offsets",
]


def doctor(*, with_spark: bool = True):
    """Run the environment checks; returns a pandas DataFrame (one row per check)."""
    import pandas as pd

    return pd.DataFrame([c.__dict__ for c in run_checks(with_spark=with_spark)])
