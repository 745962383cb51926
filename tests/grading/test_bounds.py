"""What the grader reads of a student's work, bounded before it is read (``bounds``): no kernel, no Spark."""
from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import nbformat
import pytest

from streamlab.grading import bounds
from streamlab.grading.steps.bounded_execute import BoundedExecute
from streamlab.grading.steps.bounded_kernel_client import BoundedKernelClient

ROOT = Path(__file__).resolve().parents[2]


def _checkpoint(root):
    for folder in ("offsets", "commits", "state/0/0"):
        (root / folder).mkdir(parents=True)
    (root / "metadata").write_text(json.dumps({"id": "x"}))
    (root / "offsets" / "0").write_text("v1\n{}\n")
    (root / "commits" / "0").write_text("v1\n{}\n")
    with zipfile.ZipFile(root / "state/0/0/1.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("metadata", json.dumps({"sstFiles": []}))
        archive.writestr("000008.sst", b"\x00" * 4096)
    return root


def test_a_checkpoint_as_spark_writes_it_passes(tmp_path):
    bounds.scan_checkpoint(_checkpoint(tmp_path / "ckpt"))


def test_a_state_zip_that_expands_is_refused_by_what_it_expands_to(tmp_path):
    root = _checkpoint(tmp_path / "ckpt")
    with zipfile.ZipFile(root / "state/0/0/2.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("metadata", "w", force_zip64=True) as entry:
            for _ in range(3):
                entry.write(b" " * 2**20)
    with pytest.raises(bounds.TooLarge, match="metadata says it expands to 3 MB"):
        bounds.scan_checkpoint(root)


def test_a_zip_whose_header_lies_is_refused(tmp_path):
    """Its headers say 10 bytes; its data expands to 200 MB (Java's ZipInputStream writes all of it out)."""
    root = _checkpoint(tmp_path / "ckpt")
    path = root / "state/0/0/2.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("000009.sst", b"\x00" * (200 * 2**20))
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # uncompressed size: local, central
        at = data.find(signature)
        data[at + offset:at + offset + 4] = struct.pack("<I", 10)
    path.write_bytes(bytes(data))
    with pytest.raises(bounds.TooLarge, match="not a zip Spark can read|expands"):
        bounds.scan_checkpoint(root)


@pytest.mark.parametrize("make, message", [
    (lambda root: (root / "offsets" / "1").write_bytes(b"v1\n" + b" " * (2 * 2**20)), "offsets/1 is 2048 kB"),
    pytest.param(lambda root: [(root / "state" / f"f{i}").write_text("") for i in range(bounds.CHECKPOINT_FILES + 1)],
                 "more than 20000 files", marks=pytest.mark.slow),  # 20,001 files made
    (lambda root: (root / "link").symlink_to("/etc/passwd"), "link is not a regular file"),
])
def test_a_checkpoint_past_a_cap_is_refused(tmp_path, make, message):
    root = _checkpoint(tmp_path / "ckpt")
    make(root)
    with pytest.raises(bounds.TooLarge, match=message):
        bounds.scan_checkpoint(root)


class _Messages:
    """Feeds nbclient-style messages to the grader's Execute preprocessor's ``output`` (no kernel)."""

    def __init__(self):
        self.execute = BoundedExecute()
        self.execute.reset_execution_trackers()
        self.execute.clear_before_next_output = False  # set per cell by nbclient as it starts one
        self.execute._kept, self.execute._noted, self.execute._total = {}, set(), 0
        self.execute._sizes = {}

    @staticmethod
    def message(size, kind="display_data", display_id=None):
        return {"msg_type": kind, "parent_header": {"msg_id": "m"}, "header": {"msg_type": kind},
                "content": {"data": {"image/png": "A" * size}, "metadata": {},
                            "transient": {"display_id": display_id} if display_id else {}}}

    def send(self, outs, cell_index, size, display_id=None):
        self.execute.output(outs, self.message(size, display_id=display_id), display_id, cell_index)

    def update(self, display_id, size):
        self.execute._update_display_id(display_id, self.message(size, "update_display_data", display_id))


def test_outputs_are_kept_up_to_each_cells_and_the_notebooks_cap():
    feed = _Messages()
    first: list = []
    for _ in range(4):
        feed.send(first, 0, 400_000)
    kept = [o for o in first if o.output_type == "display_data"]
    notes = [o for o in first if o.output_type == "stream"]
    assert len(kept) == 2 and len(notes) == 1 and "this cell's outputs are limited to 1 MB" in notes[0].text
    for cell in range(1, 20):
        outs: list = []
        feed.send(outs, cell, 900_000)
    assert feed.execute._total <= bounds.NOTEBOOK_OUTPUT_BYTES
    assert "the notebook's outputs are limited to 5 MB" in outs[-1].text
    assert nbformat.v4.new_notebook()  # the notes are real nbformat outputs


def test_a_display_update_counts_once_for_every_output_it_is_copied_into():
    """One update of 0.9 MB, shown by display id in 1,000 outputs: the old cap looked at the update alone, so
    nbclient copied it into all of them and the notebook the worker wrote was 950 MB (the worker 3.7 GB)."""
    feed = _Messages()
    feed.execute.nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell() for _ in range(10)])
    for cell in feed.execute.nb.cells:
        cell.outputs = []
    for index, cell in enumerate(feed.execute.nb.cells):
        for _ in range(100):
            feed.send(cell.outputs, index, 10, display_id="same")
    feed.update("same", 900_000)
    written = len(nbformat.writes(feed.execute.nb))
    assert written < bounds.NOTEBOOK_OUTPUT_BYTES, f"the notebook as written: {written / 2**20:.0f} MB"
    assert all(len(o.data["image/png"]) == 10 for c in feed.execute.nb.cells for o in c.outputs)


def test_display_updates_that_replace_their_own_size_keep_coming():
    """sl.watch redraws one picture per batch by display id: each update replaces the last, so 50 of them
    in one output cost the size of one."""
    feed = _Messages()
    feed.execute.nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell()])
    outs = feed.execute.nb.cells[0].outputs = []
    feed.send(outs, 0, 60_000, display_id="watch")
    for batch in range(50):
        feed.update("watch", 60_000 + batch)
    assert len(outs[0].data["image/png"]) == 60_049
    assert feed.execute._kept[0] < 2 * 70_000


def test_a_notebook_of_millions_of_objects_is_refused_before_it_is_parsed():
    """A 20 MB notebook whose metadata was [{},{},...] took the worker to 14 GB in nbgrader's hands."""
    from streamlab.grading.run.submissions import check_notebook_bytes

    swollen = b'{"cells": [], "metadata": {"x": [' + b"{}," * 7_000_000 + b'{}]}, "nbformat": 4, "nbformat_minor": 5}'
    why = check_notebook_bytes(swollen, "swollen.ipynb")
    assert why and "7000005 JSON objects and arrays" in why
    for lab in sorted((ROOT / "solutions").glob("lab*/lab*.ipynb")):
        assert bounds.json_containers(lab.read_bytes()) < bounds.NOTEBOOK_CONTAINERS / 20, lab
    assert bounds.json_containers(b'["{[", {"a": "\\"}"}]') == 2  # brackets inside strings do not count


def test_the_kernel_clients_sockets_refuse_large_messages():
    import zmq
    import zmq.asyncio

    context = zmq.asyncio.Context()
    client = BoundedKernelClient(context=context)
    client.ip, client.transport, client.iopub_port = "127.0.0.1", "tcp", 1  # nothing listens: connect is lazy
    socket = client._create_connected_socket("iopub")
    try:
        assert socket.getsockopt(zmq.MAXMSGSIZE) == bounds.KERNEL_MESSAGE_BYTES
        assert socket.getsockopt(zmq.RCVHWM) == bounds.KERNEL_MESSAGES_QUEUED
    finally:
        context.destroy(linger=0)  # the socket and what watches it


@pytest.mark.parametrize("channel", ["iopub", "shell"])
@pytest.mark.slow
def test_a_connection_dropped_for_a_message_past_the_bound_is_connected_again(channel):
    """ZeroMQ drops the connection that brought a message over the bound and never connects that socket again: one
    20 MB output cost every later cell its outputs (and each the wait for its "idle"); one 20 MB execute reply (a
    payload, ``set_next_input``) left every later cell without its reply, each waiting out the cell limit."""
    import zmq
    import zmq.asyncio

    context = zmq.asyncio.Context()
    kernel_type = {"iopub": zmq.PUB, "shell": zmq.ROUTER}[channel]
    kernel = zmq.Context.shadow(context.underlying).socket(kernel_type)  # the kernel's side of the channel
    client = BoundedKernelClient(context=context)
    client.ip, client.transport = "127.0.0.1", "tcp"
    setattr(client, f"{channel}_port", kernel.bind_to_random_port("tcp://127.0.0.1"))
    made = client._create_connected_socket(channel, identity=b"grader" if channel == "shell" else None)
    socket = zmq.Socket.shadow(made.underlying)  # read without an event loop
    if channel == "iopub":
        socket.setsockopt(zmq.SUBSCRIBE, b"")

    def said(word: bytes) -> bytes | None:
        for _ in range(40):  # a PUB socket sends nothing until the subscription arrives; a ROUTER, until asked
            if channel == "shell":
                try:
                    socket.send(b"request", zmq.NOBLOCK)  # a DEALER with no connection would wait here
                except zmq.Again:
                    pass
                if kernel.poll(50):
                    kernel.recv_multipart()
            kernel.send_multipart([b"grader", word] if channel == "shell" else [word])
            if socket.poll(50):
                return socket.recv()
        return None

    try:
        assert said(b"before") == b"before"
        assert client.reconnect_dropped() == []  # nothing was dropped: nothing is connected again
        kernel.send_multipart(([b"grader"] if channel == "shell" else []) + [b"x" * (bounds.KERNEL_MESSAGE_BYTES + 1)])
        assert said(b"after") is None, "ZeroMQ kept the connection: this test proves nothing"
        assert client.reconnect_dropped() == [client._make_url(channel)]
        assert said(b"again") == b"again"
    finally:
        kernel.close(linger=0)
        context.destroy(linger=0)  # the client's sockets and what watches them: nothing keeps the context open


def _nest(root, depth: int, name: str = "dddddddddd") -> None:
    """``depth`` folders within folders under ``root``, made with dir_fd (so far past PATH_MAX)."""
    import os

    here = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir(name, dir_fd=here)
        deeper = os.open(name, os.O_RDONLY, dir_fd=here)
        os.close(here)
        here = deeper
    os.close(here)


@pytest.fixture
def nested(tmp_path):
    """``tmp_path``, whose nested folders are removed by ``rm`` afterwards (pytest's own clean-up recurses
    once per folder level)."""
    import subprocess

    yield tmp_path
    subprocess.run(["rm", "-rf", str(tmp_path)], check=False, timeout=60)


def test_a_checkpoint_nested_hundreds_deep_is_refused(nested):
    root = _checkpoint(nested / "ckpt")
    _nest(root / "state", 500)
    with pytest.raises(bounds.TooLarge, match="nested more than 32 deep"):
        bounds.scan_checkpoint(root)


def test_the_grader_walks_a_work_folder_nested_past_path_max_without_failing(nested):
    """A submission left 500 nested folders (paths far past PATH_MAX): making its folder safe and readable
    failed the worker with ENAMETOOLONG, a grader error every run. Now the walk stops at FOLDER_DEPTH."""
    from streamlab.grading.sandbox.box import untrusted_folder

    work = nested / "work"
    (work / "data").mkdir(parents=True)
    _nest(work / "data", 500)  # 5,500 characters: past PATH_MAX, within what rmtree cleans
    (work / "data" / "link").symlink_to("/etc/passwd")
    assert untrusted_folder(work, readable=True) == ["data/link"]


SLOW_TO_STOP = """
import time
try:
    time.sleep(600)
except KeyboardInterrupt:  # interrupted at its time limit: it stops, but takes a while (cleanup, a loaded machine)
    time.sleep(8)
    raise
"""


@pytest.mark.slow
def test_a_cell_slow_to_stop_when_interrupted_costs_only_itself(tmp_path):
    """A cell that reaches its time limit is interrupted, and one that then stops, however slowly, costs only itself.
    nbclient gave the kernel 4 s to say it had stopped, then ended the notebook there: every later part was lost
    (lab 01's h_slow_cell, whose awaitTermination() took longer than that under the suite's load). The grace is
    bounds.INTERRUPT_GRACE_S."""
    assert bounds.INTERRUPT_GRACE_S > 8 + 4
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SLOW_TO_STOP.strip()),
                                         nbformat.v4.new_code_cell("print('the next cell ran')")])
    execute = BoundedExecute(timeout=2, kernel_name="python3")
    ran, _ = execute.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert "KeyboardInterrupt" in [o.get("ename") for o in ran.cells[0].outputs if o.output_type == "error"]
    assert [o.get("text") for o in ran.cells[1].outputs] == ["the next cell ran\n"]
    assert execute.iopub_timeout < bounds.INTERRUPT_GRACE_S, "the grace is for the interrupted cell alone"


def test_every_bound_is_here():
    """A limit is a line of bounds.py, named by what it bounds, never a constant of the module that enforces it: a
    module-level number named like a bound (MAX_..., ..._BYTES, ..._MB, ..._S, ...) anywhere else in the grader fails
    this test with its place."""
    import re
    from pathlib import Path

    named_like_a_bound = re.compile(r"^((?:MAX|MIN)_\w+|\w+_(?:BYTES|CHARS|MB|S|ROWS|BATCHES|IDS|CONNECTIONS|TOPICS|"
                                    r"PARTITIONS|FOLLOWED|DEPTH|SHOWN|PER_CHECK|NAMED))\s*(?::[^=]+)?=\s*[0-9(]", re.M)
    grading = Path(bounds.__file__).parent
    elsewhere = {f"{path.relative_to(grading)}: {name}" for path in sorted(grading.rglob("*.py"))
                 if path.name != "bounds.py" for name in named_like_a_bound.findall(path.read_text(encoding="utf-8"))}
    assert elsewhere == {"outputs/feedback.py: MIN_QUOTED", "release.py: MIN_KEY_LINE",  # thresholds, not caps
                         "sandbox/kafka_requests.py: BROKER_DEFAULT_PARTITIONS"}, elsewhere  # a fact of the broker
    here = named_like_a_bound.findall(Path(bounds.__file__).read_text(encoding="utf-8"))
    assert {"KAFKA_TOPICS", "SUBMISSION_TIMEOUT_S", "TRACE_ROWS", "WORKER_MEMORY_MB", "NOTEBOOK_BYTES"} <= set(here)


def test_the_checks_look_for_a_committed_batch_in_what_a_student_can_make_of_the_folder(tmp_path, monkeypatch):
    """While the notebook runs, the checks' process looks in the student's data folder for a committed batch (its
    Spark starts then): a look that opens no file, follows no link and stops after ``CHECKS_LOOK_ENTRIES`` folders,
    whatever the student put there."""
    import os

    from streamlab.grading.workers.checks_runner import committed_batch_in

    data = tmp_path / "data"
    assert not committed_batch_in(data)                        # nothing yet
    data.mkdir()
    os.mkfifo(data / "checkpoints")                            # a FIFO where the folder goes: never opened
    assert not committed_batch_in(data)
    (data / "checkpoints").unlink()
    ckpts = data / "checkpoints"
    ckpts.mkdir()
    (ckpts / "loop").symlink_to(ckpts)                         # a link back into itself, with commits through it
    (ckpts / "elsewhere").symlink_to(_checkpoint(tmp_path / "not-the-students"))
    (ckpts / "fifo-0a1b2c").mkdir()
    os.mkfifo(ckpts / "fifo-0a1b2c" / "commits")               # commits as a FIFO
    (ckpts / "empty-0a1b2c" / "commits").mkdir(parents=True)   # a query that started and committed nothing
    assert not committed_batch_in(data)
    monkeypatch.setattr(bounds, "CHECKS_LOOK_ENTRIES", 3)
    assert committed_batch_in(data)                            # past the bound: the checks start Spark (as before)
    monkeypatch.setattr(bounds, "CHECKS_LOOK_ENTRIES", 1_000)
    (ckpts / "empty-0a1b2c" / "commits" / "0").write_text("v1\n{}\n")
    assert committed_batch_in(data)                            # a committed batch
