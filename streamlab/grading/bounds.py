"""Every bound the grader sets, in one place, named by what it bounds: what a submission may use, what its Kafka
clients may ask of the broker, how long the grader waits, and how much of what a student made the grader reads,
keeps and shows. A new bound is one line here (and its test in tests/grading/test_bounds.py, or beside the code that
enforces it); the modules read them as ``bounds.NAME`` when they run, so a test can lower one.

What a student made is untrusted: every size of it is bounded before (or while) it is read, never after. The bounds
are far above what any lab's reference solution makes (its measured sizes are in the comments), so only a crafted
submission meets them. Output bounds follow PrairieLearn's 1 MB limit on an autograder's results as the anchor.
"""
from __future__ import annotations

MB = 2**20

NOTEBOOK_BYTES = 64 * MB          # the submitted file, by stat() before it is opened (a lab with outputs: < 2 MB)
NOTEBOOK_CONTAINERS = 200_000     # JSON objects and arrays in it, counted before it is parsed (a lab: < 5,000;
                                  # each becomes a NotebookNode of ~1 kB in nbgrader: 10 M of them took 14 GB)
CELL_OUTPUT_BYTES = 1 * MB        # one cell's outputs, as the grader keeps them (a lesson's plot: ~60 kB)
NOTEBOOK_OUTPUT_BYTES = 5 * MB    # all the outputs of a notebook together
KERNEL_MESSAGE_BYTES = 8 * MB     # one message from the kernel (ZeroMQ refuses a larger one)
KERNEL_MESSAGES_QUEUED = 64       # messages ZeroMQ holds for the grader at once (at most 512 MB together)
RECORD_BYTES = 1 * MB             # one Kafka record the checks read, after decompression (a lab's: < 1 kB)
FETCH_BYTES = 4 * MB              # what one fetch of the checks' consumer may bring, compressed

# A checkpoint the checks read (measured: the largest any lab's reference leaves is ~6 MB in ~900 files)
CHECKPOINT_FILES = 20_000         # files in one checkpoint folder
FOLDER_DEPTH = 32                 # folders within folders under a work folder (a checkpoint's deepest: ~6)
CHECKPOINT_BYTES = 512 * MB       # their sizes together, on disk
LOG_FILE_BYTES = 1 * MB           # a file of the query's logs: metadata, offsets/N, commits/N, sources/...
ZIP_ENTRIES = 10_000              # entries in one state snapshot zip (RocksDB's)
ZIP_EXPANDED_BYTES = 128 * MB     # one zip's entries together, decompressed (counted, not trusted from its header)
ZIP_METADATA_BYTES = 1 * MB       # its ``metadata`` entry (RocksDB's list of files), decompressed
STATE_SUFFIXES = (".zip", ".delta", ".snapshot", ".changelog", ".sst")  # state data, not log files


# -- What one submission's run may use: its sandbox (``sandbox.limits.Limits``; each result records its usage)
SUBMISSION_MEMORY_MB = 4096       # the kernel, Spark's JVM, its Python workers and the work folder's files
SUBMISSION_PROCESSES = 1024       # processes and threads (a Spark JVM alone runs ~200 threads)
SUBMISSION_CPU_SECONDS = 900      # CPU time of all its processes together, besides the wall-clock limit
SUBMISSION_DISK_MB = 1024         # the work folder: checkpoints, Spark's files, HOME and /tmp
FILES_PER_MB = 64                 # the work folder's files (inodes): a lab's reference leaves ~2,000; 65,536 in 1 GB
CHECKS_MEMORY_MB = 3072           # the hidden checks' own sandbox: their Spark reads what the run left
CHECKS_PROCESSES = 512
CHECKS_CPU_SECONDS = 600
CHECKS_DISK_MB = 1024
WORKER_MEMORY_MB = 2048           # nbgrader and the notebooks it reads and writes (a lab's: ~300 MB); kernels not in it

# -- What one sandbox's Kafka clients may ask of the broker (its door counts; the broker enforces the quota)
KAFKA_REQUEST_BYTES = 2 * MB      # one request frame
KAFKA_CONNECTIONS = 64            # open at once (a lab's Spark query and clients use ~10)
KAFKA_TOPICS = 64                 # topics created (the labs create at most 11)
KAFKA_PARTITIONS = 256            # partitions created (the labs: at most 21, +3 by CreatePartitions)
KAFKA_PRODUCED_BYTES = 64 * MB    # Produce frames together (a lab's reference writes at most 0.4 MB)
KAFKA_PRODUCER_IDS = 512          # InitProducerId requests: each idempotent producer sends one (the labs: <= 6)
KAFKA_TRANSACTIONAL_IDS = 16      # different transactional ids (the labs use one)
KAFKA_PRODUCE_BYTES_PER_S = 20 * MB  # each principal's produce quota, the broker's: far above what a lab writes

# -- How long the grader waits
SUBMISSION_TIMEOUT_S = 900        # a whole submission, by default (``streamlab grade --timeout``)
CHECKS_READY_WAIT_S = 300         # for the checks to be ready after the notebook: Spark started and answering
CHECKS_WAIT_S = 600               # for the checks to finish once the notebook has
CHECKS_LOOK_EVERY_S = 0.5         # how often the checks look for a committed batch while the notebook runs
CHECKS_LOOK_ENTRIES = 1_000       # checkpoint folders looked at each time (a lab makes at most 12); past it, the
                                  # checks start their Spark as if one had committed
BROKER_PROBE_S = 15               # for the broker to answer the grader's health probe
ACL_WAIT_S = 30                   # at most, for the broker to show new ACLs (it takes milliseconds)
KERNEL_RECONNECT_WAIT_S = 2       # for a kernel socket connected again (ZeroMQ dropped it for a message past
                                  # KERNEL_MESSAGE_BYTES) to finish its handshake with the kernel (it takes ~1 ms)
KERNEL_SUBSCRIBE_WAIT_S = 0.05    # then for its subscription to reach the kernel, before the next cell runs
INTERRUPT_GRACE_S = 30            # for a cell interrupted at its time limit to stop, before the notebook ends there
                                  # (nbclient waits 4 s: under the suite's load an awaitTermination() took longer)

# -- What the grader reads, keeps and shows of what a submission made, besides the bounds above
STUDENT_ID_CHARS = 100            # a student's id: the submitted file's or folder's name
PROBLEMS_NAMED = 3                # of a notebook's cells that differ from the lab's, named in its refusal (all counted)
METADATA_SHOWN_CHARS = 40         # of a value in a cell's nbgrader metadata, quoted in a refusal
EXTRA_FILE_BYTES = 64 * 1024      # a file handed in beside the notebook (nbgrader's timestamp.txt: one line)
CHECKS_MESSAGE_BYTES = 4 * MB     # one message from the checks' process
JAVA_CAUSES_FOLLOWED = 16         # of a Java exception's causes, looked at for a JVM failure
TRACE_ROWS = 20_000               # a batch's state larger than this is not read (the trace says so)
TRACE_BATCHES = 40                # a state trace shows at most this many batches (the first ones)
TRACES_PER_CHECK = 8
STUDENT_LOG_BYTES = 16 * MB       # what the worker writes into one student's log
OUTPUT_TAIL_BYTES = 64 * 1024     # of a kernel's or the checks' output, copied into the student's log afterwards
FEEDBACK_SOURCE_CHARS = 10_000    # of a code cell's source, kept in the feedback when it is over a limit
FEEDBACK_HTML_DEPTH = 100         # nested elements kept in the feedback; deeper tags are taken out, their text kept
EXPORT_COMMENT_CHARS = 300        # a status's detail, cut here in the exports' comment columns


class TooLarge(ValueError):
    """Something a student made is larger than the grader reads; the message says what and how large."""


def json_containers(data: bytes) -> int:
    """How many JSON objects and arrays ``data`` holds at most: its ``{`` and ``[`` outside strings, counted
    without parsing it (a parse is what costs memory)."""
    import re

    # possessive: linear in the size, whatever the strings hold (a 64 MB notebook in about a second)
    outside_strings = re.sub(rb'"(?:[^"\\]++|\\.)*+"', b"", data)
    return outside_strings.count(b"{") + outside_strings.count(b"[")


def scan_checkpoint(folder) -> None:
    """Raise ``TooLarge`` unless the checkpoint folder ``folder`` is within the bounds above: its file count,
    its total size, each log file, and each state zip's entries decompressed (streamed and counted, so a
    zip whose header lies about its sizes is caught too). Symbolic links were removed before (see
    ``sandbox.untrusted_folder``); any left are refused."""
    import os
    import stat
    import zipfile
    from pathlib import Path

    root = Path(folder)
    files = total = 0
    for here, dirs, names in os.walk(root, followlinks=False):
        if len(Path(here).relative_to(root).parts) >= FOLDER_DEPTH:
            raise TooLarge(f"the checkpoint's folders are nested more than {FOLDER_DEPTH} deep")
        for name in [*dirs, *names]:
            path = Path(here) / name
            info = path.lstat()
            if stat.S_ISDIR(info.st_mode):
                continue
            if not stat.S_ISREG(info.st_mode):
                raise TooLarge(f"{path.relative_to(root)} is not a regular file")
            files += 1
            total += info.st_size
            if files > CHECKPOINT_FILES:
                raise TooLarge(f"the checkpoint holds more than {CHECKPOINT_FILES} files")
            if total > CHECKPOINT_BYTES:
                raise TooLarge(f"the checkpoint's files hold more than {CHECKPOINT_BYTES // MB} MB")
            if not name.endswith(STATE_SUFFIXES) and info.st_size > LOG_FILE_BYTES:
                raise TooLarge(f"{path.relative_to(root)} is {info.st_size // 1024} kB; a Spark query writes "
                               f"such a file in a few kB")
            if name.endswith(".zip"):
                try:
                    _scan_zip(path, root)
                except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as err:
                    if isinstance(err, TooLarge):
                        raise
                    raise TooLarge(f"{path.relative_to(root)} is not a zip Spark can read ({err})") from err


def _scan_zip(path, root) -> None:
    import zipfile

    where = path.relative_to(root)
    with zipfile.ZipFile(path) as archive:
        entries = archive.infolist()
        if len(entries) > ZIP_ENTRIES:
            raise TooLarge(f"{where} holds {len(entries)} entries")
        expanded = 0
        for entry in entries:
            bound = ZIP_METADATA_BYTES if entry.filename.rsplit("/", 1)[-1] == "metadata" else ZIP_EXPANDED_BYTES
            if entry.file_size > bound or expanded + entry.file_size > ZIP_EXPANDED_BYTES:
                raise TooLarge(f"{where}: {entry.filename} says it expands to {entry.file_size // MB} MB")
            size = 0
            with archive.open(entry) as stream:
                while chunk := stream.read(MB):
                    size += len(chunk)
                    if size > bound or expanded + size > ZIP_EXPANDED_BYTES:
                        raise TooLarge(f"{where}: {entry.filename} expands to more than "
                                       f"{min(bound, ZIP_EXPANDED_BYTES) // MB} MB")
            expanded += size
