"""A sub-agent's run (an ``rlm_query`` child, :class:`~rlm_kernel.engine.result.ChildRun`)
as folded Markdown: an HTML ``<details>`` block, shut until clicked, for the exported
notebook's cell after the step that started it and for the live step cell's output.
Light (no nbformat): the kernel renders it when a child ends."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from ..text import middle_cut

__all__ = ["child_markdown", "fenced"]

_CHILD_OUTPUT_CHARS = 2000  # characters of a child step's output shown in its fold


def child_markdown(child: Any, children: Sequence[Any]) -> str:
    """A sub-agent's run, folded (an HTML ``<details>`` block, shut until clicked) under
    the step that started it: its question and answer in the summary, then each of its
    steps' code and output (cut), then its own sub-agents folded the same way.  Markdown,
    never code: a re-run of the notebook does not run a child's code again (the
    ``%%rlm recorded`` cell answers its calls)."""
    answer = "no answer" if child.answer is None else middle_cut(
        " ".join(str(child.answer).split()), 120, "the whole is in result.children")
    head = (f"Sub-agent {child.id} (depth {child.depth}): "
            f"{html.escape(middle_cut(' '.join(child.question.split()), 120, '...'))} "
            f"&rarr; {html.escape(answer)} · {child.steps} step"
            f"{'s' * (child.steps != 1)}, `{child.stopped_by}`")
    parts = [f"<details>\n<summary>{head}</summary>\n"]
    for n, entry in enumerate(child.history, start=1):
        parts.append(f"\n**Step {n}**\n\n{fenced(entry.code.rstrip(), 'python')}\n")
        if entry.output.strip():
            parts.append(fenced(middle_cut(entry.output.rstrip(), _CHILD_OUTPUT_CHARS,
                                            "the whole is in result.children")) + "\n")
    for grandchild in children:
        if grandchild.parent == child.id:
            parts.append("\n" + child_markdown(grandchild, children) + "\n")
    parts.append("\n</details>")
    return "".join(parts)


def fenced(text: str, language: str = "text") -> str:
    """``text`` in a Markdown code fence of ``language``, the fence longer than any run
    of backquotes inside."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{language}\n{text}\n{fence}"
