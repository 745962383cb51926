"""Splitting one lab's grading over several machines: which shard grades which submission.

``streamlab grade LAB SUBMISSIONS --shard K/N`` grades the submissions whose shard is K, out of N.
A submission's shard comes from a hash of its name in the folder (the ``<student>.ipynb`` file, or the
``<student>/`` folder of nbgrader's layout), nothing else: it is the same on every machine and every
re-run, and a student handed in later joins a shard without moving anyone else.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ..labs import GradingError
from .submissions import Submission


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (numbered from 1, as ``--shard 1/4`` ... ``--shard 4/4``)."""
    index: int
    count: int

    def __post_init__(self):
        if not (isinstance(self.count, int) and isinstance(self.index, int)) or self.count < 1 \
                or not 1 <= self.index <= self.count:
            raise GradingError(f"a shard is K/N with 1 <= K <= N, not {self.index}/{self.count}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/4"`` -> Shard(2, 4)."""
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
        if not match:
            raise GradingError(f"--shard takes K/N, e.g. 2/4 (the second of four shards), not {text!r}")
        index, count = int(match[1]), int(match[2])
        if index == 0 and count > 0:
            raise GradingError(f"shards are numbered from 1: the first of {count} is 1/{count}, not 0/{count} "
                               f"(in a Kubernetes Indexed Job, pass $((JOB_COMPLETION_INDEX + 1))/{count})")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


WHOLE = Shard(1, 1)


def shard_key(submission: Submission) -> str:
    """What a submission's shard is computed from: its name in the submissions folder."""
    origin = submission.origin
    return origin.name if origin.suffix == ".ipynb" else origin.parent.name  # <student>/<lab>/ -> <student>


def shard_of(key: str, count: int) -> int:
    """The shard (1..count) of the submission named ``key``."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return 1 + int.from_bytes(digest[:8], "big") % count


def select(submissions: list[Submission], shard: Shard) -> list[Submission]:
    """The submissions ``shard`` grades, in their order."""
    return [s for s in submissions if shard_of(shard_key(s), shard.count) == shard.index]
