"""Shared fixtures: one embedded-model server for every slow test and kernel."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def local_server():
    """Start (or find) the embedded model's server once; kernels started by the
    tests find it through its state file instead of starting their own."""
    from rlm_kernel.models.local.server import ensure_server

    return ensure_server()
