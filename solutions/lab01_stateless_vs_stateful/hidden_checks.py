"""Lab 01's hidden checks: run by the grader in its own process, after the notebook ran.

Never released to students (see streamlab/grading/hidden_checks.py). Each check reads what a part's
locked cells left behind — checkpoints and topics named ``lab01-...`` — and compares it with
values computed here from the lab's seeded inputs.
"""
import numbers

from streamlab.grading.hidden_checks import CheckFailed, check
from streamlab.lessons import events

ALERT_COLUMNS = ["consumer", "partition", "producer_offset", "consumer_offset", "lag", "alert"]
NEEDS_STATE = {"stuck", "max lag", "first report"}
FIRST_FOUR = events.article_requests() + [{"method": "PUT", "path": "/api/a", "ts": "2026-01-01T09:00:03Z"}]


def _reports() -> list[dict]:
    reports = events.offset_reports(40, seed=7)
    reports += [{**r, "consumer_offset": r["producer_offset"] + 3} for r in reports[::8]]
    return reports + [{**reports[5], "producer_offset": reports[5]["consumer_offset"] + lag} for lag in (24, 25)]


def _alert(lag: int) -> str:
    return "bad report" if lag < 0 else "behind" if lag >= 25 else "ok"


def _expected_alerts(reports) -> list[tuple]:
    return sorted((r["consumer"], r["partition"], r["producer_offset"], r["consumer_offset"],
                   r["producer_offset"] - r["consumer_offset"], _alert(r["producer_offset"] - r["consumer_offset"]))
                  for r in reports)


def _require_input(run, topic: str, sent: list[dict]) -> None:
    """The part's input topic holds exactly what its locked cell sends: nothing swapped in the kernel."""
    got = [r["value"] for r in run.records(topic, limit=10 * len(sent))]
    if sorted(map(repr, got)) != sorted(map(repr, sent)):
        raise CheckFailed(f"topic {topic!r} holds {len(got)} records, not the {len(sent)} its cell sends: the cell "
                          "stopped early (see its error) or sent something else")


def _alert_part(run, name: str, input_topic: str, reports: list[dict]) -> None:
    ckpt = run.checkpoint(name)
    run.require_reached_end(ckpt, input_topic)
    if any(f.startswith("state/") for f in ckpt.files()):
        raise CheckFailed("the alert query keeps state: these alerts are decided from each report alone")
    out = run.output(f"{name}-out")
    missing = [c for c in ALERT_COLUMNS if c not in out.columns]
    if missing:
        raise CheckFailed(f"the alert query's output has no column(s) {missing}")
    got = sorted(tuple(v if isinstance(v, str) else int(v) for v in row)
                 for row in out[ALERT_COLUMNS].itertuples(index=False))
    assert got == _expected_alerts(reports), \
        "the alerts do not match: lag = producer_offset - consumer_offset; bad report below 0, behind from 25"


@check("test_alerts")
def alerts(run):
    reports = _reports()
    _require_input(run, "lab01-reports", reports)
    ckpt = run.checkpoint("lab01-alerts")
    if len(ckpt.commits()) < 2:
        raise CheckFailed("the in-order run should take several micro-batches (5 reports each)")
    _alert_part(run, "lab01-alerts", "lab01-reports", reports)


@check("test_alerts_any_order")
def alerts_any_order(run):
    reports = _reports()[::-1]
    _require_input(run, "lab01-reports-reversed", reports)
    _alert_part(run, "lab01-alerts-reversed", "lab01-reports-reversed", reports)


@check("test_needs_state")
def needs_state(run):
    answers = run.records("lab01-needs-state", limit=10)
    if len(answers) != 1 or not isinstance(answers[0]["value"], dict) \
            or not isinstance(answers[0]["value"].get("needs_state"), list):
        raise CheckFailed("the answer of alerts_needing_state() did not reach the grader: run Part A's cells once")
    assert set(answers[0]["value"]["needs_state"]) == NEEDS_STATE, \
        "not the alerts that need state: which ones depend on reports received before?"


def _methods(requests) -> dict[str, int]:
    paths = {r["path"] for r in requests}
    return {p: len({r["method"] for r in requests if r["path"] == p}) for p in paths}


def _latest(rows, key="path"):
    """{path: the latest count} from output rows with a path and one count column."""
    values = [c for c in rows.columns if c not in (key, "batch_id")]
    if key not in rows.columns or len(values) != 1:
        raise CheckFailed(f"expected output rows with `{key}` and one count column, got {list(rows.columns)}")
    ordered = rows.sort_values("batch_id", kind="stable")
    try:
        return {p: int(c) for p, c in zip(ordered[key], ordered[values[0]])}
    except (TypeError, ValueError):
        raise CheckFailed(f"the count column {values[0]!r} should hold whole numbers") from None


def _stateful_operators(ckpt) -> list[int]:
    """The ids of the operators that keep state in ``ckpt`` (its ``state/<id>/`` folders)."""
    return sorted({int(f.split("/")[1]) for f in ckpt.files() if f.startswith("state/") and f.split("/")[1].isdigit()})


def _path_keyed_store(run, ckpt, operators: list[int]):
    """(operator, state table) of the last of ``operators`` whose state is keyed by path alone (a count, a set of
    methods or nothing per path, never a key of path and method); None when none is."""
    for operator in reversed(operators):
        table = ckpt.state_table(run.spark(), operatorId=operator)
        if "path" in table.columns and "method" not in table.columns:
            return operator, table
    return None


def _paths_in_state(run, ckpt, title: str, read_by_batch: dict[int, list]) -> list[str]:
    """The keys of the state store keyed by path alone (the count, or the set of methods, per path), after drawing
    that store after each batch beside the methods per path of what the batch had read (``read_by_batch``)."""
    operators = _stateful_operators(ckpt)
    if not operators:
        raise CheckFailed("the query keeps no state: how would it know which methods a path has seen?")
    if len(operators) > 3:
        raise CheckFailed(f"the query has {len(operators)} stateful operators; one or two are enough")
    found = _path_keyed_store(run, ckpt, operators)
    if found is None:
        raise CheckFailed("no state store is keyed by path: the answer per path should live in state keyed by path")
    operator, table = found
    run.trace_state(title, ckpt, {b: _methods(read) for b, read in read_by_batch.items()},
                    _methods_held, operatorId=operator)
    return list(table["path"])


def _methods_held(table) -> dict:
    """{path: how many methods} of the state keyed by path: a count as it is, a set (or list) of methods by its
    size, anything else as it is (it then differs from the reference's number)."""
    values = [c for c in table.columns if c not in ("path", "partition_id")]
    held = {}
    for path, *value in zip(table["path"], *(table[c] for c in values)):
        one = value[0] if len(value) == 1 else tuple(value)
        if isinstance(one, numbers.Integral):
            held[path] = int(one)
        elif hasattr(one, "__len__") and not isinstance(one, str | tuple):
            held[path] = len(set(one))
        else:
            held[path] = one
    return held


@check("test_methods_steps", "test_methods_state")
def methods(run):
    more = events.access_log(60, seed=11)
    ckpt = run.checkpoint("lab01-requests")   # first: a checkpoint made to break the reader is refused here
    _require_input(run, "lab01-requests", FIRST_FOUR + more)
    run.require_reached_end(ckpt, "lab01-requests")
    paths = _paths_in_state(run, ckpt, "Part B, the methods per path your state holds",
                            run.inputs_by_batch(ckpt, "lab01-requests"))
    read = ckpt.offsets().groupby("batch")["offset"].sum()
    ends = {int(total): int(batch) for batch, total in read.items()}   # the last batch ending after n records
    if any(n not in ends for n in (1, 2, 3, 4)):
        raise CheckFailed("the first four requests should each have their own micro-batch")
    out = run.output("lab01-requests-out")
    after_each = [_latest(out[out["batch_id"] <= ends[n]]) if len(out) else {} for n in (1, 2, 3, 4)]
    assert after_each == [{"/api/a": 1}, {"/api/a": 1, "/api/b": 1}, {"/api/a": 1, "/api/b": 1},
                          {"/api/a": 2, "/api/b": 1}], \
        "after GET /api/a, POST /api/b, GET /api/a, PUT /api/a the counts should be a=1; a=1 b=1; the same; a=2 b=1"
    expected = _methods(FIRST_FOUR + more)
    assert _latest(out) == expected, "the latest counts in the output are not the methods of each path"
    assert sorted(paths) == sorted(expected), "the state keyed by path should hold one row per path"
    last = out[out["batch_id"] == out["batch_id"].max()]
    assert set(last["path"]) <= {r["path"] for r in more}, "update mode outputs only the paths that changed"


def _paths_seen_in_state(run, ckpt, read_by_batch: dict[int, list]) -> set[str] | None:
    """The paths the query's state keyed by path alone holds, after drawing it after each batch beside the paths
    the batches had read (None: no store is keyed by path alone, say a state that keys by path and method)."""
    operators = _stateful_operators(ckpt)
    if not operators:
        raise CheckFailed("the query keeps no state: after the restart, how would it know which paths it has seen?")
    found = _path_keyed_store(run, ckpt, operators)
    if found is None:
        return None
    operator, table = found
    run.trace_state("Part C, the paths your state holds, over both runs", ckpt,
                    {b: dict.fromkeys({r["path"] for r in read}, "seen") for b, read in read_by_batch.items()},
                    lambda held: dict.fromkeys(held["path"], "seen"), operatorId=operator)
    return set(table["path"])


def _alerts(answer: dict, run_name: str) -> list[str]:
    paths = answer.get(run_name)
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise CheckFailed(f"the {run_name} run's alerts should be a list of paths (a `path` column of strings)")
    return paths


@check("test_restart_totals", "test_restart_checkpoint")
def restart(run):
    first = events.access_log(50, seed=3)
    second = events.access_log(30, seed=4, endpoints=[("DELETE", "/api/a"), ("GET", "/api/d")])
    ckpt = run.checkpoint("lab01-restart")
    _require_input(run, "lab01-requests-restart", first + second)
    run.require_reached_end(ckpt, "lab01-requests-restart")
    read = ckpt.offsets().groupby("batch")["offset"].sum()
    committed = set(ckpt.commits()["batch"])
    if not any(total == len(first) and batch in committed for batch, total in read.items()):
        raise CheckFailed("no committed batch ends where the first run should have stopped "
                          f"({len(first)} records): the query did not run twice on one checkpoint")
    known = {r["path"] for r in first}
    every = known | {r["path"] for r in second}
    held = _paths_seen_in_state(run, ckpt, run.inputs_by_batch(ckpt, "lab01-requests-restart"))
    if held is not None:
        assert held == every, "after the restart the state keyed by path should hold every path of both runs"
    answers = run.records("lab01-restart-answer", limit=10)
    if len(answers) != 1 or not isinstance(answers[0]["value"], dict):
        raise CheckFailed("the runs' alerts did not reach the grader: run Part C's cells once, top to bottom")
    first_alerts, restart_alerts = _alerts(answers[0]["value"], "first"), _alerts(answers[0]["value"], "restart")
    assert sorted(first_alerts) == sorted(known), "the first run should alert once on each path it read"
    # the restart reads DELETE /api/a (a known path: no alert) and GET /api/d (never seen: one alert)
    assert sorted(restart_alerts) == sorted(every - known), \
        "after the restart only the paths never seen before should alert, once each"
