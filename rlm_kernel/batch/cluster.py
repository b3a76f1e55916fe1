"""Where a batch (``rlm batch``) or :meth:`RLM.map <rlm_kernel.engine.RLM.map>` runs:
a Dask ``LocalCluster`` on this machine (``local:N``) or the scheduler of a running
cluster (``tcp://host:8786``).  What is started here is closed here; a cluster that was
already running is only disconnected from."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from concurrent.futures import Executor as FuturesExecutor
from contextlib import contextmanager
from typing import Any

__all__ = ["CLUSTER_EXTRA", "ClusterMissing", "ClusterSpecError", "local_executor",
           "open_cluster", "parse_cluster"]

log = logging.getLogger(__name__)

CLUSTER_EXTRA = ("pip install distributed fsspec tqdm (the 'cluster' extra: "
                 "pip install '.[cluster]' in rlm-kernel's checkout)")
"""How to install what a Dask cluster and context URLs need."""


class ClusterMissing(ImportError):
    """Dask ``distributed`` (or fsspec) is not installed; the message says how to get it."""

_LOCAL = re.compile(r"local(?::(\d+))?")
_ADDRESS = re.compile(r"(tcp|tls|ucx|ws|wss|inproc)://\S+|[\w.-]+:\d+")


class ClusterSpecError(ValueError):
    """``--cluster`` is neither ``local[:N]`` nor a scheduler address."""


def parse_cluster(spec: str | None) -> tuple[str, int | str]:
    """Read a ``--cluster`` value.

    Args:
        spec: ``local`` (one worker per CPU), ``local:N`` (N worker processes),
            a scheduler address (``tcp://host:8786``, ``tls://...``, ``host:8786``),
            or None (``local``).

    Returns:
        ``("local", N)`` or ``("address", address)``.

    Raises:
        ClusterSpecError: anything else, or ``local:0``.
    """
    spec = (spec or "local").strip()
    local = _LOCAL.fullmatch(spec)
    if local:
        n = int(local.group(1)) if local.group(1) else (os.cpu_count() or 1)
        if n < 1:
            raise ClusterSpecError("--cluster local:N needs N >= 1 worker")
        return "local", n
    if _ADDRESS.fullmatch(spec):
        return "address", spec
    raise ClusterSpecError(f"--cluster {spec!r}: give local, local:N (N worker processes) or "
                           "a Dask scheduler address such as tcp://scheduler:8786")


@contextmanager
def open_cluster(spec: str | None, *, dashboard: str | None = ":8787") -> Iterator[Any]:
    """A Dask ``distributed.Client`` for ``spec`` (see :func:`parse_cluster`).

    ``local:N`` starts ``LocalCluster(n_workers=N, threads_per_worker=1,
    processes=True)``: one task at a time per worker process.  Both are closed on exit;
    for an address only the client is.

    Args:
        spec: the ``--cluster`` value.
        dashboard: the local cluster's dashboard address (``":0"`` any free port,
            None none); Dask shows it only when bokeh is installed.

    Raises:
        ClusterSpecError: a bad ``spec``.
        ClusterMissing: Dask ``distributed`` is not installed.
        OSError: no scheduler answers at the address (Dask's own error, after its
            connect timeout).
    """
    kind, where = parse_cluster(spec)
    _require_distributed("rlm batch runs on Dask")
    from distributed import Client, LocalCluster

    if kind == "address":
        with Client(where) as client:
            log.info("connected to the Dask scheduler at %s", where)
            yield client
        return
    with LocalCluster(n_workers=int(where), threads_per_worker=1, processes=True,
                      dashboard_address=dashboard) as cluster, Client(cluster) as client:
        log.info("started a Dask LocalCluster of %s workers", where)
        yield client


@contextmanager
def local_executor(n_workers: int) -> Iterator[FuturesExecutor]:
    """A ``concurrent.futures`` executor on a Dask ``LocalCluster`` of ``n_workers``
    worker processes, one thread each (:func:`open_cluster` of ``local:N``); the
    cluster is closed on exit.

    Args:
        n_workers: worker processes (>= 1).

    Raises:
        ClusterMissing: Dask ``distributed`` is not installed; the message says what to
            install, or to pass an executor of one's own.
    """
    _require_distributed("running tasks on Dask needs distributed",
                         ", or pass executor= (a ThreadPoolExecutor ...)")
    with open_cluster(f"local:{n_workers}") as client:
        log.info("Dask LocalCluster of %d workers; dashboard %s", n_workers,
                 client.dashboard_link)
        yield client.get_executor()


def _require_distributed(what: str, hint: str = "") -> None:
    """Raise :class:`ClusterMissing` (``what``, how to install it, ``hint``) unless Dask
    ``distributed`` imports."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ClusterMissing(f"{what}: {CLUSTER_EXTRA}{hint}") from None
