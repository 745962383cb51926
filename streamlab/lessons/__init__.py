"""The lessons' helpers: the basics every lesson uses, then one module per lesson that adds its own.

The basics: ``events`` (seeded event generators), ``streams`` (topics as DataFrames, output batch by
batch), ``runs`` (streaming runs to a known end) and ``checkpoint`` (a fresh checkpoint, and a look
inside). Each lesson's own helpers are in the module named after it, which the lesson reaches as
``sl.mNN``: ``m02_keyed_state``, ``m03_state_backends``, ``m04_recovery`` (a package: jobs in a process
of their own, crashes, exactly-once sinks, a checkpoint file by file), ``m05_offset_replay``,
``m06_event_time`` and ``m07_upgrades`` (a package: savepoints, upgrades, the version tree).
Lesson 01 needs only the basics.

Nothing here imports the grader.
"""
