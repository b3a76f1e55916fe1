"""time_limit: a step's time limit that fires in blocking calls, in any thread, through
``except BaseException`` in a loop, and leaves nothing armed behind it."""

from __future__ import annotations

import linecache
import signal
import sys
import threading
import time

import pytest

from rlm_kernel.executors import timeouts
from rlm_kernel.executors.timeouts import (
    REARM_SECONDS,
    StepTimeout,
    time_limit,
    timeout_message,
)

# model-like code below spins for ever if the limit fails: end the session instead of
# waiting out the suite's 900 s (a thread, since the limit replaces SIGALRM's handler)
pytestmark = pytest.mark.timeout(30, method="thread")


def watchdogs() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "rlm-step-timeout"]


def test_the_timeout_line_names_the_limit():
    assert timeout_message(2.5) == "StepTimeout: step exceeded its time limit of 2.5 s and was stopped\n"
    assert "time limit of 0 s" in timeout_message(None)


def test_step_timeout_is_not_an_exception_model_code_catches_by_accident():
    assert issubclass(StepTimeout, BaseException) and not issubclass(StepTimeout, Exception)


@pytest.mark.parametrize("seconds", [None, 0, -1])
def test_no_limit_starts_nothing_and_never_fires(seconds):
    with time_limit(seconds) as state:
        assert not watchdogs()
        time.sleep(0.05)
    assert not state.fired and not state.cut_short(None)


def test_a_blocking_call_is_interrupted_at_the_limit():
    start = time.monotonic()
    with pytest.raises(StepTimeout, match="time limit of 0.2 s"):
        with time_limit(0.2) as state:
            time.sleep(10)
    assert time.monotonic() - start < 2
    assert state.fired
    assert state.cut_short(None)  # no FINAL: the step was cut short
    assert not state.cut_short({"answer": 1, "type": "direct"})  # FINAL came first


def test_a_step_within_its_limit_is_untouched():
    with time_limit(5) as state:
        total = sum(range(1000))
    assert total == 499500 and not state.fired


def test_fired_stays_true_when_the_code_caught_the_timeout():
    with time_limit(0.2) as state:
        try:
            time.sleep(10)
        except StepTimeout:
            pass
    assert state.fired


def test_nothing_is_left_armed_after_the_block():
    def mine(signum, frame):  # a handler of the host's own
        raise AssertionError("the host's handler must not be called")

    previous = signal.signal(signal.SIGALRM, mine)
    try:
        with pytest.raises(StepTimeout):
            with time_limit(0.2):
                time.sleep(10)
        assert signal.getsignal(signal.SIGALRM) is mine
        assert not watchdogs()
        time.sleep(REARM_SECONDS + 0.3)  # no re-raise arrives after the block
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_switching_off_the_alarm_does_not_switch_off_the_limit():
    start = time.monotonic()
    with pytest.raises(StepTimeout):
        with time_limit(0.2):
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            while True:
                pass
    assert time.monotonic() - start < 3  # the watchdog thread stepped in


def test_the_limit_works_in_a_thread_other_than_the_main_one():
    outcome = []

    def step():
        start = time.monotonic()
        try:
            with time_limit(0.2):
                while True:
                    pass
        except StepTimeout:
            outcome.append(time.monotonic() - start)

    worker = threading.Thread(target=step)
    worker.start()
    worker.join(10)
    assert not worker.is_alive()
    assert len(outcome) == 1 and outcome[0] < 3


def test_an_inner_limit_that_fired_does_not_fire_again_in_the_outer_one():
    with time_limit(5) as outer:
        with pytest.raises(StepTimeout):
            with time_limit(0.2) as inner:
                time.sleep(10)
        time.sleep(REARM_SECONDS + 0.2)  # the inner limit's re-raises are gone
    assert inner.fired and not outer.fired


def test_a_loop_swallowing_every_exception_in_step_code_is_still_stopped(monkeypatch):
    """After the grace period the limit re-raises on every line of step code (code
    registered in linecache without a file, as the executors register it) and
    ``except BaseException`` no longer matches it.  (Shorter re-arm and grace here,
    to keep the test fast.)"""
    monkeypatch.setattr(timeouts, "REARM_SECONDS", 0.1)
    monkeypatch.setattr(timeouts, "GRACE_SECONDS", 0.3)
    filename = "<test-timeouts-swallow>"
    code = ("import time\nwhile True:\n    try:\n        time.sleep(1)\n"
            "    except BaseException:\n        pass\n")
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    namespace: dict = {}
    start = time.monotonic()
    try:
        with pytest.raises(StepTimeout):
            with time_limit(0.2):
                exec(compile(code, filename, "exec"), namespace)
    finally:
        linecache.cache.pop(filename, None)
    assert time.monotonic() - start < 2
    assert sys.gettrace() is None  # the escalation's line tracer is gone
    assert "BaseException" not in namespace  # and so is its shadow name


def test_an_outer_limit_still_interrupts_a_blocking_call_after_an_inner_one_ended():
    """A step's limit around a child run's limit (rlm_query): the child's end must not
    switch off the step's alarm, or a blocking call after it runs to its end."""
    started = time.monotonic()
    with pytest.raises(StepTimeout):
        with time_limit(1.0):
            with time_limit(5.0):
                pass  # the child run ends quickly
            time.sleep(6)
    assert time.monotonic() - started < 2.5
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_step_that_ran_rlm_query_is_still_stopped_in_a_blocking_call():
    from rlm_kernel import RLM
    from rlm_kernel.models.scripted import ScriptedModel
    from tests.replies import block

    lm = ScriptedModel([block("r = rlm_query('inner', context='x')\nimport time\ntime.sleep(6)"),
                        block("FINAL('inner answer')"), block("FINAL('done')")])
    started = time.monotonic()
    res = RLM(root_client=lm, sub_client=lm, step_timeout=1.5, verify_answer=False,
              resample_temperature=0).run("q", context="c")
    assert "StepTimeout" in res.history.entries[0].output
    assert time.monotonic() - started < 4.5
