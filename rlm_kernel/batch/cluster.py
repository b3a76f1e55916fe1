"""Where a batch runs: a Dask ``LocalCluster`` on this machine (``local:N``) or the
scheduler of a running cluster (``tcp://host:8786``).  What is started here is closed
here; a cluster that was already running is only disconnected from."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..engine import CLUSTER_EXTRA, ClusterMissing

__all__ = ["ClusterSpecError", "open_cluster", "parse_cluster"]

log = logging.getLogger(__name__)

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
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ClusterMissing(f"rlm batch runs on Dask: {CLUSTER_EXTRA}") \
            from None
    if kind == "address":
        with Client(where) as client:
            log.info("connected to the Dask scheduler at %s", where)
            yield client
        return
    with LocalCluster(n_workers=int(where), threads_per_worker=1, processes=True,
                      dashboard_address=dashboard) as cluster, Client(cluster) as client:
        log.info("started a Dask LocalCluster of %s workers", where)
        yield client
