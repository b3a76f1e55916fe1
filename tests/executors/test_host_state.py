"""step_scope: the process state a step may use but not keep (builtins, sys streams,
trace and profile functions, signal handlers, threads it leaves running)."""

from __future__ import annotations

import builtins
import io
import signal
import sys
import threading

import pytest

from rlm_kernel.executors.host_state import builtins_note, step_scope
from rlm_kernel.executors.thread_output import release_finished_threads


def test_exit_and_quit_raise_system_exit_and_close_nothing():
    stdin = sys.stdin
    before = builtins.__dict__.get("exit"), builtins.__dict__.get("quit")  # None if absent
    with step_scope() as scope:
        for name, code in (("exit", 3), ("quit", None)):
            with pytest.raises(SystemExit) as raised:
                getattr(builtins, name)(code)
            assert raised.value.code == code
        assert "cannot stop the REPL" in repr(builtins.exit)
    assert (builtins.__dict__.get("exit"), builtins.__dict__.get("quit")) == before
    assert sys.stdin is stdin
    assert scope.changed_builtins == []  # the scope's own exit/quit are not the step's


def test_own_exit_off_leaves_exit_as_it_is():
    before = builtins.__dict__.get("exit")  # None if absent
    with step_scope(own_exit=False):
        assert builtins.__dict__.get("exit") is before


def test_stdin_reads_empty_during_the_step():
    with step_scope():
        assert sys.stdin.read() == "" and sys.stdin.readline() == ""
        with pytest.raises(EOFError):
            input("? ")


def test_the_real_streams_are_the_steps_own_and_come_back():
    out, err = io.StringIO(), io.StringIO()
    saved = sys.__stdout__, sys.__stderr__, sys.stdout, sys.stderr
    with step_scope(out, err):
        assert sys.__stdout__ is out and sys.__stderr__ is err
        sys.__stdout__.close()
        sys.stdout = None
    assert (sys.__stdout__, sys.__stderr__, sys.stdout, sys.stderr) == saved
    assert out.closed and not saved[0].closed


def test_changed_builtins_are_restored_and_named():
    original_len, original_sorted = builtins.len, builtins.sorted
    with step_scope() as scope:
        builtins.len = lambda x: 42
        builtins.novel = 1
        del builtins.sorted
    assert builtins.len is original_len and builtins.sorted is original_sorted
    assert not hasattr(builtins, "novel")
    assert scope.changed_builtins == ["len", "novel", "sorted"]
    assert scope.notes() == builtins_note(["len", "novel", "sorted"])
    assert "len, novel, sorted" in scope.notes() and "restored" in scope.notes()


def test_the_displayhooks_underscore_is_restored_but_not_reported():
    had = "_" in builtins.__dict__
    before = builtins.__dict__.get("_")
    with step_scope() as scope:
        builtins._ = "a value shown by the step"
    assert scope.changed_builtins == [] and scope.notes() == ""
    assert ("_" in builtins.__dict__) == had and builtins.__dict__.get("_") is before


def test_state_is_restored_when_the_step_raises():
    original = builtins.len
    with pytest.raises(RuntimeError), step_scope():
        builtins.len = None
        raise RuntimeError("model code failed")
    assert builtins.len is original


def test_trace_profile_and_signal_handlers_are_put_back():
    trace, profile = sys.gettrace(), sys.getprofile()
    sigint = signal.getsignal(signal.SIGINT)
    try:
        with step_scope():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            sys.settrace(lambda *a: None)
            sys.setprofile(lambda *a: None)
        assert sys.gettrace() is trace and sys.getprofile() is profile
        assert signal.getsignal(signal.SIGINT) is sigint
    finally:
        sys.settrace(trace)
        sys.setprofile(profile)
        signal.signal(signal.SIGINT, sigint)


def test_a_thread_left_running_is_counted_and_noted(monkeypatch):
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    stop = threading.Event()
    waiting = threading.Thread(target=stop.wait, args=(10,), daemon=True)
    try:
        with step_scope() as scope:
            waiting.start()
            finished = threading.Thread(target=lambda: None)
            finished.start()
            finished.join()
        assert scope.left_threads == 1
        assert "left 1 thread(s) running" in scope.notes()
    finally:
        stop.set()
        waiting.join(5)
        release_finished_threads()


def test_a_quiet_step_has_no_notes():
    with step_scope() as scope:
        x = len([1, 2])
    assert x == 2 and scope.changed_builtins == [] and scope.left_threads == 0
    assert scope.notes() == ""


def test_a_step_inside_a_running_event_loop_cannot_stop_it():
    """Shared fault case kr02_asyncio_stop.py, over a plain asyncio loop: a stop the
    step asks for, at once or queued, is called off; the loop runs on."""
    import asyncio

    seen: dict[str, object] = {}

    def step() -> None:
        with step_scope() as scope:
            loop = asyncio.get_event_loop()
            loop.stop()
            loop.call_soon(loop.stop)
            loop.call_later(0.01, loop.stop)
        seen["changed"] = scope.changed_settings
        loop.call_later(0.1, lambda: seen.setdefault("still running", True))
        loop.call_later(0.2, loop.stop)  # the host's own stop, after the step

    loop = asyncio.new_event_loop()
    try:
        loop.call_soon(step)
        loop.run_forever()
    finally:
        loop.close()
    assert seen == {"changed": ["the asyncio event loop's stop"], "still running": True}


def test_a_low_level_thread_a_step_leaves_is_muted(monkeypatch):
    """Shared fault case c20_low_level_thread.py: a thread with no ``threading.Thread``
    (``_thread.start_new_thread``) is quarantined by identifier until it ends."""
    import _thread

    from rlm_kernel.executors.thread_output import is_quarantined, quarantined_running

    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    started, go, done = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def chatter() -> None:
        started.set()
        go.wait(10)
        seen.append(is_quarantined())
        print("from the low-level thread")
        done.set()

    with step_scope(stdout=io.StringIO()) as scope:
        _thread.start_new_thread(chatter, ())
        assert started.wait(10)
    assert scope.left_threads == 1 and quarantined_running() == 1
    go.set()
    assert done.wait(10)
    print("from the host")
    assert seen == [True] and "low-level" not in out.getvalue()
    deadline = threading.Event()
    for _ in range(100):
        if quarantined_running() == 0:
            break
        deadline.wait(0.05)
    assert quarantined_running() == 0
    assert not is_quarantined()
