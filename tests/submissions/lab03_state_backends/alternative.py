"""A correct Lab 03 written differently from the reference solution (the generic grading test puts
each answer into the answer cell with the same grade id of the released notebook).

Part A works on `sl.m03.state_files` (pandas: group by partition, filter by version) instead of walking folders; part B works on
`sl.m03.state_files` (pandas) instead of walking folders; part C uses `sl.m03.provider_of` and a regular
expression over `os.walk`. It must get full marks all the same.
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
    "bytes_per_batch": '''
def bytes_per_batch(checkpoint_path):
    files = sl.m03.state_files(checkpoint_path)
    wanted = files[files["kind"].isin(["delta", "changelog"])]
    per_version = wanted.groupby("version")["bytes"].sum()
    return {int(version) - 1: int(total) for version, total in per_version.items()}
''',
    "restart_facts": '''
def restart_facts(checkpoint_path):
    import re
    versioned = re.compile(r"^(\\d+)(_[^.]*)?\\.(delta|snapshot|zip|changelog)$")
    state0 = os.path.join(checkpoint_path, "state", "0")
    partitions = sorted(name for name in os.listdir(state0) if name.isdigit())
    highest = -1
    for name in partitions:
        for entry in os.scandir(os.path.join(state0, name)):
            match = versioned.match(entry.name)
            if match:
                highest = max(highest, int(match.group(1)))
    return {"last_version": highest, "state_partitions": len(partitions),
            "provider": sl.m03.provider_of(checkpoint_path)}
''',
}
