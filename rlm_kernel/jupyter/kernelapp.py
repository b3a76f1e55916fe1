"""``RLMKernelApp``: ipykernel's kernel application, started with the RLM kernel.

    python -m rlm_kernel -f CONNECTION_FILE      (what the kernelspec runs)
    jupyter rlm --help-all                       every option, c.RLMKernel and c.RLM

Configuration is read as for the ``python3`` kernel (``ipython_kernel_config.py`` in
the IPython profile) and then from ``rlm_kernel_config.py`` beside it, e.g.::

    c.RLMKernel.prose_tasks = False
    c.RLM.model = "openai/gpt-4o-mini"
    c.RLM.max_llm_calls = 50
"""

from __future__ import annotations

import logging
from typing import Any

from ipykernel.kernelapp import IPKernelApp
from ipykernel.kernelbase import Kernel
from traitlets import Type, default

from .kernel import RLMKernel
from .settings import RLMSettings

__all__ = ["RLMKernelApp", "main"]


class RLMKernelApp(IPKernelApp):
    """The kernel application of the ``rlm`` kernelspec (as ``IPKernelApp`` with
    ``kernel_class = RLMKernel``; its ``classes`` add the RLM sections to the help)."""

    name = "rlm-kernel"
    description = ("The RLM kernel: IPython whose %%rlm cells and prose cells are Recursive "
                   "Language Model tasks run in the live namespace.")
    classes = [*IPKernelApp.classes, RLMKernel, RLMSettings]

    kernel_class = Type(RLMKernel, klass=Kernel,
                        help="The kernel class (default: the RLM kernel).").tag(config=True)

    @default("config_files")
    def _config_files_default(self) -> list[str]:
        return ["ipython_kernel_config.py", "rlm_kernel_config.py"]

    def init_io(self) -> None:
        """ipykernel's stream set-up, then the package's log records (``rlm_kernel.*``
        loggers: an engine error with its traceback, a failed model call, the embedded
        server starting) go to the kernel application's own log handlers, which
        ipykernel points at the process's real stderr (the Jupyter server shows it as
        the kernel's log), never into a cell's output; the application's ``log_level``
        (``--log-level``, default WARN) filters them as it does its own."""
        super().init_io()
        package = logging.getLogger("rlm_kernel")
        for handler in self.log.handlers:
            if handler not in package.handlers:
                package.addHandler(handler)
        package.setLevel(logging.INFO)
        package.propagate = False  # not also into a cell through the root logger


def main(argv: list[str] | None = None, **kwargs: Any) -> None:
    """Start the kernel (``jupyter rlm`` / ``python -m rlm_kernel``)."""
    RLMKernelApp.launch_instance(argv=argv, **kwargs)
