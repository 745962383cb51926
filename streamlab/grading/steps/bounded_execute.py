"""``BoundedExecute``: nbgrader's ``Execute`` preprocessor, keeping at most ``bounds.CELL_OUTPUT_BYTES`` of each
cell's outputs and ``bounds.NOTEBOOK_OUTPUT_BYTES`` of the notebook's, as they arrive: an output past a bound is never
kept, only a note saying so (the kernel's messages themselves are bounded by ``BoundedKernelClient``).

With ``progress`` set (a file's path), the notebook is also saved there after every cell, and at the end with
``streamlab_progress`` in its metadata: ``{"complete": true}``, or ``{"error": ...}`` when the run stopped (the first
cell not run is the one that was running). So a run stopped at the whole-notebook limit, or by a dead kernel, still
shows how far it got (``streamlab check``)."""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
from nbclient.util import run_sync
from nbgrader.preprocessors import Execute
from traitlets import Unicode

from ..bounds import CELL_OUTPUT_BYTES, INTERRUPT_GRACE_S, MB, NOTEBOOK_OUTPUT_BYTES


def _size(msg) -> int:
    return len(json.dumps(msg.get("content", {}), default=str))


class BoundedExecute(Execute):
    progress = Unicode("", help="save the notebook here after every cell ('': not saved)").tag(config=True)
    # The exception that stopped the last run (None: none did), as the grader saw it: its type says whether
    # the kernel died or a cell could not be stopped, never text the notebook printed.
    last_failure: BaseException | None = None

    # A kernel message over KERNEL_MESSAGE_BYTES is dropped by ZeroMQ with its connection (connected again before
    # the next cell); a cell whose "idle" was dropped with it ends after iopub_timeout instead of failing the
    # whole notebook. But a cell that hit its time limit and was interrupted keeps nbgrader's rule: no "idle" then
    # means the kernel did not stop, and the notebook ends there ("did not stop when interrupted"). It is given
    # INTERRUPT_GRACE_S to stop, not nbclient's 4 s: a loaded machine can take longer to stop a cell that
    # stops, and ending the notebook there costs every later part.
    async def async_execute_cell(self, *args, **kwargs):
        self.raise_on_iopub_timeout = False
        if self._configured_iopub_timeout is None:
            self._configured_iopub_timeout = self.iopub_timeout
        self.iopub_timeout = self._configured_iopub_timeout
        # a connection ZeroMQ dropped for an earlier cell's message is connected again: this cell's outputs count
        reconnect = getattr(self.kc, "reconnect_dropped", None)
        if reconnect is not None:
            reconnect()
        return await super().async_execute_cell(*args, **kwargs)

    execute_cell = run_sync(async_execute_cell)  # nbclient binds its own at class level

    _configured_iopub_timeout = None  # iopub_timeout as configured, for every cell that was not interrupted

    async def _async_handle_timeout(self, timeout, cell=None):
        self.raise_on_iopub_timeout = True
        self.iopub_timeout = max(self.iopub_timeout, INTERRUPT_GRACE_S)
        return await super()._async_handle_timeout(timeout, cell)

    def preprocess(self, nb, resources=None, km=None):
        self._kept = {}        # cell index -> bytes of output kept
        self._sizes = {}       # (cell index, output index) -> bytes, of the outputs shown with a display id
        self._noted = set()    # cells whose outputs were cut (noted once)
        self._total = 0
        try:
            nb, resources = super().preprocess(nb, resources, km)
        except Exception as err:  # the kernel died, or a cell could not be interrupted
            type(self).last_failure = err
            # the cells that finished, as last saved: the first one missing is the one that was running
            last = Path(self.progress) if self.progress else None
            saved = nbformat.read(last, as_version=4) if last and last.exists() else nb
            self._save_progress(saved, {"error": f"{type(err).__name__}: {str(err).strip()[:300]}"})
            raise
        self._save_progress(nb, {"complete": True})
        return nb, resources

    def on_cell_executed(self, **kwargs):
        super().on_cell_executed(**kwargs)
        self._save_progress(self.nb)

    def _save_progress(self, nb, end: dict | None = None) -> None:
        if not self.progress or nb is None:
            return
        path = Path(self.progress)
        copy = nbformat.from_dict(nb)
        if end is not None:
            copy.metadata["streamlab_progress"] = end
        nbformat.write(copy, path.with_suffix(".tmp"))
        path.with_suffix(".tmp").replace(path)

    def output(self, outs, msg, display_id, cell_index):
        size = _size(msg)
        kept = self._kept.get(cell_index, 0)
        if kept + size > CELL_OUTPUT_BYTES or self._total + size > NOTEBOOK_OUTPUT_BYTES:
            if cell_index not in self._noted:
                self._noted.add(cell_index)
                cell_full = kept + size > CELL_OUTPUT_BYTES
                where, bound = ("this cell's", CELL_OUTPUT_BYTES) if cell_full else \
                    ("the notebook's", NOTEBOOK_OUTPUT_BYTES)
                outs.append(nbformat.v4.new_output(
                    "stream", name="stdout",
                    text=f"[the grader kept no more output here: {where} outputs are limited to "
                         f"{bound // MB} MB]\n"))
            return None
        self._kept[cell_index] = kept + size
        self._total += size
        out = super().output(outs, msg, display_id, cell_index)
        if out is not None and display_id:
            self._sizes[(cell_index, len(outs) - 1)] = size
        return out

    def _update_display_id(self, display_id, msg):
        # nbclient puts the update into every output shown with that display id, and the notebook is
        # written with a copy in each: every copy counts, less the output it replaces
        size = _size(msg)
        targets = [(cell, index) for cell, indices in self._display_id_map.get(display_id, {}).items()
                   for index in indices]
        grows: dict[int, int] = {}
        for cell, index in targets:
            grows[cell] = grows.get(cell, 0) + size - self._sizes.get((cell, index), 0)
        if size > CELL_OUTPUT_BYTES or self._total + sum(grows.values()) > NOTEBOOK_OUTPUT_BYTES or any(
                self._kept.get(cell, 0) + more > CELL_OUTPUT_BYTES for cell, more in grows.items()):
            return  # not kept: the outputs keep what they showed
        for cell, more in grows.items():
            self._kept[cell] = self._kept.get(cell, 0) + more
        self._total += sum(grows.values())
        self._sizes.update({target: size for target in targets})
        super()._update_display_id(display_id, msg)
