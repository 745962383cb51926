"""A Lab 03 submission with part A solved and part B half right; part C left as the stub.

Part B counts only the .delta files (forgets .changelog), so the HDFS figures are right and the
changelog ones are not: test_bytes_hdfs (2) passes, test_bytes_changelog (2) fails.
Part A reads the folders (sorting each version's changelog before its zip, then keeping the files from the last
usable zip on). Expected: part A 3 + part B 2 = 5 of 10 points.
"""

EXPECTED_SCORE = 5

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
    "bytes_per_batch": '''
def bytes_per_batch(checkpoint_path):
    totals = {}
    for path in Path(checkpoint_path, "state").glob("*/*/*.delta"):
        batch = int(path.name.split(".")[0]) - 1
        totals[batch] = totals.get(batch, 0) + path.stat().st_size
    return totals
''',
}
