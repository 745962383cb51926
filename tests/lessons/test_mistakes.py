"""The catalogue of learners' mistakes (streamlab.lessons.mistakes), each made for real in a lesson's kernel.

One kernel runs a setup cell, then one cell per catalogued mistake (``CASES``: the mistake, as a learner would
write it, and the line of Spark's error that says the cause), then two controls: an error the catalogue does
not know, and a cell that works. Each mistake's error output must start with the learner's paragraph, naming
the mistake's entry, with Spark's own error after it and the exception's type and message unchanged; the
unknown error and the good cell must look exactly as without the course. The figures (lines of output above
the cause, before and after) are printed by ``benchmarks/learner_errors.py`` from the same cells.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import nbformat
import pytest
from nbclient import NotebookClient

from streamlab.lessons import mistakes


@dataclass(frozen=True)
class Case:
    mistake: str   # the catalogue's name
    code: str      # the cell a learner writes
    cause: str     # what in Spark's error says the cause ("" where Spark's error does not say it at all)


SETUP = """\
import json, os
import streamlab as sl
from pyspark.sql import Row, functions as F
from pyspark.sql.streaming import StatefulProcessor
spark = sl.spark(state_store="rocksdb")
topic = sl.new_topic("mistakes")
sl.produce(topic, sl.access_log(20))
events = sl.kafka_stream(topic, sl.ACCESS_LOG_SCHEMA)

def tws(processor, time_mode="None", **options):
    return events.groupBy("path").transformWithState(
        statefulProcessor=processor, outputStructType="path STRING, n LONG", outputMode="Update",
        timeMode=time_mode, **options)

def run(frame):
    return sl.run_to_end(frame, output_mode="update", checkpoint=sl.new_checkpoint("mistake"))

def counted_then(second):
    ckpt = sl.new_checkpoint("changed")
    sl.run_to_end(events.groupBy("path").count(), output_mode="update", checkpoint=ckpt)
    sl.produce(topic, sl.access_log(5, seed=9))
    sl.run_to_end(second, output_mode="update", checkpoint=ckpt)
    return ckpt
"""

CASES = [
    Case("handler_returned_none", """\
class Counter(StatefulProcessor):
    def init(self, handle):
        self.n = handle.getValueState("n", "n LONG")
    def handleInputRows(self, key, rows, timerValues):
        self.n.update((1,))
run(tws(Counter()))""", "TypeError: 'NoneType' object is not iterable"),
    Case("expired_timer_returned_none", """\
class Quiet(StatefulProcessor):
    def init(self, handle):
        self.handle, self.n = handle, handle.getValueState("n", "n LONG")
    def handleInputRows(self, key, rows, timerValues):
        self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() - 1)
        yield Row(path=key[0], n=1)
    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        self.n.clear()
run(tws(Quiet(), "ProcessingTime"))""", "TypeError: 'NoneType' object is not iterable"),
    Case("handler_returned_not_rows", """\
class AsDicts(StatefulProcessor):
    def init(self, handle):
        pass
    def handleInputRows(self, key, rows, timerValues):
        return [{"path": key[0], "n": 1}]
run(tws(AsDicts()))""", "AttributeError: 'dict' object has no attribute"),
    Case("row_does_not_match_output_schema", """\
class Words(StatefulProcessor):
    def init(self, handle):
        pass
    def handleInputRows(self, key, rows, timerValues):
        yield Row(path=key[0], n="many")
run(tws(Words()))""", "ArrowInvalid"),
    Case("state_update_not_a_tuple", """\
class Bare(StatefulProcessor):
    def init(self, handle):
        self.n = handle.getValueState("n", "n LONG")
    def handleInputRows(self, key, rows, timerValues):
        self.n.update(5)
        yield Row(path=key[0], n=5)
run(tws(Bare()))""", "TypeError: 'int' object is not iterable"),
    Case("timer_without_time_mode", """\
class Alarm(StatefulProcessor):
    def init(self, handle):
        self.handle = handle
    def handleInputRows(self, key, rows, timerValues):
        self.handle.registerTimer(1000)
        yield Row(path=key[0], n=1)
run(tws(Alarm()))""", "STATEFUL_PROCESSOR_CANNOT_PERFORM_OPERATION_WITH_INVALID_TIME_MODE"),
    Case("ttl_outside_processing_time", """\
class Expiring(StatefulProcessor):
    def init(self, handle):
        self.n = handle.getValueState("n", "n LONG", ttlDurationMs=1000)
    def handleInputRows(self, key, rows, timerValues):
        yield Row(path=key[0], n=1)
run(tws(Expiring(), "EventTime"))""", "STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_TO_ASSIGN_TTL"),
    Case("state_variable_declared_twice", """\
class Twice(StatefulProcessor):
    def init(self, handle):
        self.n = handle.getValueState("n", "n LONG")
        self.total = handle.getValueState("n", "total LONG")
    def handleInputRows(self, key, rows, timerValues):
        yield Row(path=key[0], n=1)
run(tws(Twice()))""", ""),
    Case("state_schema_unreadable", """\
class Typo(StatefulProcessor):
    def init(self, handle):
        self.n = handle.getValueState("n", "n LONGG")
    def handleInputRows(self, key, rows, timerValues):
        yield Row(path=key[0], n=1)
run(tws(Typo()))""", ""),
    Case("tws_needs_rocksdb", """\
spark.conf.set("spark.sql.streaming.stateStore.providerClass",
               "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider")
try:
    run(tws(Words()))
finally:
    spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                   "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")""",
         "STORE_BACKEND_NOT_SUPPORTED_FOR_TWS"),
    Case("initial_state_not_grouped", """\
v0_counts = spark.createDataFrame([("/home", 3)], "path STRING, n LONG")
tws(Counter(), initialState=v0_counts)""", "AssertionError"),
    Case("append_needs_a_watermark", """\
sl.run_to_end(events.groupBy("path").count(), output_mode="append")""", "STREAMING_OUTPUT_MODE"),
    Case("output_mode_not_supported", """\
sl.run_to_end(events.select("path"), output_mode="complete")""", "STREAMING_OUTPUT_MODE"),
    Case("action_on_a_stream", """\
events.show()""", "writeStream.start()"),
    Case("watermark_on_a_non_timestamp", """\
events.withColumn("ms", F.unix_millis("ts")).withWatermark("ms", "10 seconds")""",
         "EVENT_TIME_IS_NOT_ON_TIMESTAMP_TYPE"),
    Case("column_not_found", """\
events.groupBy("status").count()""", "UNRESOLVED_COLUMN"),
    Case("foreach_batch_function_failed", """\
def share_of_errors(batch, batch_id):
    errors = batch.filter("method = 'DELETE'").count()
    return errors / (batch.count() - batch.count())
sl.run_to_end(events, foreach_batch=share_of_errors)""", "ZeroDivisionError"),
    Case("changed_key_on_a_checkpoint", """\
counted_then(events.groupBy("path", "method").count())""", "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE"),
    Case("changed_state_on_a_checkpoint", """\
counted_then(events.groupBy("path").agg(F.max("ts")))""", "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"),
    Case("checkpoint_of_another_query", """\
counted_then(events.dropDuplicates(["path"]))""", "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA"),
    Case("checkpoint_file_edited", """\
edited = sl.new_checkpoint("edited")
sl.run_to_end(events.groupBy("path").count(), output_mode="update", checkpoint=edited)
offsets = os.path.join(str(edited), "offsets", "0")   # read partition 0 again from its first record
lines = open(offsets).read().splitlines()
where = json.loads(lines[-1])
where[topic]["0"] = 0
open(offsets, "w").write("\\n".join(lines[:-1] + [json.dumps(where)]))
sl.run_to_end(events.groupBy("path").count(), output_mode="update", checkpoint=edited)""", "Checksum error: file:"),
    Case("state_reader_wrong_operator", """\
ckpt = sl.new_checkpoint("read")
sl.run_to_end(events.groupBy("path").count(), output_mode="update", checkpoint=ckpt)
spark.read.format("statestore").option("operatorId", 3).load(str(ckpt)).show()""",
         "STDS_FAILED_TO_READ_STATE_SCHEMA"),
    Case("state_reader_wrong_option", """\
spark.read.format("statestore").option("stateVarName", "n").load(str(ckpt)).show()""",
         "STDS_INVALID_OPTION_VALUE"),
    Case("starting_offsets_missing_partition", """\
partial = json.dumps({topic: {"0": -2}})
sl.run_to_end(sl.kafka_stream(topic, sl.ACCESS_LOG_SCHEMA, startingOffsets=partial))""",
         "you must specify all TopicPartitions"),
    Case("topic_does_not_exist", """\
sl.run_to_end(sl.kafka_stream("requests", sl.ACCESS_LOG_SCHEMA))""", "UnknownTopicOrPartitionException"),
    Case("kafka_servers_missing", """\
sl.run_to_end(spark.readStream.format("kafka").option("subscribe", topic).load())""",
         "kafka.bootstrap.servers' must be specified"),
    Case("broker_not_running", """\
saved = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
os.environ["KAFKA_BOOTSTRAP_SERVERS"] = "127.0.0.1:9"
try:
    sl.new_topic("orders")
finally:
    os.environ.pop("KAFKA_BOOTSTRAP_SERVERS") if saved is None else os.environ.update(KAFKA_BOOTSTRAP_SERVERS=saved)""",
         "NoBrokersAvailable"),
    Case("no_java", """\
saved = os.environ.get("JAVA_HOME")
os.environ["JAVA_HOME"] = "/opt/no-such-jdk"
try:
    sl.stack.java.require_java()
finally:
    os.environ.pop("JAVA_HOME") if saved is None else os.environ.update(JAVA_HOME=saved)""", "JavaError"),
    Case("spark_stopped", """\
spark.stop()
spark.range(3).count()""", "object has no attribute 'sc'"),  # last: the kernel has no Spark after it
]
UNKNOWN = 'raise ValueError("an error the catalogue does not know")'
GOOD = 'print("fine")'
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _lines(traceback: list[str]) -> list[str]:
    return _ANSI.sub("", "\n".join(traceback)).splitlines()


def lines_above(traceback: list[str], needle: str) -> int | None:
    """How many lines of an error output come before the first that says ``needle`` (None: none says it)."""
    return next((i for i, line in enumerate(_lines(traceback)) if needle in line), None)


def run_catalogue(kafka_bootstrap) -> list:
    """The setup, every case, the two controls, executed in one kernel: the cells, in that order."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in [SETUP, *(case.code for case in CASES), UNKNOWN, GOOD]]
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True).execute()
    return nb.cells


@pytest.fixture(scope="module")
def cells(kafka_bootstrap):
    return run_catalogue(kafka_bootstrap)


def test_the_catalogue_has_every_case_and_each_case_one_mistake():
    names = [m.name for m in mistakes.CATALOGUE]
    assert len(names) == len(set(names)) >= 25
    made = [case.mistake for case in CASES]
    assert len(made) == len(set(made)), "one case per mistake"
    assert set(made) <= set(names), f"cases of no catalogued mistake: {sorted(set(made) - set(names))}"
    assert not set(names) - set(made), f"catalogued but never made in the tests: {sorted(set(names) - set(made))}"


@pytest.mark.slow
def test_every_mistake_shows_the_learners_message_first(cells):
    assert not [o for o in cells[0].outputs if o.output_type == "error"], cells[0].outputs
    wrong = []
    for case, cell in zip(CASES, cells[1:]):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if len(errors) != 1:
            wrong.append(f"{case.mistake}: the cell should fail once, its outputs: {str(cell.outputs)[:300]}")
            continue
        error = errors[0]
        message = mistakes.learner_message(error.traceback)
        if not message or f"#{case.mistake.replace('_', '-')}" not in message:
            wrong.append(f"{case.mistake}: {message or 'no message'}; the error: {error.ename}: {error.evalue[:300]}")
            continue
        # Spark's error after it, unchanged: the exception is the same, and its last line is its own
        assert _lines(error.traceback)[0].startswith(mistakes.HEADER)
        last = (error.evalue.splitlines() or [error.ename])[0][:60]
        assert last in _ANSI.sub("", "\n".join(error.traceback[1:])), case.mistake
        if case.cause:
            assert lines_above(error.traceback[1:], case.cause) is not None, \
                f"{case.mistake}: Spark's error no longer says {case.cause!r}"
    assert not wrong, "\n".join(wrong)


@pytest.mark.slow
def test_an_unknown_error_and_a_good_cell_are_untouched(cells):
    unknown, good = cells[-2], cells[-1]
    [error] = [o for o in unknown.outputs if o.output_type == "error"]
    assert mistakes.learner_message(error.traceback) is None
    assert not any(mistakes.HEADER in line for line in _lines(error.traceback))
    assert (error.ename, error.evalue) == ("ValueError", "an error the catalogue does not know")
    assert [(o.output_type, o.get("text")) for o in good.outputs] == [("stream", "fine\n")]


@pytest.mark.slow
def test_the_learners_message_names_their_code(cells):
    by_name = {case.mistake: cell for case, cell in zip(CASES, cells[1:])}

    def said(name):
        [error] = [o for o in by_name[name].outputs if o.output_type == "error"]
        return mistakes.learner_message(error.traceback)

    assert said("handler_returned_none").startswith("`Counter.handleInputRows` (cell In[2], line 4) returned nothing")
    assert said("expired_timer_returned_none").startswith("`Quiet.handleExpiredTimer` (cell In[3], line 7)")
    assert said("state_update_not_a_tuple").startswith("At cell In[6], line 5 (in `handleInputRows`): "
                                                       "`self.n.update(5)`")
    assert said("state_variable_declared_twice").startswith("`Twice.init` (cell In[9], line 2) declares the state "
                                                            "variable 'n' twice")
    assert said("state_schema_unreadable").startswith('At cell In[10], line 3 (in `init`): '
                                                      '`self.n = handle.getValueState("n", "n LONGG")`')
    assert said("foreach_batch_function_failed").startswith("Your function `share_of_errors` (cell In[18], line 3) "
                                                            "raised ZeroDivisionError")
    assert said("append_needs_a_watermark").startswith("At cell In[13], line 1, the query asks for output mode")
    assert said("tws_needs_rocksdb").startswith("At cell In[1], line 16 (in `run`), a query runs transformWithState")


def test_an_unknown_error_is_not_explained():
    assert mistakes.explain(ValueError("x")) is None
    assert mistakes.explain(KeyError("path")) is None


def test_a_message_is_found_again_in_its_traceback():
    stb = mistakes.framed("Counter.handleInputRows returned nothing. (More: docs/mistakes.md#x.)") + ["Traceback"]
    assert mistakes.learner_message(stb) == "Counter.handleInputRows returned nothing. (More: docs/mistakes.md#x.)"
    assert mistakes.learner_message(["Traceback (most recent call last):"]) is None
    assert mistakes.learner_message([]) is None


def test_the_docs_page_lists_every_mistake():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "mistakes.md").read_text()
    anchors = set(re.findall(r"^### (\S+)", page, flags=re.M))
    assert {m.name.replace("_", "-") for m in mistakes.CATALOGUE} == anchors
