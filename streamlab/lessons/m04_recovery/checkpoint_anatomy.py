"""A checkpoint file by file: what each file is for, and when each batch's files were written
(module 04)."""
from __future__ import annotations

from pathlib import Path


def _role(name: str) -> str:
    """What a checkpoint file is for, in a sentence."""
    import re

    if name == "metadata":
        return "the query's id: the same id across every restart"
    if m := re.match(r"^offsets/(\d+)$", name):
        return f"batch {m[1]}'s plan: the offsets it reads up to, written BEFORE it runs"
    if m := re.match(r"^commits/(\d+)$", name):
        return f"batch {m[1]} is done: written AFTER its sink returned"
    if m := re.match(r"^sources/(\d+)/0$", name):
        return f"where source {m[1]} started (its first offsets)"
    if m := re.match(r"^state/(\d+)/(\d+)/(\d+)\.delta$", name):
        return f"state of operator {m[1]}, partition {m[2]}: the changes of batch {int(m[3]) - 1}"
    if m := re.match(r"^state/(\d+)/(\d+)/(\d+)\.snapshot$", name):
        return f"state of operator {m[1]}, partition {m[2]}: all of it after batch {int(m[3]) - 1}"
    if m := re.match(r"^state/(\d+)/_metadata/", name):
        return f"operator {m[1]}'s metadata (state schema, names)"
    if name.startswith("state/"):
        return "state-store bookkeeping"
    return ""


def explain_checkpoint(checkpoint):
    """Every file of a checkpoint with its size, when it was written and what it is for
    (a pandas DataFrame, oldest file first). ``checkpoint``: a path or an ``sl.Checkpoint``."""
    import pandas as pd

    root = Path(str(checkpoint))
    rows = []
    for file in sorted(root.rglob("*")):
        if not file.is_file() or file.name.startswith("."):
            continue
        name = str(file.relative_to(root))
        role = _role(name)
        stat = file.stat()
        rows.append({"file": name, "bytes": stat.st_size, "written_ns": stat.st_mtime_ns, "what": role})
    frame = pd.DataFrame(rows, columns=["file", "bytes", "written_ns", "what"])
    return frame.sort_values(["written_ns", "file"], kind="stable").reset_index(drop=True)


def batch_timeline(checkpoint):
    """When each batch's files were written, in milliseconds after the batch's offsets entry:
    one row per batch with ``offsets``, ``state`` (the last state ``.delta`` file of that batch) and
    ``commit`` (NaN if the batch was never committed)."""
    import re

    import pandas as pd

    files = explain_checkpoint(checkpoint)
    stages: dict[int, dict] = {}
    for name, ns in zip(files["file"], files["written_ns"]):
        if m := re.match(r"^offsets/(\d+)$", name):
            stages.setdefault(int(m[1]), {})["offsets"] = ns
        elif m := re.match(r"^commits/(\d+)$", name):
            stages.setdefault(int(m[1]), {})["commit"] = ns
        elif m := re.match(r"^state/\d+/\d+/(\d+)\.delta$", name):
            batch = int(m[1]) - 1
            entry = stages.setdefault(batch, {})
            entry["state"] = max(entry.get("state", 0), ns)
    rows = []
    for batch, entry in sorted(stages.items()):
        if "offsets" not in entry:
            continue
        start = entry["offsets"]
        rows.append({"batch": batch, "offsets": 0.0,
                     "state": (entry["state"] - start) / 1e6 if "state" in entry else float("nan"),
                     "commit": (entry["commit"] - start) / 1e6 if "commit" in entry else float("nan")})
    return pd.DataFrame(rows, columns=["batch", "offsets", "state", "commit"])


def checkpoint_size(checkpoint) -> dict:
    """``{"files": n, "bytes": b}`` of a checkpoint folder (hidden .crc files left out)."""
    files = explain_checkpoint(checkpoint)
    return {"files": len(files), "bytes": int(files["bytes"].sum())}
