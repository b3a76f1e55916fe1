"""Where model code runs: the :class:`Executor` protocol the engine calls, the plain
``exec`` executor, and what every step needs whatever runs it: the time limit
(``timeouts``), the process state a step may not keep (``host_state``), capped and
coalesced streams (``streams``), secret redaction (``redaction``) and the muting of
threads a step leaves running (``thread_output``).  The IPython executor that runs
steps through a kernel's shell is Jupyter's (``rlm_kernel.jupyter.shell_executor``).
"""

from __future__ import annotations

from .plain import Executor, OutputCallback, PlainExecutor, StreamTee, combined_output

__all__ = ["Executor", "PlainExecutor", "OutputCallback", "StreamTee", "combined_output"]
