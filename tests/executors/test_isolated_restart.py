"""The isolated executor after its worker is gone: a restart from the last snapshot keeps
which names were one object, and loses only the names that cannot be saved; every wait on
the worker outside a step ends by the run's deadline (``set_deadline``,
:func:`~rlm_kernel.executors.run_deadline`), so ``max_seconds`` holds whatever the worker
does, after ``FINAL`` too.  Real worker processes throughout."""

from __future__ import annotations

import sys
import time

import pytest

from rlm_kernel.executors import PlainExecutor, run_deadline
from rlm_kernel.executors.isolated import LATE_SECONDS, IsolatedExecutor, RemoteValue
from rlm_kernel.executors.worker import SNAPSHOT_BYTES, _groups

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="Linux process limits"),
              pytest.mark.timeout(120)]

EXIT = "import os\nos._exit(1)"
"""Model code that ends the worker: the next step runs in a restarted one."""
STOP_AFTER_REPLY = r'''
import os, signal, sys
W = sys.modules['rlm_kernel.executors.worker']
w = W._running[0]
send = w.send
def stop_after_reply(msg):
    send(msg)
    if msg.get('op') == 'reply' and 'bindings' in msg:  # this step's reply is out
        os.kill(os.getpid(), signal.SIGSTOP)
w.send = stop_after_reply
'''
"""Model code after which the worker goes silent: it stops itself right after it sent
the step's reply (and ``FINAL``'s)."""


@pytest.fixture()
def ex():
    executor = IsolatedExecutor(memory_limit=1 << 30)
    yield executor
    executor.close()


def test_names_bound_to_one_object_are_one_object_after_a_restart(ex):
    """``b = a``, ``c = {'k': a}``, ``t = [d]``: after the worker is restarted from its
    snapshot, ``b is a``, ``c['k'] is a`` and ``t[0] is d`` still hold (a change through
    one name shows through the others); names that share nothing stay apart."""
    ex.execute("a = [1, 2]\nb = a\nc = {'k': a}\nd = {'x': 1}\nt = [d, 5]\ne = [1, 2]",
               timeout=10)
    assert "restarted" in ex.execute(EXIT, timeout=10).stderr
    res = ex.execute("b.append(3)\nprint(a, b is a, c['k'] is a, t[0] is d, e is a, e)",
                     timeout=10)
    assert res.stdout.strip() == "[1, 2, 3] True True True False [1, 2]", res.stderr


def test_a_name_that_cannot_be_saved_loses_only_itself(ex):
    """A value that cannot be pickled (a lock), and one whose pickle hangs when loaded
    (``__reduce__`` returning ``time.sleep``), are lost at a restart, and named; every
    other name comes back, those sharing an object still sharing it."""
    ex.execute("import threading, time\nclass Slow:\n    def __reduce__(self):\n"
               "        return (time.sleep, (3600,))\n"
               "a = [1]\nb = a\nlock = threading.Lock()\nslow = Slow()\nkeep = 'k'", timeout=10)
    res = ex.execute(EXIT, timeout=10)
    assert "are lost: Slow, lock, slow." in res.stderr, res.stderr
    res = ex.execute("print(a, b is a, keep, 'lock' in dir(), 'slow' in dir())", timeout=10)
    assert res.stdout.strip() == "[1] True k False False", res.stderr


def test_a_group_past_the_snapshot_cap_is_lost_whole(ex):
    """Names that share an object are saved together or not at all: a group over
    :data:`SNAPSHOT_BYTES` is lost whole (each name named), the rest is kept."""
    ex.execute(f"big = bytearray({SNAPSHOT_BYTES + 1024})\nalias = [big]\nsmall = [1]",
               timeout=20)
    res = ex.execute(EXIT, timeout=10)
    assert "are lost: alias, big." in res.stderr, res.stderr
    assert ex.execute("print(small)", timeout=10).stdout.strip() == "[1]"


def test_groups_are_the_names_that_share_objects():
    """The grouping itself: names are joined through any object they share (a chain
    joins three), and immutable atoms (strings, numbers, tuples) join nobody."""
    shared, other = object(), object()
    entries = [("a", b"", {1: shared}), ("b", b"", {2: other}), ("c", b"", {1: shared, 2: other}),
               ("d", b"", {})]
    assert [[n for n, _, _ in g] for g in _groups(entries)] == [["a", "b", "c"], ["d"]]


def test_a_request_waits_for_a_silent_worker_only_until_the_runs_deadline(ex):
    """A worker that goes silent between steps holds a request for
    ``request_timeout`` (30 s); with a run's deadline 1 s away it holds it until
    :data:`LATE_SECONDS` past the deadline, all requests together: then the worker is
    killed, the name reads as a description that says it was not read in time, and so
    does every later read without waiting; the next step runs in a new worker, started
    from the last snapshot, where the value is back."""
    ex.execute(STOP_AFTER_REPLY + "x = [1, 2]", timeout=10)
    started = time.monotonic()
    previous = ex.set_deadline(started + 1)
    assert previous is None
    late = ex.namespace["x"]
    took = time.monotonic() - started
    assert isinstance(late, RemoteValue) and "not read, the run's time was up" in str(late)
    assert 1 + LATE_SECONDS - 0.5 < took < 1 + LATE_SECONDS + 2, took
    started = time.monotonic()
    assert "not read" in str(ex.namespace["x"]) and time.monotonic() - started < 0.5
    assert "x" in [v.name for v in ex.describe_variables()] and ex.variable_ids() == {}
    ex.set_deadline(None)
    result = ex.execute("print(x)", timeout=10)
    assert "[1, 2]" in result.stdout and "restarted" in result.stderr, result
    assert ex.namespace["x"] == [1, 2]


def test_run_deadline_sets_and_restores_and_leaves_other_executors_alone(ex):
    with run_deadline(ex, 10):
        outer = ex._deadline
        assert outer is not None and 9 < outer - time.monotonic() <= 10
        with run_deadline(ex, 5):  # a child run sharing the executor
            assert ex._deadline < outer
        assert ex._deadline == outer
    assert ex._deadline is None
    with run_deadline(PlainExecutor(), 1):
        pass


def test_a_worker_silent_after_final_does_not_hold_the_run_past_max_seconds():
    """Kept-back case: a worker that goes silent right after ``FINAL`` held the run
    about 30 s past ``max_seconds=5`` (the host read the variables after the run with
    the request time limit).  Now the run returns its answer within a few seconds of
    ``max_seconds``."""
    from tests.replies import block
    from tests.scripted import scripted_rlm

    rlm, _ = scripted_rlm([block(STOP_AFTER_REPLY + "x = [1, 2, 3]\nFINAL('done')")],
                          executor="isolated", max_seconds=5, step_timeout=2,
                          verify_answer=False, ground_answer=False)
    started = time.monotonic()
    res = rlm.run("question", context="some data")
    took = time.monotonic() - started
    assert res.answer == "done" and res.stopped_by == "final", (res.answer, res.error)
    assert took < 5 + LATE_SECONDS + 5, took
