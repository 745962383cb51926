"""``BoundedKernelManager``: the jupyter_client kernel manager nbgrader's Execute starts a submission's kernel with.
Its clients' sockets are bounded (``BoundedKernelClient``). Configured like any traitlets class (nbclient passes
Execute's config on): ``env``, the environment its kernels start with (plus nbgrader's own ``NBGRADER_EXECUTION``;
None: this process's); ``kernel_dirs``, kernelspec folders searched first; ``output``, the file its kernels' stdout
and stderr go to (appended; '': this process's)."""
from __future__ import annotations

import os
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.paths import jupyter_path
from traitlets import Dict, List, Unicode, default

from .bounded_kernel_client import BoundedKernelClient

# What nbgrader sets in its own environment for the kernels it starts (``utils.setenv``): passed on to them.
NBGRADER_ENV = ("NBGRADER_EXECUTION", "NBGRADER_VALIDATING")


class BoundedKernelManager(AsyncKernelManager):
    env = Dict(default_value=None, allow_none=True, help="the kernel's environment (None: ours)").tag(config=True)
    kernel_dirs = List(Unicode(), help="kernelspec folders searched first").tag(config=True)
    output = Unicode("", help="the file the kernel's stdout and stderr go to ('': this process's)").tag(config=True)

    @default("client_factory")
    def _bounded_client(self):
        return BoundedKernelClient

    @default("kernel_spec_manager")
    def _own_kernel_specs(self):
        return KernelSpecManager(parent=self, kernel_dirs=[*self.kernel_dirs, *jupyter_path("kernels")])

    async def _async_pre_start_kernel(self, **kwargs):
        if self.env is not None:
            kwargs["env"] = {**self.env, **{name: os.environ[name] for name in NBGRADER_ENV if name in os.environ}}
        if self.output:
            Path(self.output).parent.mkdir(parents=True, exist_ok=True)  # a self-check's data folder is made later
            self._output = open(self.output, "ab")  # noqa: SIM115 - the kernel holds it; ours closes once it runs
            kwargs["stdout"] = kwargs["stderr"] = self._output
        return await super()._async_pre_start_kernel(**kwargs)

    async def _async_post_start_kernel(self, **kwargs):
        if getattr(self, "_output", None) is not None:
            self._output.close()
            self._output = None
        return await super()._async_post_start_kernel(**kwargs)
