"""A correct Lab 03 written differently from the reference solution (the generic grading test puts
each answer into the answer cell with the same grade id of the released notebook).

Part A works on `sl.m03.state_files` (pandas: group by partition, filter by version) instead of walking folders;
part B too, with the committed batches from `sl.Checkpoint`; part C reads `offsets/0` instead of the last entry;
part D finds the snapshot in that table too, and adds up the sizes on disk of the SST files its metadata names
(not their `sizeBytes`), without calling part A's function.
It must get full marks all the same.
"""

ANSWERS = {
    "restore_plan": '''
def restore_plan(checkpoint_path, batch):
    files = sl.m03.state_files(checkpoint_path)
    files = files[(files["operator"] == 0) & files["kind"].isin(["zip", "changelog"])]
    plan = {}
    for partition, group in files.groupby("partition"):
        usable = group[group["version"] <= batch + 1].sort_values("version")
        snapshots = usable[usable["kind"] == "zip"]
        start = snapshots["version"].iloc[-1] if len(snapshots) else 0
        replay = usable[(usable["kind"] == "changelog") & (usable["version"] > start)]
        names = [Path(f).name for f in snapshots["file"].iloc[-1:]] + [Path(f).name for f in replay["file"]]
        plan[partition] = names
    return plan
''',
    "oldest_needed": '''
def oldest_needed(checkpoint_path, keep):
    files = sl.m03.state_files(checkpoint_path)
    files = files[files["operator"] == 0]
    committed = sl.Checkpoint(checkpoint_path).commits()["batch"]
    first_kept = int(committed.iloc[-keep]) + 1          # the version the oldest kept batch left
    answer = {}
    for partition, group in files.groupby("partition"):
        usable = group[(group["kind"] == "snapshot") & (group["version"] <= first_kept)]
        answer[int(partition)] = int(usable["version"].max()) if len(usable) else 1
    return answer
''',
    "effective_settings": '''
def effective_settings(checkpoint_path, wanted):
    import json
    # the first entry of the offsets log records the same settings as the last
    with open(os.path.join(checkpoint_path, "offsets", "0")) as log:
        header, metadata = log.readline(), json.loads(log.readline())
    fixed = metadata["conf"]
    effective = dict(wanted)
    effective.update({name: fixed[name] for name in wanted if name in fixed})
    return effective
''',
    "restart_copy": '''
def restart_copy(checkpoint_path, batch):
    import json
    import zipfile

    files = sl.m03.state_files(checkpoint_path)
    files = files[files["operator"] == 0]
    copies = {}
    for partition, group in files.groupby("partition"):
        snapshots = group[(group["kind"] == "zip") & (group["version"] <= batch + 1)].sort_values("version")
        if snapshots.empty:
            copies[int(partition)] = 0      # rebuilt from its changelogs alone
            continue
        with zipfile.ZipFile(os.path.join(checkpoint_path, snapshots["file"].iloc[-1])) as snapshot:
            header, body = snapshot.read("metadata").decode().split("\\n", 1)
        names = {entry["dfsSstFileName"] for entry in json.loads(body)["sstFiles"]}
        listed = group[(group["kind"] == "sst") & group["file"].map(lambda f: os.path.basename(f) in names)]
        copies[int(partition)] = int(listed["bytes"].sum())
    return copies
''',
}
