"""``%load_ext rlm_kernel``: what loading the extension wires into a shell.

It registers things through IPython's own APIs only (a magic, an input transformer, a
custom exception handler, the out-of-run helpers as the shell's builtins, never names
of the user's namespace: :mod:`~rlm_kernel.jupyter.session`) and patches no kernel or
shell method.  The task cell's own execution count and the "busy" status for a whole run
come from :class:`~rlm_kernel.jupyter.kernel.RLMKernel`'s overrides, so a ``python3``
kernel with this extension has neither (a task cell there shows its last step's count).
"""

from __future__ import annotations

import sys
from typing import Any

from ..engine.frontends import prewarm
from ..executors import host_thread_type
from ..models import LLMError
from ..termination import FinalOutput
from .magic import RLMMagics
from .prose import register_prose_hint
from .session import bind_session_functions, final_outside_run, protect_question_mark
from .settings import register_section

__all__ = ["load_ipython_extension"]


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext rlm_kernel``: register the magic and the out-of-run helpers, and
    (``c.RLM.warm_start``) start warming the root model in the background
    (:func:`~rlm_kernel.engine.session.warmup.prewarm`)."""
    if protect_question_mark not in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.append(protect_question_mark)
    magics = RLMMagics(shell=shell, parent=shell)
    shell.register_magics(magics)
    shell.configurables.append(magics)
    register_section(shell, magics)  # %config RLM lists the options
    register_prose_hint(shell, lambda: magics.session.running)  # `hello`: tasks are prose or %%rlm
    config = magics.run_config()
    model, sub_model = config.models()
    try:
        bind_session_functions(shell, sub_model, router=config.router)
    except LLMError as exc:  # a bad c.RLM.router: said now, and again by each task
        print(f"RLM: {exc}", file=sys.stderr)
        bind_session_functions(shell, sub_model)
    shell.set_custom_exc((FinalOutput,), final_outside_run)
    _kernel_threads_are_the_kernels()
    if magics.warm_start:  # litellm imported, the embedded model's prompt head read
        prewarm(model)


def _kernel_threads_are_the_kernels() -> None:
    """ipykernel's subshell threads (JupyterLab asks for one when a run's widgets
    appear) and pyzmq's garbage collector thread (started when the kernel first sends a
    large message, e.g. a flood's output shown while a step runs) are the kernel's: a
    step they start in is not told it left a thread, and their output is never dropped."""
    try:  # pyzmq's collector of zero-copy frames, started at the kernel's first large send
        from zmq.utils.garbage import GarbageCollectorThread
    except ImportError:  # not in a kernel
        pass
    else:
        host_thread_type(GarbageCollectorThread)
    try:
        from ipykernel.subshell import SubshellThread
    except ImportError:  # ipykernel before subshells, or not in a kernel
        return
    host_thread_type(SubshellThread)
