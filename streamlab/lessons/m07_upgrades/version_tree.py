"""Job versions as a tree: which version started from which savepoint, drawn from the checkpoints.

``sl.m07.plot_version_tree({"v0": ckpt, "v1": sp_v1, ...})`` draws one lane per version over the input
it read (Kafka offsets, from its checkpoint's offsets log); a version started from a savepoint
branches off the lane of the checkpoint the savepoint was copied from (``savepoint_info``).
"""
from __future__ import annotations

from ..checkpoint import Checkpoint
from .savepoints import checkpoint_of, savepoint_info


def plot_version_tree(versions: dict, ax=None, *, topic: str | None = None):
    """Draw job versions as lanes over the input they read: ``versions`` is ``{name: checkpoint}``.

    Each lane runs from the Kafka position where that version started to where its last committed
    batch stopped (records read, summed over partitions, from the checkpoint's offsets log); a
    version started from a savepoint branches off the lane of the checkpoint it was copied from,
    at the savepoint's position. Everything is read from the checkpoints themselves.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.7 + 0.6 * len(versions)))
    names = list(versions)
    lanes = {name: len(names) - 1 - i for i, name in enumerate(names)}
    by_path = {}
    for name, ckpt in versions.items():
        by_path[str(ckpt)] = name
        info = savepoint_info(ckpt)
        if info:
            by_path.setdefault(info["taken_from"], None)
    for name, ckpt in versions.items():
        ckpt = checkpoint_of(ckpt)
        info = savepoint_info(ckpt)
        start = _records_read(ckpt, info["batch"], topic) if info else 0
        end = _records_read(ckpt, ckpt.last_committed_batch(), topic)
        y = lanes[name]
        ax.plot([start, end], [y, y], lw=6, solid_capstyle="butt", color=f"C{y % 10}")
        ax.text(end, y, f"  {name}", va="center")
        parent = _parent_name(info, versions) if info else None
        if parent is not None:
            ax.annotate("", xy=(start, y), xytext=(start, lanes[parent]),
                        arrowprops={"arrowstyle": "->", "color": "0.3"})
            ax.plot([start], [lanes[parent]], marker="D", color="black")
            ax.text(start, lanes[parent] + 0.25, f"savepoint (batch {info['batch']})", ha="center", fontsize=8)
    ax.set_yticks([])
    ax.set_xlabel("input records read (Kafka offsets, all partitions)")
    ax.set_title("Job versions and the savepoints they start from")
    ax.set_ylim(-0.6, len(names) - 0.2)
    ax.margins(x=0.15)
    return ax


def _records_read(ckpt: Checkpoint, batch: int | None, topic: str | None) -> int:
    if batch is None:
        return 0
    offsets = ckpt.offsets()
    rows = offsets[offsets["batch"] == batch]
    if topic is not None:
        rows = rows[rows["topic"] == topic]
    return int(sum(int(o) for o in rows["offset"] if isinstance(o, (int, float))))


def _parent_name(info: dict, versions: dict) -> str | None:
    for name, ckpt in versions.items():
        if str(ckpt) == info["taken_from"]:
            return name
    # a copy of a copy: follow the chain to a checkpoint that is drawn
    seen = set()
    path = info["taken_from"]
    while path not in seen:
        seen.add(path)
        parent = savepoint_info(path)
        if not parent:
            return None
        path = parent["taken_from"]
        for name, ckpt in versions.items():
            if str(ckpt) == path:
                return name
    return None
