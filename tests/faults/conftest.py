"""Each fault case starts clean: threads an earlier case's model code left running
have ended, and the output filters they needed are off.  The cases of a module that
makes its runs with :func:`tests.faults.helpers.scripted_run` run against both
executors (``executor_kind``: in-process, then isolated)."""

from __future__ import annotations

import os
import time

import pytest

from rlm_kernel.executors import EXECUTOR_KINDS
from rlm_kernel.executors.thread_output import quarantined_running

from . import helpers


def pytest_generate_tests(metafunc):
    if getattr(metafunc.module, "scripted_run", None) is helpers.scripted_run:
        metafunc.parametrize("executor_kind", EXECUTOR_KINDS[::-1], indirect=True)


@pytest.fixture(autouse=True)
def executor_kind(request, monkeypatch):
    """The executor kind of this test's scripted runs (in-process where the module
    does not use :func:`~tests.faults.helpers.scripted_run`)."""
    kind = getattr(request, "param", "in-process")
    monkeypatch.setattr(helpers, "EXECUTOR", kind)
    return kind


@pytest.fixture(scope="session", autouse=True)
def recorded_identity(record_testsuite_property):
    """Who the fault suite runs as, in the JUnit XML report's test suite properties
    (``euid``, ``egid``, ``groups``): ``tests/faults/as_user.py`` reads them back to
    check that its run as an unprivileged uid really ran as that uid."""
    record_testsuite_property("euid", os.geteuid())
    record_testsuite_property("egid", os.getegid())
    record_testsuite_property("groups", " ".join(map(str, sorted(os.getgroups()))))


@pytest.fixture(autouse=True)
def no_stray_threads():
    """Give the threads a test's steps left running up to 15 s to end before the next
    test; only those of this test: a thread an earlier test left for good (a library's
    pool worker started during a step) costs no later test its 15 s."""
    before = quarantined_running()
    yield
    deadline = time.monotonic() + 15
    while quarantined_running() > before and time.monotonic() < deadline:
        time.sleep(0.05)
