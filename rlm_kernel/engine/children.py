"""Child runs: what ``rlm_query`` starts, one level deeper, on the parent's clients,
ledger and budget guard."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..executors import PlainExecutor
from ..models import LanguageModel, UsageLedger
from .budget import BudgetExceeded, BudgetGuard

__all__ = ["child_runner"]


def child_runner(rlm: Any, root: LanguageModel, sub: LanguageModel, ledger: UsageLedger,
                 guard: BudgetGuard, depth: int) -> Callable[[str, Any], str | None]:
    """``run_child(prompt, context)``: a child run one level below ``depth``, or
    None when that is deeper than the config's ``max_depth``.  The depth comes
    from the host (this closure and the frozen config), never from the caller."""
    max_depth = rlm.config.max_depth
    depth += 1

    def run_child(prompt: str, context: Any) -> str | None:
        if depth > max_depth:
            return None
        child = type(rlm)(rlm.model, rlm.sub_model, config=rlm.config.replace(
            max_iterations=rlm.config.child_max_iterations), observer=rlm.observer,
            root_client=root, sub_client=sub)
        variables = {} if context is None else {"context": context}
        res = child._run(prompt, variables, PlainExecutor(), root, sub, ledger, guard,
                         depth=depth)
        if res.stopped_by == "budget":
            raise BudgetExceeded(res.error or "budget used up")
        if res.answer is None:
            return f"Error: the sub-run ended without an answer ({res.stopped_by}: {res.error})"
        return res.answer

    return run_child
