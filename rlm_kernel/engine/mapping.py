"""Many independent runs at once: each (question, context) pair is one RLM run on a
``concurrent.futures.Executor`` (Dask's ``client.get_executor()``, a thread or a process
pool), results in input order.

What goes to a worker is plain data: the run's settings (:class:`RLMConfig`), the
question, the context (a value, or a :class:`ContextRef` read where the task runs) and
the answer type as text, given to :func:`run_task`, a module-level function, so it
pickles for processes and Dask alike.  A task's failure stays in its
:class:`RLMResult` (``stopped_by="error"``), never raised, never lost.

What comes back is plain data too (:func:`sendable`): a value model code handed to
``FINAL`` is sent as it is only when :func:`plain_data` (built-in types, bounded depth);
a typed answer of another type is sent as its JSON form and made that type again by
the caller (:func:`map_runs`); anything else as the answer's text.  A class model code
made could run its own code where it is unpickled (``__reduce__``), or fail to unpickle
there, and a value nested too deep does not pickle at all.  ``rlm batch`` sends results
by the same rule (its workers call :func:`run_task`).

Imports no Dask and no fsspec until they are used: Dask for the default executor
(:func:`local_dask_executor`), fsspec for a context URL.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor as FuturesExecutor
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..context import ContextError, load_contexts
from ..models import LLMError
from .answer.nesting import MAX_DEPTH
from .config import RLMConfig
from .result import RLMResult

__all__ = ["ClusterMissing", "ContextRef", "MAX_SENT_DEPTH", "load_context",
           "local_dask_executor", "map_runs", "plain_data", "run_task", "sendable",
           "worker_name"]

log = logging.getLogger(__name__)

CLUSTER_EXTRA = ("pip install distributed fsspec tqdm (the 'cluster' extra: "
                 "pip install '.[cluster]' in rlm-kernel's checkout)")
"""How to install what the default executor and context URLs need."""


MAX_SENT_DEPTH = MAX_DEPTH
"""Levels of containers an answer value sent back may nest: as many as a typed answer
and a value crossing the isolated REPL's wall
(:data:`~rlm_kernel.engine.answer.nesting.MAX_DEPTH`)."""

_MAX_SENT_ITEMS = 1_000_000
_SCALARS = (str, bytes, int, float, bool, type(None))
_CONTAINERS = (list, tuple, set, frozenset, dict)


def plain_data(value: Any, limit: int = MAX_SENT_DEPTH) -> bool:
    """Whether ``value`` is built of exact built-in types only (``str``, ``bytes``,
    ``int``, ``float``, ``bool``, ``None``, and ``list``, ``tuple``, ``set``,
    ``frozenset``, ``dict`` of them), at most ``limit`` levels deep and at most a
    million items, walked without recursion: data that unpickles anywhere without
    running code of its own.

    Args:
        value: any object.
        limit: the most levels of containers.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    items = 0
    while stack:
        node, depth = stack.pop()
        items += 1
        kind = type(node)
        if kind in _SCALARS:
            continue
        if kind not in _CONTAINERS or depth > limit or items > _MAX_SENT_ITEMS:
            return False
        parts = [*node.keys(), *node.values()] if kind is dict else list(node)
        stack.extend((part, depth + 1) for part in parts)
    return True


def sendable(result: RLMResult, answer_type: Any = None) -> RLMResult:
    """The result as a worker sends it to its caller: ``answer_value`` kept when it is
    :func:`plain_data`; else, for a typed answer (``answer_type``), its JSON form
    (:meth:`~rlm_kernel.engine.answer.types.AnswerType.to_json`) when that is plain
    data, which :func:`map_runs` makes the type again; else the answer's text.

    Args:
        result: the run's result.
        answer_type: the run's :class:`~rlm_kernel.engine.answer.types.AnswerType`, or
            None.

    Returns:
        ``result`` itself, or a copy with ``answer_value`` replaced.
    """
    value = result.answer_value
    if value is None or plain_data(value):
        return result
    sent: Any = result.answer
    if answer_type is not None:
        try:
            data = answer_type.to_json(value)
        except Exception:  # noqa: BLE001 - no JSON form (AnswerTypeError): its text
            data = None
        if data is not None and plain_data(data):
            sent = data
    log.info("the answer's value (a %s) is not plain data: its %s is sent",
             type(value).__name__, "text" if sent is result.answer else "JSON form")
    return dataclasses.replace(result, answer_value=sent)


def _typed_again(result: RLMResult, answer_type: Any) -> RLMResult:
    """``result`` with its ``answer_value`` (plain data, as :func:`sendable` sent it)
    validated as ``answer_type`` again (a dataclass or model of the caller's from its
    JSON form); kept as sent when it does not validate."""
    if answer_type is None or result.answer_value is None:
        return result
    try:
        result.answer_value = answer_type.validate(result.answer_value)
    except ValueError as exc:  # AnswerTypeError: the data as sent
        log.info("an answer sent back does not validate as %s: %s", answer_type.name, exc)
    return result


class ClusterMissing(ImportError):
    """Dask ``distributed`` (or fsspec) is not installed; the message says how to get it."""


@dataclass(frozen=True)
class ContextRef:
    """A task's context named by where it lives, read by :meth:`load` where the task
    runs (on the worker, so the client never holds the data).

    Attributes:
        location: a file (its text), a folder (a dict ``{relative path: text}`` of its
            text files), or an fsspec URL of either: ``file://``, ``s3://``, ``gs://``
            ... (``s3fs``, ``gcsfs`` installed on the workers for those).
    """

    location: str

    def load(self) -> Any:
        """The context's value (see :func:`load_context`)."""
        return load_context(self.location)


def load_context(location: str) -> Any:
    """Read a context from a path or an fsspec URL.

    Args:
        location: a local file or folder path (``~`` expanded), or a URL with a scheme
            (``file://``, ``s3://``, ``gs://``, ``memory://`` ...).

    Returns:
        A file's text (UTF-8, undecodable bytes replaced), or for a folder a dict
        ``{path relative to the folder: text}`` of its files that decode as UTF-8.

    Raises:
        ContextError: the location does not exist or cannot be read, a folder holds no
            text file, or its URL scheme has no fsspec filesystem installed.
        ClusterMissing: a URL was given and fsspec is not installed.
    """
    if "://" not in location:
        return load_contexts([location])
    try:
        import fsspec
    except ImportError:
        raise ClusterMissing(f"a context URL ({location}) needs fsspec: {CLUSTER_EXTRA}") \
            from None
    try:
        fs, path = fsspec.core.url_to_fs(location)
        if not fs.exists(path):
            raise ContextError(f"context not found: {location}")
        if not fs.isdir(path):
            return fs.cat_file(path).decode("utf-8", errors="replace")
        files: dict[str, str] = {}
        root = path.rstrip("/")
        for name in sorted(fs.find(path)):
            rel = name[len(root):].lstrip("/") if name.startswith(root) else name
            if any(part.startswith(".") for part in rel.split("/")):
                continue
            try:
                files[rel] = fs.cat_file(name).decode("utf-8")
            except UnicodeDecodeError:
                continue  # a binary file
        if not files:
            raise ContextError(f"no text files under {location}")
        return files
    except ContextError:
        raise
    except (ImportError, ValueError) as exc:  # no filesystem for the scheme
        raise ContextError(f"cannot read {location}: {exc}") from None
    except OSError as exc:
        raise ContextError(f"cannot read {location}: {exc.strerror or exc}") from None


def worker_name() -> str:
    """Who runs this task: the Dask worker's address inside a Dask worker, else
    ``host:pid``."""
    if "distributed" in sys.modules:
        try:
            from distributed import get_worker

            return str(get_worker().address)
        except ValueError:  # not inside a Dask worker's task
            pass
    return f"{socket.gethostname()}:{os.getpid()}"


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
        (:func:`sendable`).  Nothing is raised: a context that cannot be read, a model
        that cannot be reached, a bad ``returns`` end in a result with
        ``stopped_by="error"`` and the reason in ``error``.
    """
    from .answer.types import as_answer_type
    from .rlm import RLM

    try:
        if isinstance(context, ContextRef):
            context = context.load()
        answer_type = as_answer_type(returns)
        result = RLM(config=config, tools=tools).run(question, context=context,
                                                      output_type=answer_type)
        return sendable(result, answer_type)
    except Exception as exc:  # noqa: BLE001 - the error belongs to this task's result
        log.info("task failed before or outside its run: %s", exc)
        return RLMResult(question=question, stopped_by="error", error=_reason(exc),
                         model=config.model or "", sub_model=config.sub_model or "",
                         answer_type=returns if isinstance(returns, str) else None)


def _reason(exc: BaseException) -> str:
    """A task's failure in one line (the message alone for the errors users cause)."""
    if isinstance(exc, (ContextError, LLMError, ValueError, TypeError)) or \
            type(exc).__name__ == "LocalModelError":  # models loads it on first use
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


@contextmanager
def local_dask_executor(n_workers: int | None = None) -> Iterator[FuturesExecutor]:
    """A Dask ``LocalCluster`` of worker processes (one thread each) and its
    ``concurrent.futures`` executor; the cluster is closed on exit.

    Args:
        n_workers: worker processes (default: the CPU count).

    Raises:
        ClusterMissing: Dask ``distributed`` is not installed.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ClusterMissing(f"running tasks on Dask needs distributed: {CLUSTER_EXTRA}, "
                             "or pass executor= (a ThreadPoolExecutor ...)") from None
    n = n_workers or os.cpu_count() or 1
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True) as cluster, \
            Client(cluster) as client:
        log.info("Dask LocalCluster of %d workers; dashboard %s", n, client.dashboard_link)
        yield client.get_executor()


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
        (:func:`sendable`) or, with ``returns``, of that type (made here from the
        plain data the worker sent).

    Raises:
        ValueError, TypeError: ``contexts`` is a list of another length than
            ``questions``, or ``returns`` is not a type (checked here, before anything
            is submitted).
        ClusterMissing: no executor given and Dask is not installed.
    """
    if isinstance(questions, str):
        questions = [questions]
    questions = list(questions)
    if contexts is None or not isinstance(contexts, (list, tuple)):
        ctx: list[Any] = [contexts] * len(questions)
    else:
        ctx = list(contexts)
        if len(ctx) != len(questions):
            raise ValueError(f"map: {len(questions)} questions but {len(ctx)} contexts")
    if not questions:
        return []
    from .answer.types import as_answer_type

    answer_type = as_answer_type(returns)  # a bad type: one error here, not one per task
    if executor is None:
        with local_dask_executor(min(len(questions), os.cpu_count() or 1)) as dask:
            return map_runs(config, questions, ctx, executor=dask, returns=returns,
                            tools=tools, on_result=on_result)
    futures: list[Future[RLMResult]] = [executor.submit(run_task, config, q, c, returns, tools)
                                        for q, c in zip(questions, ctx, strict=True)]
    index = {id(f): i for i, f in enumerate(futures)}
    results: list[RLMResult | None] = [None] * len(futures)
    from concurrent.futures import as_completed

    for future in as_completed(futures):
        i = index[id(future)]
        try:
            result = future.result()
        except Exception as exc:  # noqa: BLE001 - the worker's failure is this task's
            result = RLMResult(question=questions[i], stopped_by="error",
                               error=f"the task's worker failed: {type(exc).__name__}: {exc}",
                               model=config.model or "", sub_model=config.sub_model or "",
                               answer_type=returns if isinstance(returns, str) else None)
        results[i] = result = _typed_again(result, answer_type)
        if on_result is not None:
            on_result(i, result)
    return [r for r in results if r is not None]
