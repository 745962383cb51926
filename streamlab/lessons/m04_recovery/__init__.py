"""Module 04, checkpoints and exactly-once recovery: its helpers, as ``sl.m04.<name>``.

* ``jobs``: ``StreamingJob`` runs a streaming job in a process of its own, crashes it at an exact
  point and restarts it; ``job_context`` is the job's side; ``example_jobs`` the jobs the lesson runs
  (named ``"streamlab.lessons.m04_recovery:count_requests"`` and ``":tick"``);
* ``crashes``: a crash inside the notebook's own driver (``fail_after_batch``, ``run_with_crash``), and two crashes
  and a zombie driver around a two-phase-commit sink (``run_with_zombie``);
* ``sinks``: sinks that survive a crash (``SqliteSink``, ``TransactionalTopicSink``, ``read_committed``);
* ``checkpoint_anatomy``: a checkpoint file by file (``explain_checkpoint``, ``batch_timeline``);
* ``real_time``: Spark's real-time mode tried on a query (``try_real_time``), the settings a stateful one needs
  (``real_time_settings``) and a record's latency through a query in each mode (``latency``);
* ``PrivateBroker``: a Kafka broker of your own to stop under a running query (from the stack).
"""
from ...stack.private_broker import PrivateBroker
from .checkpoint_anatomy import batch_timeline, checkpoint_size, explain_checkpoint
from .crashes import CrashRun, InjectedCrash, ZombieRun, fail_after_batch, run_with_crash, run_with_zombie
from .example_jobs import count_requests, tick
from .jobs import JobFailed, StreamingJob
from .real_time import latency, real_time_settings, try_real_time
from .sinks import SqliteSink, TransactionalTopicSink, last_committed_batch, new_store, read_committed

__all__ = ["StreamingJob", "JobFailed", "count_requests", "tick", "fail_after_batch", "run_with_crash",
           "CrashRun", "InjectedCrash", "run_with_zombie", "ZombieRun", "SqliteSink", "TransactionalTopicSink",
           "read_committed", "new_store",
           "last_committed_batch", "explain_checkpoint", "batch_timeline", "checkpoint_size", "PrivateBroker",
           "try_real_time", "real_time_settings", "latency"]
