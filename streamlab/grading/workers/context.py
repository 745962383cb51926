"""One submission, as the grader hands it to a worker: the one value that carries it everywhere.

The grader builds a ``SubmissionContext`` once per submission (``Grader._autograde``); it travels as JSON
over the warm worker's channel (``warm``), and the worker passes it, as an argument, to what grades the
submission: the sandbox (``sandbox.Sandbox``), the kernel nbgrader starts (``steps/sandbox_kernel_manager.py``),
the slot's Kafka principal (``tenancy``) and the hidden checks' process (``hidden.ChecksProcess``). Nothing
re-derives it from a process's environment: ``env`` is the environment built for the submission's child
processes (``isolation.submission_environment``), given to each child when it starts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..sandbox.isolation import TAG


@dataclass(frozen=True)
class SubmissionContext:
    lab: str
    student: str
    course: str                       # the submission's private nbgrader course folder
    log: str                          # its log file
    env: dict[str, str] = field(default_factory=dict)  # the environment of every process that grades it
    cell_timeout: float | None = None
    limits: dict | None = None           # the sandbox's limits (``box.Limits`` as a dict); None: no sandbox
    sandbox_listener: str | None = None  # the broker's SANDBOX listener, when the slot has a Kafka principal
    progress: str | None = None          # where the running notebook is saved after every cell (``streamlab check``)
    language: str = "en"                 # the notebook's language: the words of its feedback ("en", "zh")

    @property
    def tag(self) -> str:
        """The tag every process grading this submission carries (``isolation.TAG``)."""
        return self.env[TAG]

    @property
    def topic_prefix(self) -> str:
        return self.env["STREAMLAB_TOPIC_PREFIX"]

    @property
    def data_dir(self) -> Path:
        """Where the submission's checkpoints go; its parent is the submission's work folder."""
        return Path(self.env["STREAMLAB_DATA_DIR"])

    @property
    def bootstrap(self) -> str:
        return self.env["KAFKA_BOOTSTRAP_SERVERS"]

    @classmethod
    def from_dict(cls, data: dict) -> SubmissionContext:
        """The context from its JSON form (unknown keys, such as the channel's nonce, left out)."""
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)
