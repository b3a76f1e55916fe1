"""Child runs: what ``rlm_query`` starts, one level deeper, on the parent's clients,
ledger and budget guard."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...executors import close_executor, new_executor
from ...models import LanguageModel, UsageLedger
from ..budget import BudgetExceeded, BudgetGuard
from ..config import RLMConfig
from ..events import Observer
from ..run import Run

__all__ = ["child_runner"]


def child_runner(config: RLMConfig, observer: Observer | None, root: LanguageModel,
                 sub: LanguageModel, ledger: UsageLedger, guard: BudgetGuard,
                 depth: int) -> Callable[[str, Any], str | None]:
    """``run_child(prompt, context)`` for a run at ``depth``: a child :class:`Run` one
    level deeper (its own executor of ``config.executor``'s kind, in
    ``config.workdir`` when one is set, closed when it ends; at most ``child_max_iterations`` steps), or None when that is deeper than ``config.max_depth``.  The depth comes
    from the host (this closure and the frozen config), never from the caller.

    The returned function returns the child's answer text, or ``"Error: ..."`` when the
    child ended without one.

    Raises (from the returned function):
        BudgetExceeded: the child ran out of the shared budget: the parent stops too.
    """
    child_config = config.replace(max_iterations=config.child_max_iterations)
    depth += 1

    def run_child(prompt: str, context: Any) -> str | None:
        if depth > config.max_depth:
            return None
        variables = {} if context is None else {"context": context}
        kind = config.executor or "in-process"
        options: dict[str, Any] = {"workdir": config.workdir} if config.workdir else {}
        if kind == "isolated":  # the same wall
            options["memory_limit"] = config.memory_limit
        executor = new_executor(kind, **options)
        try:
            run = Run(prompt, variables, config=child_config, executor=executor,
                      root=root, sub=sub, ledger=ledger, guard=guard, depth=depth,
                      observer=observer, replay=None,
                      child_runner=child_runner(child_config, observer, root, sub, ledger,
                                                guard, depth))
            res = run.execute()
        finally:
            close_executor(executor)
        if res.stopped_by == "budget":
            raise BudgetExceeded(res.error or "budget used up")
        if res.answer is None:
            return f"Error: the sub-run ended without an answer ({res.stopped_by}: {res.error})"
        return res.answer

    return run_child
