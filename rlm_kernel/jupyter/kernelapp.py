"""``RLMKernelApp``: ipykernel's kernel application, started with the RLM kernel.

    python -m rlm_kernel -f CONNECTION_FILE      (what the kernelspec runs)
    jupyter rlm --help-all                       every option, c.RLMKernel and c.RLM

Configuration is read as for the ``python3`` kernel (``ipython_kernel_config.py`` in
the IPython profile) and then from ``rlm_kernel_config.py`` beside it, e.g.::

    c.RLMKernel.prose_tasks = False
    c.RLM.model = "openai/gpt-4o-mini"
    c.RLM.max_llm_calls = 50

Behind Jupyter Kernel Gateway or Enterprise Gateway the kernel starts in the gateway's
working folder; JupyterLab names the notebook's folder in ``KERNEL_WORKING_DIR``.  The
kernel moves there when that folder exists on its machine (a gateway on the lab's
machine, or a shared file system), so relative paths in cells mean what they mean
beside the notebook (``RLMKernelApp.follow_working_dir``).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ipykernel.kernelapp import IPKernelApp
from ipykernel.kernelbase import Kernel
from traitlets import Bool, Type, default

from .kernel import RLMKernel
from .settings import RLMSettings

__all__ = ["WORKING_DIR_ENV", "RLMKernelApp", "main"]

WORKING_DIR_ENV = "KERNEL_WORKING_DIR"
"""The variable in which a gateway client (JupyterLab's ``GatewayClient``) names the
notebook's folder for a kernel it asks a gateway to start."""


class RLMKernelApp(IPKernelApp):
    """The kernel application of the ``rlm`` kernelspec (as ``IPKernelApp`` with
    ``kernel_class = RLMKernel``; its ``classes`` add the RLM sections to the help)."""

    name = "rlm-kernel"
    description = ("The RLM kernel: IPython whose %%rlm cells and prose cells are Recursive "
                   "Language Model tasks run in the live namespace.")
    classes = [*IPKernelApp.classes, RLMKernel, RLMSettings]

    kernel_class = Type(RLMKernel, klass=Kernel,
                        help="The kernel class (default: the RLM kernel).").tag(config=True)

    follow_working_dir = Bool(
        True, help=f"Start in the folder ${WORKING_DIR_ENV} names (a gateway's kernel: the "
                   "notebook's folder, sent by JupyterLab) when it exists here; else stay in "
                   "the folder the kernel was started in.").tag(config=True)

    @default("config_files")
    def _config_files_default(self) -> list[str]:
        return ["ipython_kernel_config.py", "rlm_kernel_config.py"]

    def initialize(self, argv: list[str] | None = None) -> None:
        """ipykernel's set-up, then :meth:`init_working_dir`."""
        super().initialize(argv)
        self.init_working_dir()

    def init_working_dir(self) -> None:
        """Move to the folder ``$KERNEL_WORKING_DIR`` names if it exists here and
        :attr:`follow_working_dir` is on (Kernel Gateway starts every kernel in its own
        working folder and leaves the variable to the kernel); log either way."""
        folder = os.environ.get(WORKING_DIR_ENV)
        if not folder or not self.follow_working_dir:
            return
        if not os.path.isdir(folder):
            self.log.info("%s=%s is not a folder here (a gateway on another machine?): "
                          "the kernel stays in %s", WORKING_DIR_ENV, folder, os.getcwd())
            return
        os.chdir(folder)
        if self.shell is not None:  # IPython's directory history starts here, not there
            self.shell.user_ns["_dh"] = [os.getcwd()]
        self.log.info("working folder: %s (%s)", os.getcwd(), WORKING_DIR_ENV)

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
