"""Child runs: what ``rlm_query`` starts, one level deeper, on the parent's services
(clients, ledger, budget guard, recorder, observer)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ...executors import Executor, WorkFolder, executor_for
from ..result import RLMResult
from ..run import Run
from ..services import RunServices
from ..session.task import TaskSpec

__all__ = ["child_runner"]


def child_runner(services: RunServices, depth: int, parent: Executor,
                 folder: WorkFolder | None = None) -> Callable[[str, Any], RLMResult | None]:
    """``run_child(prompt, context)`` for a run at ``depth`` on ``services``: a child
    :class:`Run` one level deeper (its own executor of ``config.executor``'s kind, of
    its parent's kind when that is None (:func:`~rlm_kernel.executors.executor_for`),
    in ``config.workdir`` when one is set, closed when it ends; at most
    ``child_max_iterations`` steps), or None when that is deeper than
    ``config.max_depth``.  The depth comes from the host (this closure and the frozen
    config), never from the caller.

    The child's services are the parent's (:func:`dataclasses.replace`): the same clients,
    ledger, budget guard, recorder and observer, its own settings (``max_iterations`` =
    ``child_max_iterations``) and no replay record.

    Args:
        services: the parent run's services.
        depth: the parent run's depth (0 = top level).
        parent: the parent run's executor (its kind is the child's default).
        folder: the parent's working folder, or None; the child gets its helpers as a
            sub-agent sees them (:meth:`~rlm_kernel.executors.workfolder.WorkFolder.for_sub_agent`:
            ``apply_patch`` and ``run_tests`` refused, no ``finish``).

    The returned function returns the child's whole result (its answer, trajectory,
    conversation and its own children: the parent keeps them,
    :meth:`~rlm_kernel.engine.repl_functions.REPLFunctions.rlm_query`), or None beyond
    the depth limit.
    """
    config = services.config
    child = replace(services, config=config.replace(max_iterations=config.child_max_iterations),
                    replay=None)
    depth += 1
    sub_folder = None if folder is None else folder.for_sub_agent()

    def run_child(prompt: str, context: Any) -> RLMResult | None:
        if depth > config.max_depth:
            return None
        variables = {} if context is None else {"context": context}
        executor = executor_for(config.executor, parent=parent, workdir=config.workdir,
                                isolated_options=config.isolated_options())
        try:
            run = Run(prompt, variables, child, executor=executor, depth=depth,
                      child_runner=child_runner(child, depth, executor, sub_folder),
                      task=TaskSpec(folder=sub_folder))
            return run.execute()
        finally:
            executor.close()

    return run_child
