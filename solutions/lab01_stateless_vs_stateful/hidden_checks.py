"""Lab 01's hidden checks: run by the grader in its own process, after the notebook ran.

Never released to students (see streamlab/grading/hidden_checks.py). Each check reads what a part's
locked cells left behind — checkpoints and topics named ``lab01-...`` — and compares it with
values computed here from the lab's seeded inputs.
"""
from collections import Counter

from streamlab.grading.hidden_checks import CheckFailed, check
from streamlab.lessons import events

LAG_COLUMNS = ["consumer", "partition", "producer_offset", "consumer_offset", "lag"]


def _lags(report_list):
    return sorted((r["consumer"], r["partition"], r["producer_offset"], r["consumer_offset"],
                   r["producer_offset"] - r["consumer_offset"]) for r in report_list)


def _lag_part(run, name, input_topic, reports):
    ckpt = run.checkpoint(name)
    run.require_reached_end(ckpt, input_topic)
    if any(f.startswith("state/") for f in ckpt.files()):
        raise CheckFailed("the lag query keeps state: consumer lag is a stateless projection")
    out = run.output(f"{name}-out")
    missing = [c for c in LAG_COLUMNS if c not in out.columns]
    if missing:
        raise CheckFailed(f"the lag query's output has no column(s) {missing}")
    got = sorted(tuple(int(v) if not isinstance(v, str) else v for v in row)
                 for row in out[LAG_COLUMNS].itertuples(index=False))
    assert got == _lags(reports), "the lag query's output does not match lag = producer_offset - consumer_offset"


@check("test_lag_article")
def lag_article(run):
    _lag_part(run, "lab01-lag-article", "lab01-article-reports", events.article_offset_reports())


@check("test_lag_stateless")
def lag_stateless(run):
    reports = events.offset_reports(40, seed=7)
    _lag_part(run, "lab01-lag-twice", "lab01-reports-twice", reports + reports)


def _latest(rows, key="path"):
    """{path: the latest count} from output rows with a path and one count column."""
    values = [c for c in rows.columns if c not in (key, "batch_id")]
    if key not in rows.columns or len(values) != 1:
        raise CheckFailed(f"expected output rows with `{key}` and one count column, got {list(rows.columns)}")
    ordered = rows.sort_values("batch_id", kind="stable")
    return {p: int(c) for p, c in zip(ordered[key], ordered[values[0]])}


def _state_counts(run, ckpt):
    state = ckpt.state_table(run.spark())
    values = [c for c in state.columns if c not in ("path", "partition_id")]
    if "path" not in state.columns or len(values) != 1:
        raise CheckFailed(f"expected state keyed by path with one count, got columns {list(state.columns)}")
    if state["path"].duplicated().any():
        raise CheckFailed("the state store should hold one row per path")
    return {p: int(c) for p, c in zip(state["path"], state[values[0]])}


@check("test_counts_article", "test_counts_state")
def counts(run):
    ckpt = run.checkpoint("lab01-requests")
    run.require_reached_end(ckpt, "lab01-requests")
    operators = {f.split("/")[1] for f in ckpt.files() if f.startswith("state/")}
    assert operators == {"0"}, f"counting should use one stateful operator; the checkpoint holds {len(operators)}"
    out = run.output("lab01-requests-out")
    first_batches = sorted(out["batch_id"].unique())[:3]
    per_batch = [_latest(out[out["batch_id"] == b]) for b in first_batches]
    assert per_batch == [{"/api/a": 1}, {"/api/b": 1}, {"/api/a": 2}], \
        "the first three micro-batches should output /api/a=1, /api/b=1, /api/a=2"
    more = events.access_log(60, seed=11)
    expected = dict(Counter(r["path"] for r in events.article_requests() + more))
    assert _latest(out) == expected, "the latest counts in the output are not the counts of all requests"
    assert _state_counts(run, ckpt) == expected, "the state store does not hold the counts of all requests"
    last = out[out["batch_id"] == out["batch_id"].max()]
    assert set(last["path"]) <= {r["path"] for r in more}, "update mode outputs only the paths that changed"


@check("test_restart_totals", "test_restart_checkpoint")
def restart(run):
    first = events.access_log(50, seed=3)
    second = events.access_log(30, seed=4, endpoints=[("GET", "/api/a"), ("GET", "/api/d")])
    ckpt = run.checkpoint("lab01-restart")
    run.require_reached_end(ckpt, "lab01-requests-restart")
    offsets = ckpt.offsets()
    read = offsets.groupby("batch")["offset"].sum()
    committed = set(ckpt.commits()["batch"])
    first_run = [batch for batch, total in read.items() if total == len(first) and batch in committed]
    if not first_run:
        raise CheckFailed("no committed batch ends where the first run should have stopped "
                          f"({len(first)} records): the query did not run twice on one checkpoint")
    expected = dict(Counter(r["path"] for r in first + second))
    assert _state_counts(run, ckpt) == expected, "after the restart the state store should hold the totals of both runs"
    # what the restart output (run_counts' rows, handed out by Part C's locked cell): the paths of the records
    # it read, the ones after the first run's end in the topic, with the totals of both runs
    stop = offsets[offsets["batch"] == max(first_run)]
    stop = {int(p): int(o) for p, o in zip(stop["partition"], stop["offset"])}
    changed = {r["value"]["path"] for r in run.records("lab01-requests-restart")
               if r["offset"] >= stop.get(r["partition"], 0) and isinstance(r["value"], dict)}
    answers = run.records("lab01-restart-answer", limit=10)
    if len(answers) != 1 or not isinstance(answers[0]["value"], dict) \
            or not isinstance(answers[0]["value"].get("latest"), dict):
        raise CheckFailed("the restart's output did not reach the grader: run Part C's cells once, top to bottom")
    try:
        latest = {path: int(n) for path, n in answers[0]["value"]["latest"].items()}
    except (TypeError, ValueError):
        raise CheckFailed("the restart's output should count requests per path in whole numbers") from None
    assert set(latest) == changed, "the restart should read only the new records and output only the paths they changed"
    assert latest == {p: expected[p] for p in changed}, "the restart's counts should carry on from the first run's"
