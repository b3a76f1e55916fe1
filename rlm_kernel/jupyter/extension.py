"""``%load_ext rlm_kernel``: what loading the extension wires into a shell."""

from __future__ import annotations

from typing import Any

from ..termination import FinalOutput
from .magic import RLMMagics
from .session import (
    bind_session_tools,
    final_outside_run,
    keep_busy_status,
    keep_task_count,
    protect_question_mark,
)

__all__ = ["load_ipython_extension"]


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext rlm_kernel``: register the magic and the out-of-run helpers."""
    keep_task_count(getattr(shell, "kernel", None))
    if protect_question_mark not in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.append(protect_question_mark)
    magics = RLMMagics(shell=shell, parent=shell)
    shell.register_magics(magics)
    keep_busy_status(getattr(shell, "kernel", None), lambda: magics.running)
    shell.configurables.append(magics)
    bind_session_tools(shell, magics.sub_model or magics.model or None)
    shell.set_custom_exc((FinalOutput,), final_outside_run)
