"""Lab 03's hidden checks: run by the grader in its own process, after the notebook ran.

Never released to students (see streamlab/grading/hidden_checks.py). Each check reads what a part's
locked cells left behind — checkpoints and topics named ``lab03-...`` — and compares it with
values computed here: the expected counts from the lab's deterministic input, the plans, the cleanup
versions and the settings from the checkpoint files themselves.
"""
from collections import Counter
from pathlib import Path

from streamlab.grading.hidden_checks import CheckFailed, check, committed_offsets
from streamlab.lessons.m03_state_backends import (
    CHANGELOG_CONF,
    checkpoint_conf,
    provider_of,
    snapshot_ssts,
    state_files,
)
from streamlab.stack.session import STATE_STORES

FIRST_RUN = list(range(0, 1500)) + list(range(500, 2000))  # the setup cell's two produce_new_keys
RESTART = list(range(2000, 3000))                           # part C's new users
FIRST_RUN_BATCHES = 6                                       # 3 000 visits, 500 a batch
WANTED = {"spark.sql.streaming.stateStore.providerClass": STATE_STORES["hdfs"],
          "spark.sql.shuffle.partitions": "4",
          "spark.sql.streaming.stateStore.compression.codec": "zstd",
          CHANGELOG_CONF: "false",
          "spark.sql.streaming.minBatchesToRetain": "50"}
# the three the checkpoint's offsets log records: the layout of the state already written
RECORDED = ["spark.sql.streaming.stateStore.providerClass", "spark.sql.shuffle.partitions",
            "spark.sql.streaming.stateStore.compression.codec"]


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


def _answer(run, name) -> tuple[dict, float]:
    """The one answer record a part's locked cell sent to the topic ``name``, and when (its Kafka timestamp, in
    seconds)."""
    records = run.records(name, limit=10)
    if len(records) != 1 or not isinstance(records[0]["value"], dict):
        raise CheckFailed(f"the topic {name!r} should hold exactly one answer record: "
                          "run the part's cells once")
    return records[0]["value"], records[0]["timestamp"] / 1000


def _committed(ckpt) -> list[int]:
    return [int(b) for b in ckpt.commits()["batch"]]


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
    answer, sent = _answer(run, "lab03-restore-answer")
    plans = answer.get("plans")
    if not isinstance(plans, dict):
        raise CheckFailed("no restore_plan results: run part A's cells once")
    try:
        given = {int(b): {int(p): [str(n) for n in names] for p, names in plan.items()} for b, plan in plans.items()}
    except (TypeError, ValueError, AttributeError):
        raise CheckFailed("restore_plan must return {partition: [file names]}") from None
    return given, sent


def _seen_at(ckpt, files, sent):
    """The files as they were when the answer was sent: background maintenance may write a snapshot (RocksDB's
    .zip, the HDFS provider's .snapshot) after the query stopped, later than the student's function looked."""
    snapshots = files["kind"].isin(["zip", "snapshot"])
    later = files["file"].map(lambda f: Path(ckpt.path, f).stat().st_mtime > sent)
    return files[~(snapshots & later)]


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
    # what a restore as of each batch rebuilds, beside the counts of the visits read by then
    reference = {b: dict(Counter(v["user"] for v in read))
                 for b, read in run.inputs_by_batch(ckpt, "lab03-users").items()}
    diverged = run.trace_state("Part A, counts per user", ckpt, reference,
                               lambda state: {u: int(c) for u, c in zip(state["user"], state["count"])})
    assert diverged is None, f"the state as of batch {diverged} does not hold the counts of the visits read by then"


def _hdfs_checkpoint(run):
    """Part B's checkpoint, proven to be the HDFS query over part B's 3 000 visits, in two runs."""
    ckpt = run.checkpoint("lab03-hdfs")
    if committed_offsets(ckpt, run.topic("lab03-visits")) != {0: 1500, 1: 1500}:
        raise CheckFailed("part B's query did not read its 3 000 visits to the end")
    if provider_of(ckpt) != "hdfs":
        raise CheckFailed("part B's checkpoint was not created with the HDFS provider")
    batches = _committed(ckpt)
    files = state_files(ckpt)
    files = files[files["operator"] == 0]
    for partition in (0, 1):
        mine = files[files["partition"] == partition]
        deltas = sorted(int(v) for v in mine.loc[mine["kind"] == "delta", "version"])
        assert deltas == [b + 1 for b in batches], "part B's checkpoint does not hold one .delta per batch"
        snapshots = set(mine.loc[mine["kind"] == "snapshot", "version"])
        assert {3, 6} <= snapshots, "part B's checkpoint lacks 3.snapshot or 6.snapshot: its cell did not run as given"
    return ckpt, files, batches


def _true_oldest(files, batches, keep) -> dict[int, int]:
    """The part's cleanup rule (one version fewer than Spark's own, which also keeps the version the oldest kept
    batch started from): the latest snapshot at or before the oldest kept version, else version 1."""
    oldest = batches[-1] + 1 - keep + 1
    truth = {}
    for partition, mine in files.groupby("partition"):
        snapshots = [int(v) for v in mine.loc[mine["kind"] == "snapshot", "version"] if v <= oldest]
        truth[int(partition)] = max(snapshots, default=1)
    return truth


def _given_per_partition(run, topic: str, field: str, part: str, function: str,
                         value: str) -> tuple[dict[int, dict[int, int]], float]:
    """The ``{n: {partition: whole number}}`` a part's cell sent (``field`` of its one answer record on ``topic``),
    and when; CheckFailed naming ``function`` and its ``{partition: value}`` when it is missing or malformed."""
    answer, sent = _answer(run, topic)
    if not isinstance(answer.get(field), dict):
        raise CheckFailed(f"no {function} results: run part {part}'s cells once")
    try:
        given = {int(n): {int(p): int(v) for p, v in per.items()} for n, per in answer[field].items()}
    except (TypeError, ValueError, AttributeError):
        raise CheckFailed(f"{function} must return {{partition: {value}}}") from None
    return given, sent


def _given_oldest(run) -> tuple[dict[int, dict[int, int]], float]:
    given, sent = _given_per_partition(run, "lab03-cleanup-answer", "needed", "B", "oldest_needed", "version")
    if sorted(given) != list(range(1, 7)) or any(sorted(a) != [0, 1] for a in given.values()):
        raise CheckFailed("oldest_needed should give a version for state partitions 0 and 1, for every keep")
    return given, sent


@check("test_cleanup_shape")
def cleanup_shape(run):
    ckpt, files, batches = _hdfs_checkpoint(run)
    given, _ = _given_oldest(run)
    versions = {int(p): set(int(v) for v in mine["version"].dropna()) for p, mine in files.groupby("partition")}
    for keep, answer in given.items():
        for partition, version in answer.items():
            assert version in versions[partition], f"keep={keep}: partition {partition}: no file of version {version}"


@check("test_cleanup_safe")
def cleanup_safe(run):
    """Delete, in a copy of the checkpoint, every state file older than the answer; read each kept batch."""
    import shutil
    import tempfile

    ckpt, files, batches = _hdfs_checkpoint(run)
    given, _ = _given_oldest(run)
    assert all(v > 1 for v in given[1].values()), "keeping only the last batch frees the files before a snapshot"
    total = int(files["bytes"].sum())
    if total > 64 * 2**20 or len(ckpt.files()) > 2_000:
        raise CheckFailed(f"part B's checkpoint is far larger than the lab's query makes ({total} bytes)")
    from streamlab.lessons.checkpoint import Checkpoint
    before = {}   # the state as of each kept batch, read once from the untouched checkpoint
    for batch in batches[-2:]:
        state = ckpt.state_table(run.spark(), batchId=batch)
        before[batch] = dict(zip(state["user"], state["count"]))
    for keep in (1, 2):
        with tempfile.TemporaryDirectory(prefix="lab03-cleanup-") as scratch:
            copy = Path(scratch, "ckpt")
            shutil.copytree(ckpt.path, copy, symlinks=True)
            for row in files.itertuples():
                if row.kind in ("delta", "snapshot") and row.version < given[keep][int(row.partition)]:
                    Path(copy, row.file).unlink()
                    crc = Path(copy, row.file).with_name(f".{Path(row.file).name}.crc")
                    crc.unlink(missing_ok=True)
            for batch in batches[-keep:]:
                try:
                    got = Checkpoint(copy).state_table(run.spark(), batchId=batch)
                except Exception as err:  # noqa: BLE001 - Spark's error when a needed file is gone
                    raise AssertionError(f"keep={keep}: after the cleanup the state as of batch {batch} "
                                         f"cannot be read ({type(err).__name__})") from None
                assert dict(zip(got["user"], got["count"])) == before[batch], \
                    f"keep={keep}: after the cleanup the state as of batch {batch} is not what it was"


@check("test_cleanup_most")
def cleanup_most(run):
    ckpt, files, batches = _hdfs_checkpoint(run)
    given, sent = _given_oldest(run)
    files = _seen_at(ckpt, files, sent)
    for keep, answer in given.items():
        assert answer == _true_oldest(files, batches, keep), \
            f"keep={keep}: not the oldest version the last {keep} batch(es) read"


def _settings(run):
    """Part C's checkpoint: RocksDB with changelog, 2 partitions, restarted once with the new users."""
    ckpt = run.checkpoint("lab03-settings")
    run.require_reached_end(ckpt, "lab03-users")
    conf = checkpoint_conf(ckpt)
    if provider_of(ckpt) != "rocksdb" or conf.get("spark.sql.shuffle.partitions") != "2":
        raise CheckFailed("part C's checkpoint was not created with RocksDB and 2 state partitions")
    given, _ = _answer(run, "lab03-settings-answer")
    answer = {str(k): str(v) for k, v in given.items()}
    if sorted(answer) != sorted(WANTED):
        raise CheckFailed(f"effective_settings should give a value for each of the {len(WANTED)} wanted settings")
    expected = _expected(FIRST_RUN + RESTART)
    assert _latest(run.output("lab03-settings-out")) == {u: c for u, c in expected.items() if u >= "u0002000"}, \
        "the restarted query should output exactly the 1 000 new users"
    assert _state_counts(run, ckpt) == expected, "the restarted checkpoint's state does not hold every user's count"
    return ckpt, conf, answer


@check("test_settings_kept")
def settings_kept(run):
    ckpt, conf, answer = _settings(run)
    files = state_files(ckpt)
    assert "delta" not in set(files["kind"]) and \
        {int(p) for p in files["partition"].dropna()} == {0, 1}, "the restart should have kept RocksDB on 2 partitions"
    for name in RECORDED:
        assert answer[name] == conf[name], f"{name}: the checkpoint's offsets log records {conf[name]!r}"


@check("test_settings_all")
def settings_all(run):
    ckpt, conf, answer = _settings(run)
    for name, value in WANTED.items():
        assert answer[name] == conf.get(name, value), f"{name}: not the value the restart used"
    files = state_files(ckpt)
    files = files[files["operator"] == 0]
    restarted = [b + 1 for b in _committed(ckpt) if b + 1 > FIRST_RUN_BATCHES]
    written = set(files.loc[files["version"].isin(restarted), "kind"])
    assert "changelog" not in written and "zip" in written, \
        "the restart should have run without changelog checkpointing (a snapshot each batch)"


# -- Part D: what a fresh load copies back (lesson 08): the SST files its snapshot lists, changelogs replayed

def _true_copies(ckpt, files, batch) -> dict[int, int]:
    """{partition: bytes}: the SST files the snapshot a load as of ``batch`` starts from lists, by its metadata."""
    copies = {}
    for partition, names in _true_plan(files, batch).items():
        zips = [name for name in names if name.endswith(".zip")]
        path = Path(ckpt.path, "state", "0", str(partition), zips[0]) if zips else None
        copies[partition] = sum(size for _, size in snapshot_ssts(path)) if path else 0
    return copies


def _given_copies(run, batches) -> tuple[dict[int, dict[int, int]], float]:
    given, sent = _given_per_partition(run, "lab03-copy-answer", "copied", "D", "restart_copy", "bytes")
    if sorted(given) != batches:
        raise CheckFailed(f"expected restart_copy's answer for each committed batch {batches}")
    return given, sent


def _copies_match(ckpt, files, given, batch) -> None:
    truth = _true_copies(ckpt, files, batch)
    assert given[batch] == truth, (f"as of batch {batch} a load copies {truth} bytes per state partition (the SST "
                                   f"files its snapshot lists); restart_copy says {given[batch]}")


@check("test_copy_last")
def copy_last(run):
    ckpt, files, batches = _changelog_checkpoint(run)
    given, sent = _given_copies(run, batches)
    _copies_match(ckpt, _seen_at(ckpt, files, sent), given, batches[-1])


@check("test_copy_every")
def copy_every(run):
    ckpt, files, batches = _changelog_checkpoint(run)
    given, sent = _given_copies(run, batches)
    files = _seen_at(ckpt, files, sent)
    for batch in batches:
        _copies_match(ckpt, files, given, batch)
    assert any(given[b] != given[batches[-1]] for b in batches), \
        "every batch copies the same bytes: the loads before the last snapshot were not told apart"
