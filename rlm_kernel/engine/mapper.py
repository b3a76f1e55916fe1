"""The hook through which :meth:`RLM.map <rlm_kernel.engine.rlm.RLM.map>` reaches the
runner of many independent runs.

That runner (:func:`rlm_kernel.batch.mapping.map_runs`: each task a run on a worker,
Dask's ``LocalCluster`` by default) lives in the batch layer, above the engine, because
a task builds an :class:`~rlm_kernel.engine.rlm.RLM` and the cluster is the batch
layer's.  The engine may not import a layer above it (the import contracts in
``pyproject.toml``), so it names the runner here, :data:`MAP_RUNNER`, and loads it by
that name on the first :meth:`RLM.map` (a plugin found by name, as entry points are);
:func:`use_map_runner` injects another one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from concurrent.futures import Executor as FuturesExecutor
from typing import Any, Protocol

from .config import RLMConfig
from .result import RLMResult

__all__ = ["MAP_ROLLOUTS", "MAP_RUNNER", "MapRunner", "map_rollouts", "map_runner",
           "use_map_runner"]

MAP_RUNNER = "rlm_kernel.batch.mapping:map_runs"
"""The default runner, as ``module:function``."""
MAP_ROLLOUTS = "rlm_kernel.batch.rollouts:map_rollouts"
"""The runner of :meth:`RLM.map`'s rollouts (``rollouts=K``), as ``module:function``."""


class MapRunner(Protocol):
    """Runs each (question, context) pair as an independent run with ``config``'s
    settings and returns one :class:`RLMResult` per question, in input order
    (:func:`rlm_kernel.batch.mapping.map_runs` documents the arguments)."""

    def __call__(self, config: RLMConfig, questions: Sequence[str],
                 contexts: Sequence[Any] | None = None, *,
                 executor: FuturesExecutor | None = None, returns: Any = None,
                 tools: Any = None,
                 on_result: Callable[[int, RLMResult], None] | None = None,
                 ) -> list[RLMResult]: ...


_injected: MapRunner | None = None


def use_map_runner(runner: MapRunner | None) -> None:
    """Make :meth:`RLM.map` call ``runner``; None: the default (:data:`MAP_RUNNER`)."""
    global _injected
    _injected = runner


def map_runner() -> MapRunner:
    """The runner :meth:`RLM.map` calls: the injected one, else :data:`MAP_RUNNER`
    (its module imported now, once).

    Raises:
        ImportError: the default runner's module cannot be imported.
    """
    if _injected is not None:
        return _injected
    module, _, name = MAP_RUNNER.partition(":")
    runner: MapRunner = getattr(importlib.import_module(module), name)
    return runner


def map_rollouts() -> Callable[..., list[dict[str, Any]]]:
    """The runner of :meth:`RLM.map`'s rollouts (:data:`MAP_ROLLOUTS`, its module
    imported now, once): ``(config, questions, contexts, *, rollouts, held_back, reward,
    executor, keep_copies) -> list of rollout lines``.

    Raises:
        ImportError: its module cannot be imported.
    """
    module, _, name = MAP_ROLLOUTS.partition(":")
    runner: Callable[..., list[dict[str, Any]]] = getattr(importlib.import_module(module),
                                                          name)
    return runner
