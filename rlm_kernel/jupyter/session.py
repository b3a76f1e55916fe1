"""The session around runs: ``llm_query`` & co. bound outside runs, ``FINAL`` outside a
run shown as an answer, ``%rlm ...?`` kept a task, and the task cell's own execution
count kept (ipykernel's reply would give the last step's)."""

from __future__ import annotations

import re
import sys
from typing import Any

from ..termination import format_final_answer, resolve_final_var

__all__ = ["bind_session_tools", "final_outside_run", "keep_busy_status", "keep_task_count",
           "protect_question_mark"]


def bind_session_tools(shell: Any, sub_model: str | None,
                       recorded: list[dict[str, Any]] | None = None) -> None:
    """Bind ``llm_query`` & co. for use outside runs (re-running an exported notebook).

    Args:
        shell: the IPython shell whose namespace gets the functions.
        sub_model: litellm model string of ``llm_query`` (None: the embedded model).
        recorded: a run's recorded exchanges to answer from first (``%%rlm recorded``).
    """
    from ..engine.tools import session_tools

    tools = session_tools(sub_model, shell.user_ns, recorded=recorded)
    functions = tools.functions()

    def final(answer: Any) -> None:
        """Outside a run: show the answer and keep it in ``rlm_answer``."""
        _show_final(shell, {"type": "direct", "answer": answer})

    def final_var(variable_name: str) -> None:
        """Outside a run: show the named variable as the answer."""
        _show_final(shell, {"type": "variable", "var": variable_name})

    functions.update(FINAL=final, FINAL_VAR=final_var)
    shell.user_ns.update(functions)


def _show_final(shell: Any, out: dict[str, Any]) -> None:
    from IPython.display import display

    try:
        answer = (resolve_final_var(out["var"], shell.user_ns) if out.get("type") == "variable"
                  else out.get("answer"))
    except KeyError as exc:
        print(f"FINAL_VAR: {exc.args[0]}", file=sys.stderr)
        return
    shell.user_ns["rlm_answer"] = answer
    display({"text/plain": f"Final answer: {format_final_answer(answer)}"}, raw=True)


def final_outside_run(shell, etype, value, tb, tb_offset=None):
    """A ``FinalOutput`` raised outside a run (e.g. ``termination.FINAL`` imported
    directly): show the answer instead of a traceback."""
    _show_final(shell, value.output)
    return None


_RLM_LINE = re.compile(r"^(\s*)%rlm\s(.*\?)\s*$")


def protect_question_mark(lines: list[str]) -> list[str]:
    """Input transformer: ``%rlm Which file ...?`` stays a task.

    IPython reads a line ending in ``word?`` as a help request for ``word``;
    this runs before that rule and turns such ``%rlm`` lines into a call of
    the magic with the whole text.
    """
    out = []
    for line in lines:
        match = _RLM_LINE.match(line)
        if match:
            line = f"{match.group(1)}get_ipython().run_line_magic('rlm', {match.group(2)!r})\n"
        out.append(line)
    return out


def keep_task_count(kernel: Any) -> None:
    """Make a running ipykernel report a task cell's own execution count.

    ipykernel replies with ``shell.execution_count - 1`` after the cell, which,
    once a task's steps have taken counts of their own, is the last step's.  The
    kernel instance's ``do_execute`` (the RLM kernel's included: it loads this
    extension at start) is wrapped to report the count the cell started with.
    """
    if kernel is None or getattr(kernel, "_rlm_keeps_task_count", False):
        return
    original = kernel.do_execute

    async def do_execute(code: str, silent: bool, store_history: bool = True,
                         user_expressions: dict | None = None, allow_stdin: bool = False,
                         **kwargs: Any):
        count = kernel.shell.execution_count
        reply = await original(code, silent, store_history, user_expressions, allow_stdin,
                               **kwargs)
        if store_history and not silent and isinstance(reply, dict) and \
                reply.get("execution_count", count) > count:
            reply["execution_count"] = count
        return reply

    kernel.do_execute = do_execute
    kernel._rlm_keeps_task_count = True


def keep_busy_status(kernel: Any, running: Any) -> None:
    """Keep the frontend's kernel status "busy" for the whole of a run.

    While a task cell runs, JupyterLab's widget manager sends control-channel requests
    (``create_subshell_request`` when a run's widgets appear, with ipykernel 7's
    subshells); ipykernel answers each with ``busy`` then ``idle`` status messages on
    IOPub, and JupyterLab takes that ``idle`` as the kernel's state: the status bar read
    "Idle" for the rest of the run.  While ``running()`` is true, status messages of
    channels other than the shell are not published (the kernel is busy with the run).

    Args:
        kernel: the ipykernel ``Kernel`` (None outside a kernel: nothing to do).
        running: ``callable() -> bool``, true while a run is in progress.
    """
    if kernel is None or getattr(kernel, "_rlm_keeps_busy", False):
        return
    original = kernel._publish_status

    def publish_status(status: str, channel: str, *args: Any, **kwargs: Any) -> Any:
        if channel != "shell" and running():
            return None
        return original(status, channel, *args, **kwargs)

    kernel._publish_status = publish_status
    kernel._rlm_keeps_busy = True
