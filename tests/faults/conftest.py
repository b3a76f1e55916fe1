"""Each fault case starts clean: threads an earlier case's model code left running
have ended, and the output filters they needed are off."""

from __future__ import annotations

import time

import pytest

from rlm_kernel.executors.thread_output import quarantined_running


@pytest.fixture(autouse=True)
def no_stray_threads():
    yield
    deadline = time.monotonic() + 15
    while quarantined_running() and time.monotonic() < deadline:
        time.sleep(0.05)
