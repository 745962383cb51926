"""Lab 03's hidden checks: run by the grader in its own process, after the notebook ran.

Never released to students (see streamlab/grading/hidden_checks.py). Each check reads what a part's
locked cells left behind — checkpoints and topics named ``lab03-...`` — and compares it with
values computed here: the expected counts from the lab's deterministic input, the provider and
the bytes from the checkpoint files themselves.
"""
from collections import Counter
from pathlib import Path

from streamlab.grading.hidden_checks import CheckFailed, check, committed_offsets
from streamlab.lessons.m03_state_backends import provider_of, state_files

FIRST_RUN = list(range(0, 1500)) + list(range(500, 2000))  # the setup cell's two produce_new_keys
RESTART = list(range(2000, 3000))                           # part C's new users


def _expected(seqs) -> dict:
    return dict(Counter(f"u{i:07d}" for i in seqs))


def _latest(rows) -> dict:
    for column in ("user", "count", "batch_id"):
        if column not in rows.columns:
            raise CheckFailed(f"the query's output has no `{column}` column: {list(rows.columns)}")
    ordered = rows.sort_values("batch_id", kind="stable")
    return {u: int(c) for u, c in zip(ordered["user"], ordered["count"])}


def _state_counts(run, ckpt) -> dict:
    state = ckpt.state_table(run.spark())
    if "user" not in state.columns or "count" not in state.columns:
        raise CheckFailed(f"expected state keyed by user with a count, got columns {list(state.columns)}")
    return {u: int(c) for u, c in zip(state["user"], state["count"])}


def _answer(run, name) -> dict:
    records = run.records(name, limit=10)
    if len(records) != 1 or not isinstance(records[0]["value"], dict):
        raise CheckFailed(f"the topic {name!r} should hold exactly one answer record: "
                          "run the part's cells once")
    return records[0]["value"]


def _versioned_bytes(ckpt, kind) -> dict:
    """{batch: bytes of the <batch+1>.<kind> files over every state partition}, from the files."""
    totals: dict[int, int] = {}
    for path in Path(ckpt.path, "state").glob("*/*/*"):
        stem, _, suffix = path.name.partition(".")
        if suffix == kind and stem.isdigit():
            totals[int(stem) - 1] = totals.get(int(stem) - 1, 0) + path.stat().st_size
    return totals


def _committed(ckpt) -> list[int]:
    return [int(b) for b in ckpt.commits()["batch"]]


def _first_run_batches(ckpt) -> list[int]:
    """The committed batches that read only the setup cell's 3 000 visits (before part C's restart)."""
    offsets = ckpt.offsets()
    read = offsets.groupby("batch")["offset"].sum()
    return [b for b in _committed(ckpt) if b in read.index and int(read[b]) <= len(FIRST_RUN)]


def _changelog_checkpoint(run):
    """Part A's checkpoint, proven to be the RocksDB + changelog query over the setup cell's visits."""
    ckpt = run.checkpoint("lab03-changelog")
    topic = run.topic("lab03-users")
    if committed_offsets(ckpt, topic) != {0: 1500, 1: 1500}:
        raise CheckFailed("part A's query did not read the 3 000 visits of the setup cell to the end")
    provider = provider_of(ckpt)
    assert provider == "rocksdb", f"part A's checkpoint was created with the {provider} provider, not RocksDB"
    files = state_files(ckpt)
    files = files[files["operator"] == 0]
    assert "delta" not in set(files["kind"]), "part A's checkpoint holds .delta files"
    logs = files[files["kind"] == "changelog"]
    batches = _committed(ckpt)
    for partition in (0, 1):
        versions = sorted(int(v) for v in logs.loc[logs["partition"] == partition, "version"])
        assert versions == [b + 1 for b in batches], \
            "part A's checkpoint does not hold one .changelog per batch: changelog checkpointing was off"
    return ckpt, files, batches


def _true_plan(files, batch) -> dict[int, list[str]]:
    """{partition: files to read}: the latest snapshot at or before version batch + 1, then the changelogs after it."""
    version = batch + 1
    plan = {}
    for partition, mine in files.groupby("partition"):
        mine = mine[mine["version"].notna() & (mine["version"] <= version)]
        zips = sorted(int(v) for v in mine.loc[mine["kind"] == "zip", "version"])
        base = zips[-1] if zips else 0
        logs = sorted(int(v) for v in mine.loc[mine["kind"] == "changelog", "version"] if v > base)
        plan[int(partition)] = ([f"{base}.zip"] if zips else []) + [f"{v}.changelog" for v in logs]
    return plan


def _given_plans(run) -> tuple[dict[int, dict[int, list[str]]], float]:
    """The plans part A's cell sent, and when it sent them (the record's Kafka timestamp, in seconds)."""
    records = run.records("lab03-restore-answer", limit=10)
    if len(records) != 1 or not isinstance(records[0]["value"], dict):
        raise CheckFailed("the topic 'lab03-restore-answer' should hold exactly one answer record: "
                          "run the part's cells once")
    plans = records[0]["value"].get("plans")
    if not isinstance(plans, dict):
        raise CheckFailed("no restore_plan results: run part A's cells once")
    try:
        given = {int(b): {int(p): [str(n) for n in names] for p, names in plan.items()} for b, plan in plans.items()}
    except (TypeError, ValueError, AttributeError):
        raise CheckFailed("restore_plan must return {partition: [file names]}") from None
    return given, records[0]["timestamp"] / 1000


def _seen_at(ckpt, files, sent):
    """The files as they were when the answer was sent: background maintenance may upload a snapshot
    (a .zip) after the query stopped, later than the student's function looked."""
    zips = files["kind"] == "zip"
    later = files["file"].map(lambda f: Path(ckpt.path, f).stat().st_mtime > sent)
    return files[~(zips & later)]


def _plan_matches(run, files, given, batch):
    truth = _true_plan(files, batch)
    got = given.get(batch)
    assert got is not None, f"no restore_plan for batch {batch}"
    for partition, names in truth.items():
        assert got.get(partition) == names, \
            f"restore_plan is wrong for batch {batch}, state partition {partition}"
    assert sorted(got) == sorted(truth), f"restore_plan for batch {batch} names partitions that do not exist"


@check("test_restore_last")
def restore_last(run):
    ckpt, files, batches = _changelog_checkpoint(run)
    expected = _expected(FIRST_RUN)
    assert _state_counts(run, ckpt) == expected, "part A's state store does not hold the counts per user"
    given, sent = _given_plans(run)
    _plan_matches(run, _seen_at(ckpt, files, sent), given, batches[-1])


@check("test_restore_every")
def restore_every(run):
    ckpt, files, batches = _changelog_checkpoint(run)
    output = run.output("lab03-changelog-out")
    assert _latest(output) == _expected(FIRST_RUN), "part A's query output wrong counts"
    given, sent = _given_plans(run)
    files = _seen_at(ckpt, files, sent)
    assert sorted(given) == batches, f"expected a restore_plan for each committed batch {batches}"
    for batch in batches:
        _plan_matches(run, files, given, batch)
        state = ckpt.state_table(run.spark(), batchId=batch)  # what a restore as of this batch rebuilds
        assert {u: int(c) for u, c in zip(state["user"], state["count"])} == \
            _latest(output[output["batch_id"] <= batch]), f"the state as of batch {batch} does not match the output"


def _bytes_part(run, which, ckpt, kind):
    answer = _answer(run, "lab03-bytes-answer")
    given = answer.get(which)
    if not isinstance(given, dict):
        raise CheckFailed(f"no {which} result from bytes_per_batch")
    expected = _versioned_bytes(ckpt, kind)
    if not expected:
        raise CheckFailed(f"the {which} checkpoint holds no .{kind} files")
    batches = _first_run_batches(ckpt)
    expected = {b: n for b, n in expected.items() if b in batches}  # part C later restarts the HDFS one
    assert sorted(expected) == batches, f"the {which} checkpoint's .{kind} files do not match its committed batches"
    try:
        got = {int(b): int(n) for b, n in given.items()}
    except (TypeError, ValueError):
        raise CheckFailed(f"bytes_per_batch({which}) is not a {{batch: bytes}} dict of integers") from None
    assert got == expected, f"bytes_per_batch is wrong for the {which} checkpoint"


@check("test_bytes_hdfs")
def bytes_hdfs(run):
    ckpt = run.checkpoint("lab03-hdfs")
    if provider_of(ckpt) != "hdfs":
        raise CheckFailed("part B's checkpoint was not created with the HDFS provider")
    _state_counts(run, ckpt)  # a real state store, readable by Spark
    _bytes_part(run, "hdfs", ckpt, "delta")


@check("test_bytes_changelog")
def bytes_changelog(run):
    ckpt = run.checkpoint("lab03-changelog")
    if provider_of(ckpt) != "rocksdb":
        raise CheckFailed("part A's checkpoint was not created with the RocksDB provider")
    _bytes_part(run, "changelog", ckpt, "changelog")


def _facts(ckpt) -> dict:
    files = state_files(ckpt)
    files = files[files["operator"] == 0]
    partitions = {p.name for p in Path(ckpt.path, "state", "0").iterdir() if p.is_dir() and p.name.isdigit()}
    return {"provider": provider_of(ckpt), "state_partitions": len(partitions),
            "last_version": int(files["version"].dropna().max())}


@check("test_switch_provider", "test_switch_layout")
def switch(run):
    ckpt = run.checkpoint("lab03-hdfs")
    run.require_reached_end(ckpt, "lab03-users")
    if len(_committed(ckpt)) < 8:
        raise CheckFailed("part B's checkpoint was not restarted with the new users (part C's cell did not run)")
    expected = _expected(FIRST_RUN + RESTART)
    assert _latest(run.output("lab03-restart-out")) == {u: c for u, c in expected.items() if u >= "u0002000"}, \
        "the restarted query should output exactly the 1 000 new users"
    assert _state_counts(run, ckpt) == expected, "the restarted checkpoint's state does not hold every user's count"
    answer = _answer(run, "lab03-facts-answer")
    for which, path in (("restarted", ckpt), ("changelog", run.checkpoint("lab03-changelog"))):
        given = answer.get(which)
        if not isinstance(given, dict):
            raise CheckFailed(f"no restart_facts result for the {which} checkpoint")
        truth = _facts(path)
        for key, value in truth.items():
            assert given.get(key) == value, f"restart_facts: {key!r} is wrong for the {which} checkpoint"
