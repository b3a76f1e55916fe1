"""The session around runs: ``llm_query`` & co. bound outside runs, ``FINAL`` outside a
run shown as an answer, and ``%rlm ...?`` kept a task.

The task cell's own execution count and the kernel status during a run are the RLM
kernel's (:class:`~rlm_kernel.jupyter.kernel.RLMKernel`), not the session's."""

from __future__ import annotations

import re
import sys
from typing import Any

from ..engine.answer import answer_text
from ..termination import resolve_final_var

__all__ = ["bind_session_tools", "final_outside_run", "protect_question_mark"]


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
    display({"text/plain": f"Final answer: {answer_text(answer)}"}, raw=True)


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
