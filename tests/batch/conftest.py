"""Fixtures of the batch tests: one fake provider and one Dask LocalCluster (2 worker
processes) per test module."""

from __future__ import annotations

import pytest

from tests.batch.fleet import local_cluster, provider_env


@pytest.fixture(scope="module")
def provider():
    """The fake provider and its environment (see tests/batch/fleet.py)."""
    with provider_env() as seen:
        yield seen


@pytest.fixture(scope="module")
def client(provider):
    """A client of a 2-worker LocalCluster whose workers reach the provider."""
    with local_cluster(2) as dask_client:
        yield dask_client
