"""Threads a step leaves running: quarantined, their writes to sys.stdout/sys.stderr
dropped (and counted) while they live, the filters taken off once they end."""

from __future__ import annotations

import io
import sys
import threading
import time

import pytest

from rlm_kernel.executors.redaction import Redactor
from rlm_kernel.executors.streams import StreamTee
from rlm_kernel.executors.thread_output import (
    ThreadFilter,
    filter_streams,
    host_thread,
    host_thread_type,
    is_quarantined,
    live_threads,
    quarantine_step_threads,
    quarantined_running,
    release_finished_threads,
)


@pytest.fixture()
def streams(monkeypatch):
    """A function that makes sys.stdout/sys.stderr StringIOs for the rest of the test
    (called in the test: pytest's capture sets them again between setup and call) and
    returns them.  Threads an earlier test's step left running have ended before it
    (they would count here), and none is left after it."""
    deadline = time.monotonic() + 15
    while quarantined_running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert quarantined_running() == 0, "a thread an earlier test left running still runs"

    def use() -> tuple[io.StringIO, io.StringIO]:
        out, err = io.StringIO(), io.StringIO()
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(sys, "stderr", err)
        return out, err

    yield use
    release_finished_threads()
    assert quarantined_running() == 0


class Waiter:
    """A thread started now that runs ``action`` (in it) each time it is told to, until
    stopped."""

    def __init__(self, name: str | None = None) -> None:
        self._go = threading.Event()
        self._done = threading.Event()
        self._action = None
        self._stop = False
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self._go.wait(10):
            self._go.clear()
            if self._stop:
                return
            self._action()
            self._done.set()

    def do(self, action) -> None:
        self._done.clear()
        self._action = action
        self._go.set()
        assert self._done.wait(10)

    def stop(self) -> None:
        self._stop = True
        self._go.set()
        self.thread.join(10)


def test_live_threads_are_the_threads_alive():
    assert threading.current_thread() in live_threads()
    waiter = Waiter()
    try:
        assert waiter.thread in live_threads()
    finally:
        waiter.stop()
    assert waiter.thread not in live_threads()


def test_a_thread_the_step_left_running_is_silenced_until_it_ends(streams):
    out, err = streams()
    before = live_threads()
    waiter = Waiter()
    try:
        assert quarantine_step_threads(before) == 1
        assert isinstance(sys.stdout, ThreadFilter) and isinstance(sys.stderr, ThreadFilter)
        assert quarantined_running() == 1
        seen = []
        waiter.do(lambda: (seen.append(is_quarantined()), print("from the thread"),
                           sys.stderr.write("err from the thread")))
        print("from the host")
        assert seen == [True] and not is_quarantined()
        assert out.getvalue() == "from the host\n" and err.getvalue() == ""
        assert sys.stdout.dropped == len("from the thread\n")
        assert sys.stderr.dropped == len("err from the thread")
        release_finished_threads()  # still running: the filters stay
        assert isinstance(sys.stdout, ThreadFilter)
    finally:
        waiter.stop()
    release_finished_threads()
    assert sys.stdout is out and sys.stderr is err
    assert quarantined_running() == 0


def test_threads_already_running_ended_or_the_hosts_are_not_the_steps(streams):
    out, _ = streams()
    earlier = Waiter()
    before = live_threads()
    helper = Waiter(name="rlm-helper")
    host_thread(helper.thread)  # registered as the host's own: never the step's
    finished = threading.Thread(target=lambda: None)
    finished.start()
    finished.join()
    try:
        assert quarantine_step_threads(before) == 0
        assert sys.stdout is out  # no filter when nothing is quarantined
        assert quarantined_running() == 0
    finally:
        earlier.stop()
        helper.stop()


def test_a_thread_of_a_host_type_is_not_the_steps_but_a_subclass_of_it_is(streams):
    """ipykernel starts a subshell thread mid-step when JupyterLab's widgets ask for
    one: registered by its exact type, it is the kernel's; model code's subclass is not."""
    streams()

    class KernelThread(threading.Thread):
        pass

    class ModelThread(KernelThread):
        pass

    host_thread_type(KernelThread)
    stop = threading.Event()
    before = live_threads()
    kernels = KernelThread(target=stop.wait, daemon=True)
    kernels.start()
    try:
        assert quarantine_step_threads(before) == 0
        models = ModelThread(target=stop.wait, daemon=True)
        models.start()
        assert quarantine_step_threads(before) == 1
    finally:
        stop.set()
        kernels.join()
        models.join()
    release_finished_threads()


def test_the_extension_registers_ipykernels_subshell_threads(ip):
    from ipykernel.subshell import SubshellThread

    from rlm_kernel.executors import thread_output

    assert SubshellThread in thread_output._host_types


def test_the_filter_passes_other_writes_and_is_the_stream_otherwise():
    inner = io.StringIO()
    filtered = ThreadFilter(inner)
    assert filtered.write("kept") == 4
    assert filtered.getvalue() == "kept" and filtered.dropped == 0  # StringIO's own method


def test_filter_streams_puts_the_filter_back_over_swapped_streams(streams, monkeypatch):
    streams()
    before = live_threads()
    waiter = Waiter()
    try:
        quarantine_step_threads(before)
        replacement = io.StringIO()
        monkeypatch.setattr(sys, "stdout", replacement)  # as a step's redirect ends
        filter_streams()
        assert isinstance(sys.stdout, ThreadFilter) and sys.stdout._stream is replacement
        filter_streams()  # idempotent: one filter, not two
        assert sys.stdout._stream is replacement
        waiter.do(lambda: print("late"))
        assert replacement.getvalue() == ""
    finally:
        waiter.stop()


def test_filter_streams_without_quarantined_threads_changes_nothing(streams):
    out, err = streams()
    filter_streams()
    assert sys.stdout is out and sys.stderr is err


def test_a_step_stream_ignores_a_quarantined_thread(streams):
    streams()
    before = live_threads()
    waiter = Waiter()
    try:
        quarantine_step_threads(before)
        tee = StreamTee("stdout", None, redact=Redactor({}))
        waiter.do(lambda: tee.write("from an earlier step's thread"))
        tee.write("this step")
        assert tee.getvalue() == "this step"
    finally:
        waiter.stop()


def test_a_thread_named_like_the_hosts_is_still_the_steps(streams):
    """Shared fault case c10_thread_named_rlm.py: the name does not make a thread the
    host's."""
    streams()
    before = live_threads()
    waiter = Waiter(name="rlm-stream-flush")
    try:
        assert quarantine_step_threads(before) == 1
    finally:
        waiter.stop()


def test_a_new_thread_with_an_ended_ones_identifier_is_not_muted(streams):
    """Shared fault case c27_ident_reuse.py: quarantine is by thread, not identifier."""
    streams()
    before = live_threads()
    left = Waiter()
    assert quarantine_step_threads(before) == 1
    left.stop()
    seen = []
    for _ in range(50):  # the system reuses an ended thread's identifier, soon if not at once
        t = threading.Thread(target=lambda: seen.append((threading.get_ident(), is_quarantined())))
        t.start()
        t.join()
    assert not any(q for _, q in seen)


def test_a_low_level_thread_that_reuses_an_ended_threads_ident_is_still_the_steps():
    """A thread alive when the step started ends during it, and the step then starts a
    thread below :mod:`threading` (``_thread.start_new_thread``), which gets the ended
    thread's identifier (``threading.get_ident()`` is the thread's address, reused at
    once).  Claim: the new thread is the step's all the same (counted, its later writes
    dropped): a thread is told from an earlier one with its identifier by its bottom
    frame."""
    import _thread

    from rlm_kernel.executors import PlainExecutor

    ev = threading.Event()
    older = threading.Thread(target=ev.wait, daemon=True)
    older.start()
    stop = threading.Event()
    code = ("import _thread, time\nev.set(); older.join()\n"
            "def chatter():\n    while not stop.is_set():\n        print('bg')\n"
            "        time.sleep(0.01)\n"
            "_thread.start_new_thread(chatter, ())\ntime.sleep(0.05)")
    ex = PlainExecutor({"ev": ev, "older": older, "stop": stop, "_thread": _thread})
    try:
        res = ex.execute(code)
        assert "left 1 thread" in res.stderr, (res.stdout, res.stderr)
        later = ex.execute("import time\ntime.sleep(0.2)\nprint('quiet')")
        assert later.stdout == "quiet\n", later.stdout
    finally:
        stop.set()
        time.sleep(0.1)
