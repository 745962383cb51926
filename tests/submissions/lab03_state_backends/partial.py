"""A Lab 03 submission with part A solved and part B wrong in a plausible way; parts C and D left as the stub.

Part B answers the oldest version kept instead of the oldest version its restore reads: the shape test (1)
passes; a restore after the cleanup fails (test_cleanup_safe) and the versions are not Spark's (test_cleanup_most).
Part A reads the folders (sorting each version's changelog before its zip, then keeping the files from the last
usable zip on). Part D left as the stub. Expected: part A 3 + part B 1 = 4 of 13 points.
"""

EXPECTED_SCORE = 4

ANSWERS = {
    "restore_plan": '''
def restore_plan(checkpoint_path, batch):
    plan = {}
    for folder in Path(checkpoint_path, "state", "0").iterdir():
        if folder.name.isdigit():
            names = sorted((p.name for p in folder.iterdir() if p.suffix in (".zip", ".changelog")),
                           key=lambda n: (int(n.split(".")[0]), n.endswith(".zip")))
            wanted = [n for n in names if int(n.split(".")[0]) <= batch + 1]
            zips = [i for i, n in enumerate(wanted) if n.endswith(".zip")]
            plan[int(folder.name)] = wanted[zips[-1]:] if zips else wanted
    return plan
''',
    "oldest_needed": '''
def oldest_needed(checkpoint_path, keep):
    # wrong: the oldest version kept, forgetting that it is rebuilt from an older snapshot and deltas
    last = max(int(p.name) for p in Path(checkpoint_path, "commits").iterdir() if p.name.isdigit())
    return {int(p.name): last + 2 - keep for p in Path(checkpoint_path, "state", "0").iterdir() if p.name.isdigit()}
''',
}
