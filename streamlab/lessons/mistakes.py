"""The mistakes learners make in the lessons and labs, told in the course's words before Spark's.

Spark's errors are written for the people who build Spark. A handler that returns nothing fails as
``[FOREACH_BATCH_USER_FUNCTION_ERROR] ... raised by the Python Proxy``, blaming the course's collector, and
the cause (``TypeError: 'NoneType' object is not iterable``) comes 80 lines later. This module knows the
mistakes the course's learners make (``CATALOGUE``, one ``Mistake`` each, listed in docs/mistakes.md), and
recognises each by what Spark and Python say about it, never by the wording of a message: Spark's **error
class** (``[STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE]``), the **Python exception type**, and for an error raised
inside Spark's Python worker, the worker's exception type and the pyspark function it was raised in.

``explain(error)`` gives the learner's paragraph, or None for an error it does not know (which then passes
through untouched): their own code first (the class and method, or the cell and line), what went wrong in
the course's terms, what to do. ``import streamlab`` installs ``show_first`` as IPython's custom exception
handler, so in a lesson, a lab, ``streamlab check`` and the grader's feedback page the paragraph comes
first, and Spark's error follows it, unchanged.

    try: ...
    except Exception as error:
        print(sl.explain(error))   # the paragraph, or None
"""
from __future__ import annotations

import inspect
import linecache
import re
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

HEADER = "What went wrong, in the course's words"
FOOTER = "Spark's own error follows, unchanged."
DOCS = "docs/mistakes.md"
SPARK_ERROR_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]")  # "[STATE_STORE_...]" in a message
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_LAST = re.compile(r"^([A-Za-z_][\w.]*)(?:: ?(.*))?$")  # a traceback's last line: "Type: message", not indented
_CELL_FILE = re.compile(r"(ipykernel_\d+/\d+\.py|<ipython-input-[\d-]+-[0-9a-f]+>)")
_LIBRARIES = ("site-packages", "dist-packages", "pyspark.zip", "/pyspark/", "/py4j/", "/streamlab/", "<frozen ")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str

    @property
    def is_learners(self) -> bool:
        """Written by the learner: a notebook cell, or any file that is not a library nor the course's."""
        return bool(_CELL_FILE.search(self.file)) or not any(part in self.file for part in _LIBRARIES)


@dataclass
class Evidence:
    """What an error says about itself, read once: what the catalogue's mistakes are matched on."""

    error: BaseException
    classes: list[str]                       # Spark's error classes, outermost first (STREAM_FAILED dropped)
    types: list[str]                         # the Python exception types, the error's and its causes'
    texts: list[str] = field(default_factory=list)  # each error's message with its Java causes' messages
    worker_type: str = ""                    # the exception type raised inside a Python worker or proxy
    worker_message: str = ""
    worker_frames: list[Frame] = field(default_factory=list)   # that exception's frames, outermost first
    frames: list[Frame] = field(default_factory=list)          # the local traceback's, outermost first
    namespace: dict = field(default_factory=dict)              # the learner's variables (a kernel's user_ns)
    cells: dict = field(default_factory=dict)                  # {cell file: execution count}

    def has(self, *classes: str) -> bool:
        return any(c in self.classes or any(k.startswith(c + ".") for k in self.classes) for c in classes)

    def worker_raised(self, exc_type: str, *functions: str) -> bool:
        """A Python worker (or the driver's Python proxy) raised ``exc_type`` inside one of pyspark's
        ``functions``."""
        return self.worker_type.rsplit(".", 1)[-1] == exc_type and any(
            f.function in functions for f in self.worker_frames)

    def where(self, frame: Frame | None, *, function: bool = False) -> str:
        """"cell In[4], line 3" (with ``function``: "(in `run`)" after it, unless at the cell's top level)."""
        if frame is None:
            return "your code"
        cell = self.cells.get(frame.file)
        if cell is not None:
            place = f"cell In[{cell}], line {frame.line}"
        elif _CELL_FILE.search(frame.file):
            place = f"a cell of yours, line {frame.line}"
        else:
            place = f"{frame.file}, line {frame.line}"
        return place + (f" (in `{frame.function}`)" if function and frame.function != "<module>" else "")

    def quoted(self, frame: Frame | None) -> str:
        """``where`` and the line itself, when the kernel still has its cell: "cell In[4], line 3, in init
        (`self.n = handle.getValueState("n", "n LONGG")`)"."""
        line = linecache.getline(frame.file, frame.line).strip() if frame else ""
        return f"{self.where(frame, function=True)}: `{line}`" if line else self.where(frame, function=True)

    def learners_frame(self, *, worker: bool = True) -> Frame | None:
        """The innermost frame of the learner's own code: in the worker's traceback first (where the
        error was raised), then in the local one (the cell that started it)."""
        for frames in ([self.worker_frames] if worker else []) + [self.frames]:
            mine = [f for f in frames if f.is_learners]
            if mine:
                return mine[-1]
        return None

    def cell_source(self) -> str:
        """The source of the learner's cells (or files) the error came through, as IPython keeps them."""
        files = dict.fromkeys(f.file for f in self.frames if f.is_learners)
        return "".join("".join(linecache.getlines(file)) for file in files)

    def processor_classes(self) -> list[tuple[str, type]]:
        """The learner's StatefulProcessor classes, those the failing cell names first (or only them,
        when it names any): the cell that ran the query says which processor it used."""
        found = [(name, value) for name, value in list(self.namespace.items())
                 if inspect.isclass(value) and any(b.__name__ == "StatefulProcessor" for b in value.__mro__[1:])]
        source = self.cell_source()
        named = [(n, v) for n, v in found if re.search(rf"\b{re.escape(n)}\b", source)]
        return named or found

    def processors(self, method: str, test: Callable = lambda f: True) -> list[str]:
        """``Class.method (where)`` of the learner's StatefulProcessor classes defining ``method`` that pass
        ``test``."""
        found = []
        for name, value in self.processor_classes():
            function = value.__dict__.get(method)
            if function is None or not test(function):
                continue
            found.append(f"`{name}.{method}` ({self.where(_frame_of(function))})")
        return found


@dataclass(frozen=True)
class Mistake:
    """One catalogued mistake: ``name`` (its anchor in docs/mistakes.md), how it is recognised
    (``matches``), and the learner's paragraph (``says``)."""

    name: str
    matches: Callable[[Evidence], bool]
    says: Callable[[Evidence], str]


def _frame_of(function) -> Frame | None:
    code = getattr(function, "__code__", None)
    return Frame(code.co_filename, code.co_firstlineno, code.co_name) if code else None


def condition_of(error) -> str | None:
    """A pyspark error's own condition (its error class), or None."""
    condition = getattr(error, "getCondition", None)
    try:
        return condition() if callable(condition) else None
    except Exception:  # some pyspark errors have no condition
        return None


def _chain(error: BaseException):
    seen = []
    while error is not None and error not in seen and len(seen) < 10:
        seen.append(error)
        error = error.__cause__ or error.__context__
    return seen


def _text(error: BaseException) -> str:
    parts = [str(error)]
    for name in ("desc", "stackTrace"):  # pyspark's captured exceptions keep Spark's message here too
        value = getattr(error, name, None)
        if isinstance(value, str):
            parts.append(value)
    return "\n".join(parts)


def _java_causes(error: BaseException) -> list[tuple[str, str]]:
    """(Java class, message) of the JVM exception behind a pyspark error and each of its causes: a Python
    worker that crashed while it started puts its traceback only there."""
    found, origin = [], getattr(error, "_origin", None)
    try:
        while origin is not None and len(found) < 8:
            found.append((str(origin.getClass().getName()), str(origin.getMessage() or "")))
            origin = origin.getCause()
    except Exception:  # the JVM is gone, or this is not a Java object
        pass
    return found


def gather(error: BaseException, namespace: dict | None = None, cells: dict | None = None) -> Evidence:
    """Read ``error`` (and the exceptions chained to it, and any a course's runner attached) once."""
    chain = _chain(error)
    extra = getattr(error, "streamlab_batch_error", None)  # what the batch function raised (lessons.runs)
    if isinstance(extra, BaseException):
        chain += [e for e in _chain(extra) if e not in chain]
    classes, types, texts = [], [], []
    for exc in chain:
        java = _java_causes(exc)
        types += [name.rsplit(".", 1)[-1].split("$")[-1] for name, _ in java]
        texts.append("\n".join([_text(exc)] + [message for _, message in java]))
        name = condition_of(exc)
        for found in ([name] if name else []) + SPARK_ERROR_CLASS.findall(texts[-1]):
            if found != "STREAM_FAILED" and found not in classes:
                classes.append(found)
        types += [t.__name__ for t in type(exc).__mro__ if t.__name__ not in types]
    evidence = Evidence(error, classes, types, texts, namespace=namespace or {}, cells=cells or {})
    # The innermost Python traceback quoted in a message: an exception in a Python worker or proxy
    for text in reversed(texts):
        start = text.rfind("Traceback (most recent call last):")
        if start < 0:
            continue
        quoted = text[start:].splitlines()[1:]
        end = next((i for i, line in enumerate(quoted) if _LAST.match(line)), None)
        if end is None:
            continue
        frames = [Frame(m.group(1), int(m.group(2)), m.group(3)) for m in map(_FRAME.search, quoted[:end]) if m]
        last = _LAST.match(quoted[end])
        if frames and last:
            evidence.worker_type, evidence.worker_message = last.group(1), last.group(2)
            evidence.worker_frames = frames
            break
    for exc in chain:
        tb = exc.__traceback__
        frames = []
        while tb is not None:
            code = tb.tb_frame.f_code
            frames.append(Frame(code.co_filename, tb.tb_lineno, code.co_name))
            tb = tb.tb_next
        if frames:
            evidence.frames = frames
            break
    return evidence


def explain(error: BaseException, namespace: dict | None = None, cells: dict | None = None) -> str | None:
    """The learner's paragraph for ``error`` if it is a catalogued mistake, else None. ``namespace``:
    the learner's variables (to name their StatefulProcessor); ``cells``: {cell file: execution count}."""
    found = identify(error, namespace, cells)
    return found[1] if found else None


def identify(error: BaseException, namespace: dict | None = None, cells: dict | None = None):
    """(mistake name, paragraph) for a catalogued mistake, else None. Never raises."""
    try:
        evidence = gather(error, namespace, cells)
        for mistake in CATALOGUE:
            if mistake.matches(evidence):
                return mistake.name, f"{mistake.says(evidence)} (More: {DOCS}#{mistake.name.replace('_', '-')}.)"
    except Exception:  # an explanation must never hide the error it explains
        return None
    return None


def framed(paragraph: str, width: int = 100) -> list[str]:
    """The paragraph as the first lines of a traceback: a bold header, the text wrapped, the footer."""
    body = "\n".join(textwrap.fill(p, width, break_on_hyphens=False, break_long_words=False)
                     for p in paragraph.split("\n"))
    return [f"\x1b[1;31m{HEADER}:\x1b[0m\n{body}\n\x1b[2m{FOOTER}\x1b[0m\n"]


def learner_message(traceback: list[str] | None) -> str | None:
    """The paragraph ``show_first`` put in front of a traceback (an error output's), if any: what
    ``streamlab check`` and the feedback page show for the error."""
    first = (traceback or [""])[0] if traceback else ""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", first if isinstance(first, str) else "")
    if not plain.startswith(HEADER + ":"):
        return None
    body = plain[len(HEADER) + 1:].split(FOOTER)[0]
    return " ".join(body.split())


# ----------------------------------------------------------------------------- the kernel's hook

def show_first(shell, etype, value, tb, tb_offset=None):
    """IPython's custom exception handler: the learner's paragraph, then IPython's traceback unchanged
    (an unknown error: the traceback alone, as IPython shows it)."""
    if hasattr(value, "_render_traceback_"):
        stb = value._render_traceback_()
    else:
        stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    found = identify(value, shell.user_ns, getattr(shell.compile, "_filename_map", {}))  # {cell file: In[N]}
    if found:
        stb = framed(found[1]) + list(stb)
    shell._showtraceback(etype, value, stb)
    return stb


def install(shell=None) -> bool:
    """Install ``show_first`` in the running IPython (``import streamlab`` does). False outside IPython."""
    if shell is None:
        ipython = sys.modules.get("IPython")  # only where IPython already runs: a script never imports it
        shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    shell.set_custom_exc((Exception,), show_first)
    return True


# ----------------------------------------------------------------------------- the catalogue

def _not_generator(function) -> bool:
    return not inspect.isgeneratorfunction(function)


def _returns_nothing(e: Evidence, method: str) -> str:
    named = e.processors(method, _not_generator)
    who = " or ".join(named) if named else f"your StatefulProcessor's {method}"
    return (f"{who} returned nothing (None). Spark iterates over what a handler returns, and None is not a "
            f"list of rows. A handler that outputs rows yields them (`yield Row(...)`); one that outputs "
            f"nothing returns an empty iterator: end it with `return iter([])` (or `yield from ()`).")


CATALOGUE: list[Mistake] = []


def mistake(name: str, matches: Callable[[Evidence], bool]):
    def add(says):
        CATALOGUE.append(Mistake(name, matches, says))
        return says
    return add


def said_at_cell(name: str, matches: Callable[[Evidence], bool], text: str) -> None:
    """A mistake whose paragraph is the learner's cell and line (``_cell``), then ``text``."""
    CATALOGUE.append(Mistake(name, matches, lambda e: f"{_cell(e)} {text}"))


def _in(e: Evidence, *functions: str) -> bool:
    return any(f.function in functions for f in e.worker_frames)


def _cell(e: Evidence, frame: Frame | None = None) -> str:
    """"At cell In[13], line 1," (or "In your code,"): where a paragraph about the learner's cell starts."""
    frame = frame or e.learners_frame(worker=False)
    return f"At {e.where(frame, function=True)}," if frame else "In your code,"


# -- a StatefulProcessor's handlers (lessons 02, 02b, 06; labs 02, 06, 07)

@mistake("handler_returned_none", lambda e: e.worker_raised("TypeError", "convert_results")
         and not _in(e, "_handle_expired_timers") and "NoneType" in e.worker_message)
def _(e):
    return _returns_nothing(e, "handleInputRows")


@mistake("expired_timer_returned_none", lambda e: e.worker_raised("TypeError", "_handle_expired_timers"))
def _(e):
    return _returns_nothing(e, "handleExpiredTimer")


@mistake("handler_returned_not_rows", lambda e: e.worker_raised("AttributeError", "convert_results", "<listcomp>")
         and _in(e, "convert_results"))
def _(e):
    kind = e.worker_message.split("'")[1] if e.worker_message.count("'") >= 2 else "something else"
    named = e.processors("handleInputRows") + e.processors("handleExpiredTimer")
    who = " or ".join(named) if named else "your StatefulProcessor's handler"
    return (f"{who} output a {kind} where Spark expects a Row. Each output row is a "
            f"`pyspark.sql.Row` with the fields of `outputStructType`: `yield Row(path=..., count=...)`, "
            f"not a dict, a tuple or a list.")


@mistake("row_does_not_match_output_schema", lambda e: e.worker_type.endswith(("ArrowInvalid", "ArrowTypeError"))
         and _in(e, "convert_results"))
def _(e):
    named = e.processors("handleInputRows")
    who = " or ".join(named) if named else "your StatefulProcessor's handler"
    return (f"{who} output a row whose values do not fit `outputStructType`: {e.worker_message}. Give each "
            f"field the type the schema declares (an `INT` field takes a Python int, not a string), or change "
            f"the schema passed to transformWithState.")


@mistake("state_update_not_a_tuple", lambda e: e.worker_raised("TypeError", "_serialize_to_bytes")
         or (e.worker_type.endswith("TypeError") and _in(e, "update") and _in(e, "_serialize_to_bytes")))
def _(e):
    frame = e.learners_frame()
    return (f"At {e.quoted(frame)}, your processor stores a bare value in a state variable. "
            f"A value state holds a row of its schema, so `update` takes a tuple, even for one field: "
            f"`self.count.update((n,))`, not `update(n)`; and `get()` gives the tuple back (`self.count.get()[0]`).")


@mistake("timer_without_time_mode",
         lambda e: e.has("STATEFUL_PROCESSOR_CANNOT_PERFORM_OPERATION_WITH_INVALID_TIME_MODE"))
def _(e):
    return (f"{_cell(e, e.learners_frame())} your processor uses a timer, but the query runs with "
            f"`timeMode=\"None\"`, where there is no clock to fire one. Pass "
            f"`timeMode=\"ProcessingTime\"` (a timer on the wall clock) or "
            f"`timeMode=\"EventTime\"` (on the watermark, which needs `withWatermark`) to transformWithState.")


@mistake("ttl_outside_processing_time", lambda e: e.has("STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_TO_ASSIGN_TTL"))
def _(e):
    return (f"{_cell(e, e.learners_frame())} your processor gives a state variable a TTL, but TTL in Spark "
            f"counts processing time, and the query's timeMode is not \"ProcessingTime\". Run it with "
            f"`timeMode=\"ProcessingTime\"`, or expire the state yourself with an event-time timer (lesson 02b).")


_DECLARING = ("get_value_state", "get_list_state", "get_map_state", "getValueState", "getListState", "getMapState")


@mistake("state_variable_declared_twice", lambda e: e.has("STREAMING_PYTHON_RUNNER_INITIALIZATION_FAILURE")
         and _in(e, *_DECLARING) and bool(_probe_init(e, "twice")))
def _(e):
    return (f"{_probe_init(e, 'twice')}. Each `handle.getValueState(name, ...)`, `getListState` or "
            f"`getMapState` needs its own name: it is how the checkpoint (and the state reader's "
            f"`stateVarName`) finds that variable.")


@mistake("state_schema_unreadable", lambda e: e.has("STREAMING_PYTHON_RUNNER_INITIALIZATION_FAILURE")
         and e.has("UNSUPPORTED_DATATYPE", "PARSE_SYNTAX_ERROR", "PARSE_EMPTY_STATEMENT"))
def _(e):
    spark_says = next(c for c in e.classes if c.startswith(("UNSUPPORTED_DATATYPE", "PARSE_")))
    return (f"At {e.quoted(e.learners_frame())}, your processor declares a state variable with a schema "
            f"Spark cannot read ({spark_says}). A state variable's schema is a DDL string like `\"count LONG\"` or "
            f"`\"sum DOUBLE, n INT\"` (a name and a Spark type for each field), or a StructType.")


said_at_cell("tws_needs_rocksdb", lambda e: e.has("UNSUPPORTED_FEATURE.STORE_BACKEND_NOT_SUPPORTED_FOR_TWS"),
             "a query runs transformWithState on the default state store, which cannot hold its state "
             "variables. Start the session with `spark = sl.spark(state_store=\"rocksdb\")` before the query "
             "(lesson 03 compares the two stores).")


said_at_cell("initial_state_not_grouped", lambda e: "AssertionError" in e.types[:3] and any(
    f.function in ("transformWithState", "__transformWithState") and f.file.endswith("group_ops.py")
    for f in e.frames),
             "you pass `initialState=` a DataFrame that is not grouped. transformWithState takes the "
             "initial state grouped by the same key as the stream: `initialState=v0_counts.groupBy(\"path\")`, "
             "and your processor's `handleInitialState` receives each key's row.")


# -- queries and output modes (lessons 01, 06)

said_at_cell("append_needs_a_watermark", lambda e: e.has("STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION")
             and "watermark" in str(e.error).lower(),
             "the query asks for output mode \"append\" on an aggregation without a watermark. Append "
             "outputs a row once it can never change, and without a watermark a count can always change. "
             "Declare one before the aggregation (`.withWatermark(\"event_time\", \"10 seconds\")`), or use "
             "output mode \"update\" (lesson 06).")


said_at_cell("output_mode_not_supported", lambda e: e.has("STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION")
             or e.has("STREAMING_OUTPUT_MODE"),
             "the query asks for an output mode this query cannot give: \"complete\" needs an aggregation "
             "(it outputs the whole result table each batch), \"append\" an aggregation with a watermark. "
             "A query without an aggregation runs in \"append\"; an aggregation in \"update\" (lesson 01).")


said_at_cell("action_on_a_stream", lambda e: "AnalysisException" in e.types and e.has("_LEGACY_ERROR_TEMP_3102")
             or ("AnalysisException" in e.types and "writeStream.start()" in str(e.error)),
             "you call a batch action (`show`, `collect`, `count`, `toPandas`) on a streaming "
             "DataFrame, which has no end to wait for. Run it with `sl.run_to_end(frame)` and look at "
             "`.rows`, or read the topic as it is now with `sl.kafka_table(topic, schema)`.")


said_at_cell("watermark_on_a_non_timestamp", lambda e: e.has("EVENT_TIME_IS_NOT_ON_TIMESTAMP_TYPE"),
             "you declare a watermark on a column that is not a timestamp. `withWatermark` takes a "
             "TIMESTAMP column (the events' `event_time`); convert epoch milliseconds first with "
             "`F.timestamp_millis(\"event_ms\")`.")


said_at_cell("column_not_found", lambda e: e.has("UNRESOLVED_COLUMN"),
             "you name a column the DataFrame does not have. Look at `frame.columns` (a Kafka "
             "stream read with `sl.kafka_stream(topic, schema)` has the schema's fields plus `partition` and "
             "`offset`); Spark's error below suggests the nearest names.")


@mistake("foreach_batch_function_failed", lambda e: e.has("FOREACH_BATCH_USER_FUNCTION_ERROR")
         and e.learners_frame() is not None and e.learners_frame() in e.worker_frames)
def _(e):
    frame = e.learners_frame()
    return (f"Your function `{frame.function}` ({e.where(frame)}) raised {e.worker_type or 'an error'}"
            f"{': ' + e.worker_message if e.worker_message else ''}, in a micro-batch. The query stopped there "
            f"and committed nothing for that batch: fix the function and run the cell again (the checkpoint "
            f"restarts from the batch that failed).")


# -- checkpoints and state (lessons 03, 04, 07, 07b)

said_at_cell("changed_key_on_a_checkpoint", lambda e: e.has("STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE"),
             "a query restarts on a checkpoint whose state is keyed differently: the grouping "
             "key (its columns or their types) changed since the checkpoint was written. State is found by "
             "key, so Spark refuses. Keep the key, or start from a new checkpoint (`sl.new_checkpoint(...)`); "
             "lesson 07 shows which changes a checkpoint survives.")


said_at_cell("changed_state_on_a_checkpoint", lambda e: e.has("STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"),
             "a query restarts on a checkpoint whose stored state has another shape: an "
             "aggregation or a state variable's schema changed (a field added, removed or narrowed) since the "
             "checkpoint was written. Put the old schema back, or start from a new checkpoint; lesson 07 shows "
             "the changes Spark accepts (a wider type, with schema evolution).")


said_at_cell("checkpoint_of_another_query", lambda e: e.has("STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA")
             or e.has("STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY"),
             "a query starts on a checkpoint another query wrote: its stateful operators (the "
             "aggregations, deduplications, transformWithState) are not the ones recorded there. One "
             "checkpoint belongs to one query: give this one its own, `sl.new_checkpoint(\"a-new-name\")`.")


_CHECKSUM_ERROR = re.compile(r"Checksum error: (?:file:)?(\S+?) at \d+")


@mistake("checkpoint_file_edited", lambda e: "ChecksumException" in e.types)
def _(e):
    found = next((m.group(1) for m in map(_CHECKSUM_ERROR.search, e.texts) if m), "")
    edited = "/".join(found.split("/")[-2:]) if found else "a file of it"
    crc = f"`.{found.rsplit('/', 1)[-1]}.crc`" if found else "its `.crc` file"
    return (f"{_cell(e)} a query reads a checkpoint whose file {edited} was changed after Spark wrote it (by "
            f"hand, or by code that opened it for writing). Hadoop keeps a checksum of each checkpoint file "
            f"beside it, {crc} in the same folder, and refuses a file that no longer matches. A checkpoint is "
            f"Spark's to write: to read from other offsets, start a new checkpoint with `startingOffsets` "
            f"(lesson 05); to start from changed state, read it with the state reader and write a new one "
            f"(lesson 07). A file you did change is read again once you delete the {crc} beside it.")


said_at_cell("state_reader_wrong_operator", lambda e: e.has(
    "STDS_FAILED_TO_READ_STATE_SCHEMA", "STDS_OFFSET_LOG_UNAVAILABLE", "STDS_NO_PARTITION_DISCOVERED_IN_STATE_STORE"),
             "you read state the checkpoint does not have: no stateful operator with that "
             "`operatorId` (they count from 0 in the query's plan), or no batch committed yet. "
             "`ckpt.state_metadata()` lists the operators and their stores; run the query to a committed batch first.")


said_at_cell("state_reader_wrong_option", lambda e: e.has(
    "STDS_INVALID_OPTION_VALUE", "STDS_INVALID_OPTION", "STDS_CONFLICT_OPTIONS", "STDS_REQUIRED_OPTION_UNSPECIFIED"),
             "you read state with an option this checkpoint does not answer to: `stateVarName` "
             "works only for a transformWithState operator and must name one of its variables; `storeName` "
             "only for a join's stores. Spark's message below names the option.")


# -- Kafka (lessons 00, 05)

said_at_cell("starting_offsets_missing_partition", lambda e: "AssertionError" in e.types and any(
    "startingOffsets" in m for m in [str(e.error)]) and "StreamingQueryException" in e.types,
             "you give `startingOffsets` as JSON that leaves out a partition of the topic. With "
             "specific offsets, every partition needs one: -2 means earliest, -1 latest "
             "(`sl.end_offsets(topic)` lists the partitions).")


said_at_cell("topic_does_not_exist", lambda e: "UnknownTopicOrPartitionException" in e.types
             or "TopicNotFoundError" in e.types,
             "a query reads a topic the broker does not have. Make it with `topic = sl.new_topic(\"name\")` "
             "(which adds a unique suffix) and use that variable, not the name typed again; `sl.list_topics()` "
             "shows what exists.")


said_at_cell("kafka_servers_missing", lambda e: "IllegalArgumentException" in e.types
             and "kafka.bootstrap.servers" in str(e.error),
             "a query reads Kafka without saying where the broker is. Use `sl.kafka_stream(topic, schema)`, "
             "or add `.option(\"kafka.bootstrap.servers\", sl.bootstrap_servers())`.")


said_at_cell("broker_not_running", lambda e: "NoBrokerError" in e.types or "NoBrokersAvailable" in e.types,
             "the course could not reach its Kafka broker: it is not running (stopped, or the "
             "machine restarted). Run the setup cell again (`sl.bootstrap_servers()` starts it), or `streamlab doctor` "
             "in a terminal to see why it does not start.")


# -- the environment

said_at_cell("no_java", lambda e: "JavaError" in e.types or e.has("JAVA_GATEWAY_EXITED"),
             "Spark was to start, and it needs Java 17: none was found. Install a JDK 17 (the message "
             "below says how for this system), then restart the kernel.")


def _spark_stopped(e: Evidence) -> bool:
    if not any(t in e.types for t in ("AttributeError", "IllegalStateException")):
        return False
    context = getattr(sys.modules.get("pyspark"), "SparkContext", None)
    return context is not None and context._active_spark_context is None and any(
        "/pyspark/" in f.file for f in e.frames)


said_at_cell("spark_stopped", _spark_stopped,
             "you use a Spark session that was stopped (`spark.stop()`). Get a new one with "
             "`spark = sl.spark()` and build the DataFrame again.")


# ----------------------------------------------------------------------------- the processor's init, tried

def _probe_init(e: Evidence, what: str) -> str:
    """When a transformWithState query's Python worker crashed while it started (Spark keeps the cause in
    its log), try each of the learner's StatefulProcessor ``init`` methods with a handle that only records
    what they declare. ``what``: "twice", a state variable name declared twice (the worker's own words are
    only in its message). The sentence that says so, naming the method, or "" if none or another error."""
    if "StreamingPythonRunnerInitializationException" not in e.types and "driver worker" not in str(e.error):
        return ""
    for name, value in e.processor_classes():
        init = value.__dict__.get("init")
        if init is None:
            continue
        handle = _RecordingHandle()
        try:
            init(object.__new__(value), handle)
        except Exception:  # the learner's init needs more than the handle: nothing to say about it
            continue
        where = f"`{name}.init` ({e.where(_frame_of(init))})"
        if what == "twice" and handle.twice:
            return f"{where} declares the state variable {handle.twice!r} twice"
    return ""


class _RecordingHandle:
    """A StatefulProcessorHandle that records the state variables an ``init`` declares."""

    def __init__(self):
        self.schemas: list[tuple[str, object]] = []
        self.twice = ""

    def _declare(self, name, *schemas):
        if any(name == seen for seen, _ in self.schemas):
            self.twice = self.twice or name
        self.schemas += [(name, s) for s in schemas]
        return None

    def getValueState(self, name, schema, ttlDurationMs=None):  # noqa: N802 - pyspark's API
        return self._declare(name, schema)

    def getListState(self, name, schema, ttlDurationMs=None):  # noqa: N802
        return self._declare(name, schema)

    def getMapState(self, name, userKeySchema, valueSchema, ttlDurationMs=None):  # noqa: N802
        return self._declare(name, userKeySchema, valueSchema)

    def __getattr__(self, name):  # registerTimer, listTimers...: not what init is tried for
        return lambda *args, **kwargs: None
