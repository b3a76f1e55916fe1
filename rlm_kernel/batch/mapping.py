"""Many independent runs at once (:meth:`RLM.map <rlm_kernel.engine.RLM.map>`): each
(question, context) pair is one RLM run on a ``concurrent.futures.Executor`` (Dask's
``client.get_executor()``, a thread or a process pool; by default a Dask
``LocalCluster``, :func:`~rlm_kernel.batch.cluster.local_executor`), results in input
order.

What goes to a worker is plain data: the run's settings (``RLMConfig``), the question,
the context (a value, or a :class:`~rlm_kernel.batch.contexts.ContextRef` read where the
task runs) and the answer type as text, given to :func:`run_task`, a module-level
function, so it pickles for processes and Dask alike.  A task's failure stays in its
``RLMResult`` (``stopped_by="error"``), never raised, never lost.  What comes back is
plain data too (:mod:`~rlm_kernel.batch.sending`); ``rlm batch``'s workers call
:func:`run_task` as well.

The engine reaches :func:`map_runs` through its documented hook
(:mod:`rlm_kernel.engine.mapper`), as the layer below may not import this one.
Imports no Dask until the default executor is started.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor as FuturesExecutor
from concurrent.futures import Future, as_completed
from typing import Any

from ..context import ContextError
from ..engine import RLM, RLMConfig, RLMResult
from ..engine.frontends import as_answer_type
from ..models import LLMError
from .cluster import local_executor
from .contexts import ContextRef
from .sending import sendable, typed_again

__all__ = ["map_runs", "run_task"]

log = logging.getLogger(__name__)


def run_task(config: RLMConfig, question: str, context: Any = None,
             returns: Any = None, tools: Any = None) -> RLMResult:
    """One independent run, as shipped to a worker: plain data in, a result out.

    Args:
        config: the run's settings (models resolved by the caller:
            ``config.model`` None means the embedded model on the worker).
        question: the task.
        context: the value bound to ``context``; a :class:`ContextRef` is read here
            first; None binds none.
        returns: the answer's type as text (``"int"``, ``"list[str]"``), or any
            ``output_type`` of :meth:`RLM.run` that pickles (a type, a JSON Schema
            dict), or None.
        tools: the user's functions for the run (must pickle for process workers).

    Returns:
        The run's :class:`RLMResult`, its ``answer_value`` plain data
        (:func:`~rlm_kernel.batch.sending.sendable`).  Nothing is raised: a context
        that cannot be read, a model that cannot be reached, a bad ``returns`` end in a
        result with ``stopped_by="error"`` and the reason in ``error``.
    """
    try:
        if isinstance(context, ContextRef):
            context = context.load()
        answer_type = as_answer_type(returns)
        result = RLM(config=config, tools=tools).run(question, context=context,
                                                      output_type=answer_type)
        return sendable(result, answer_type)
    except Exception as exc:  # noqa: BLE001 - the error belongs to this task's result
        log.info("task failed before or outside its run: %s", exc)
        return _failed(config, question, returns, _reason(exc))


def _reason(exc: BaseException) -> str:
    """A task's failure in one line (the message alone for the errors users cause)."""
    if isinstance(exc, (ContextError, LLMError, ValueError, TypeError)) or \
            type(exc).__name__ == "LocalModelError":  # models loads it on first use
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _failed(config: RLMConfig, question: str, returns: Any, error: str) -> RLMResult:
    """The result of a task that failed before or outside its run."""
    return RLMResult(question=question, stopped_by="error", error=error,
                     model=config.model or "", sub_model=config.sub_model or "",
                     answer_type=returns if isinstance(returns, str) else None)


def _contexts(questions: list[str], contexts: Sequence[Any] | None) -> list[Any]:
    """One context per question: ``contexts`` as a list, or a single value (or None)
    given to every question.

    Raises:
        ValueError: ``contexts`` is a list of another length than ``questions``."""
    if contexts is None or not isinstance(contexts, (list, tuple)):
        return [contexts] * len(questions)
    if len(contexts) != len(questions):
        raise ValueError(f"map: {len(questions)} questions but {len(contexts)} contexts")
    return list(contexts)


def map_runs(config: RLMConfig, questions: Sequence[str], contexts: Sequence[Any] | None = None,
             *, executor: FuturesExecutor | None = None, returns: Any = None,
             tools: Any = None,
             on_result: Callable[[int, RLMResult], None] | None = None) -> list[RLMResult]:
    """Run each (question, context) pair as an independent run on ``executor``.

    Args:
        config: every run's settings.
        questions: the tasks; a str alone is one task.
        contexts: one context per question (values or :class:`ContextRef`), or None
            for no context; a single non-list value is given to every question.
        executor: any ``concurrent.futures.Executor``; None: a Dask ``LocalCluster``
            with up to one worker per CPU, started and closed here.
        returns: the answers' type (as :func:`run_task` takes it), or None.
        tools: the user's functions (must pickle for process workers).
        on_result: ``callable(index, result)`` told of each result as it arrives.

    Returns:
        One :class:`RLMResult` per question, in input order; a task whose worker
        failed (it died too often, its result could not be sent back) has
        ``stopped_by="error"`` and the reason.  An ``answer_value`` is plain data
        (:func:`~rlm_kernel.batch.sending.sendable`) or, with ``returns``, of that type
        (made here from the plain data the worker sent).

    Raises:
        ValueError, TypeError: ``contexts`` is a list of another length than
            ``questions``, or ``returns`` is not a type (checked here, before anything
            is submitted).
        ClusterMissing: no executor given and Dask is not installed.
    """
    questions = [questions] if isinstance(questions, str) else list(questions)
    ctx = _contexts(questions, contexts)
    if not questions:
        return []
    answer_type = as_answer_type(returns)  # a bad type: one error here, not one per task
    if executor is None:
        with local_executor(min(len(questions), os.cpu_count() or 1)) as dask:
            return map_runs(config, questions, ctx, executor=dask, returns=returns,
                            tools=tools, on_result=on_result)
    futures: list[Future[RLMResult]] = [executor.submit(run_task, config, q, c, returns, tools)
                                        for q, c in zip(questions, ctx, strict=True)]
    index = {id(f): i for i, f in enumerate(futures)}
    results: list[RLMResult | None] = [None] * len(futures)
    for future in as_completed(futures):
        i = index[id(future)]
        try:
            result = future.result()
        except Exception as exc:  # noqa: BLE001 - the worker's failure is this task's
            result = _failed(config, questions[i], returns,
                             f"the task's worker failed: {type(exc).__name__}: {exc}")
        results[i] = result = typed_again(result, answer_type)
        if on_result is not None:
            on_result(i, result)
    return [r for r in results if r is not None]
