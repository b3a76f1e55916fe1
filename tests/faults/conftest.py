"""Each fault case starts clean: threads an earlier case's model code left running
have ended, and the output filters they needed are off.  The cases of a module that
makes its runs with :func:`tests.faults.helpers.scripted_run` run against both
executors (``executor_kind``: in-process, then isolated).  As root, the suite's run as
an unprivileged uid starts with its first test and is judged after its last
(``as_user_run``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rlm_kernel.executors import EXECUTOR_KINDS
from rlm_kernel.executors.thread_output import quarantined_running

from . import helpers
from .as_user import FAULTS, SUITE, SUITE_SECONDS, start_as_user

AS_USER_TEST = "test_the_fault_suite_passes_as_an_unprivileged_uid"
"""The test (test_as_user.py) that judges the suite's run as an unprivileged uid."""


def _judges_as_user(item: pytest.Item) -> bool:
    """Whether ``item`` is :data:`AS_USER_TEST` (a notebook cell of nbval, say, has no
    ``originalname``)."""
    return getattr(item, "originalname", None) == AS_USER_TEST


def pytest_collection_modifyitems(config, items):
    """Move :data:`AS_USER_TEST` after the last fault test: it waits for the run as the
    uid, which runs beside the fault tests (``as_user_run``)."""
    waiting = [item for item in items if _judges_as_user(item)]
    if not waiting:
        return
    rest = [item for item in items if not _judges_as_user(item)]
    faults = [n for n, item in enumerate(rest) if FAULTS in Path(item.path).parents]
    at = faults[-1] + 1 if faults else len(rest)
    items[:] = rest[:at] + waiting + rest[at:]


@pytest.fixture(scope="session", autouse=True)
def as_user_run(request):
    """The fault suite's run as an unprivileged uid (a future of its
    :class:`~tests.faults.as_user.InnerRun`), started with this session's first fault
    test when the session, as root, holds :data:`AS_USER_TEST`; None otherwise.  Ended
    with the session if still running (a session cut short)."""
    if os.geteuid() != 0 or not any(map(_judges_as_user, request.session.items)):
        yield None
        return
    args = [*SUITE, "-q"]
    if markexpr := request.config.getoption("markexpr"):
        args += ["-m", markexpr]  # `pytest -m "not slow"` leaves the slow ones out there too
    future, cancel = start_as_user(args, timeout=SUITE_SECONDS)
    yield future
    cancel.set()


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
