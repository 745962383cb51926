"""``SandboxKernelManager``: a ``BoundedKernelManager`` for a kernel in the sandbox. Its connection file and sockets
(the ``ipc`` transport: socket files, no TCP) are in ``folder``, the folder the sandbox shares, as the sandbox has
no network of the grader's to listen on; with ``uid`` set (the grader is root), the kernel's user owns the
connection file, so that it can read it."""
from __future__ import annotations

import os
import uuid
from pathlib import Path

from traitlets import Integer, Unicode

from .bounded_kernel_manager import BoundedKernelManager


class SandboxKernelManager(BoundedKernelManager):
    folder = Unicode(help="the folder of the kernel's connection file and sockets").tag(config=True)
    uid = Integer(None, allow_none=True, help="the sandbox's user (None: the grader's own)").tag(config=True)

    async def _async_pre_start_kernel(self, **kwargs):
        name = Path(self.folder) / f"kernel-{uuid.uuid4().hex[:12]}"
        self.transport = "ipc"
        self.connection_file = f"{name}.json"
        self.ip = f"{name}-ipc"
        started = await super()._async_pre_start_kernel(**kwargs)
        if self.uid is not None:
            os.chown(self.connection_file, self.uid, self.uid)
        return started
