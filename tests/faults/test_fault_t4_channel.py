"""Fault cases of ``../shared/fault-cases-t4/`` against the isolated executor's channel
and limits: what the worker process sends (model code owns that process, so anything it
can send, model code can forge), values that run code when they are read, and steps
that never return.

Each test asserts its case's claim (DESIGN.md, "Isolation: the wall and its channel"),
not the behaviour of one implementation: model code finds the channel as any socket of
its own process and writes raw bytes on it (forged headers in every plausible framing,
junk, replayed call frames), never through the executor's private names.  Scenarios
that can block or freeze the host run in a child host (:func:`.t4_support.host_child`),
judged from outside and killed with their workers at a time limit.
"""

from __future__ import annotations

import pickle
import sys

import pytest

from .t4_support import (
    CHANNEL,
    FRAMINGS,
    forged_header,
    host_child,
    report,
    report_base,
    run_isolated,
    summary,
)

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="Linux process limits"),
              pytest.mark.timeout(120)]

HERE = __name__


def _child(func: str) -> str:
    return f"{HERE}:{func}"


def _run_and_report(*codes: str, **cfg) -> None:
    """In a child host: a scripted isolated run, reported (or what it raised)."""
    import time

    started = time.monotonic()
    try:
        res, lm, took = run_isolated(*codes, **cfg)
    except BaseException as exc:  # noqa: BLE001 - reported to the test, which judges it
        report(raised=f"{type(exc).__name__}: {exc}", took=time.monotonic() - started)
        return
    report(**summary(res, lm, took))


# -- x01: what the worker says does not grow the host's memory ----------------------------------
X01_BYTES = 400_000_000
X01_REDUCE = (
    # a value whose pickle is (bytearray, (N,)): 42 bytes that build N on a reader that
    # calls what a pickle names; left as a variable, passed to llm_query, given to FINAL
    "class B:\n    def __reduce__(self):\n        return (bytearray, (" f"{X01_BYTES},))\n"
    "blob = B()\ntry:\n    llm_query(B())\nexcept Exception as exc:\n"
    "    print('llm_query:', type(exc).__name__)\nprint('bound')",
    "FINAL(B())")


def x01_frame(framing: str) -> str:
    """Model code: a frame that announces, and really sends, N bytes in ``framing``."""
    return (CHANNEL + f"head = {forged_header(X01_BYTES, framing)!r}\n"
            "chunk = b'x' * (1 << 20)\nfor fd in channel_fds():\n    write_raw(fd, head, 5)\n"
            f"    for _ in range({X01_BYTES >> 20}):\n        write_raw(fd, chunk, 5)\n"
            "print('sent')")


class _Big:
    def __reduce__(self):
        return (bytearray, (X01_BYTES,))


X01_PICKLE = pickle.dumps(_Big(), protocol=4)
"""A pickle (a few dozen bytes) that builds ``bytearray(X01_BYTES)`` where it is loaded."""


def x01_pickle(framing: str) -> str:
    """Model code: a forged frame of :data:`X01_PICKLE` in ``framing``."""
    frame = forged_header(len(X01_PICKLE), framing) + X01_PICKLE
    return CHANNEL + f"for fd in channel_fds():\n    write_raw(fd, {frame!r}, 5)\nprint('sent')"


X01_ATTACKS = ["reduce", *(f"frame-{f}" for f in FRAMINGS), "pickle-u32", "pickle-u64"]


def x01_host():
    import os

    kind, _, framing = os.environ["T4_ATTACK"].partition("-")
    codes = {"reduce": lambda: X01_REDUCE,
             "frame": lambda: (x01_frame(framing), "FINAL('after')"),
             "pickle": lambda: (x01_pickle(framing), "FINAL('after')")}[kind]()
    report_base()
    _run_and_report(*codes, max_seconds=10)


@pytest.mark.parametrize("attack", X01_ATTACKS)
def test_what_the_worker_sends_does_not_grow_the_hosts_memory(attack):
    """Case x01_reduce_bytes_host_memory: nothing the worker sends is loaded beyond plain
    data and no frame is taken on its word: a 400 MB ``bytearray`` named by a 42-byte
    pickle (``reduce``: a variable, an ``llm_query`` argument, the ``FINAL`` value), a
    frame announcing and streaming 400 MB (``frame-*``, each framing of
    :data:`FRAMINGS`), or a forged frame holding that pickle (``pickle-*``, the old
    8-byte-length + pickle wire and a 4-byte one) leaves the host's peak resident memory
    within 200 MB of what it was (memory is the worker's OS limit, not the host's)."""
    child = host_child(_child("x01_host"), 50, env={"T4_ATTACK": attack})
    assert child.base_kb is not None, child.describe()
    grew = (child.peak_kb - child.base_kb) // 1024
    assert grew < 200, (f"host peak RSS grew by {grew} MB for {X01_BYTES // 10**6} MB the "
                        f"worker named; {child.describe()}")


# -- x03: a forged frame header does not block the host --------------------------------------
def x03_attack(framing: str) -> str:
    head = forged_header(100_000_000, framing)
    return (CHANNEL + f"for fd in channel_fds():\n    write_raw(fd, {head!r} + b'x' * 10, 5)\n"
            "print('sent')")


def x03_host():
    import os

    _run_and_report(x03_attack(os.environ["T4_ATTACK"]), "FINAL('after')", step_timeout=2,
                    max_seconds=10)


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_forged_frame_header_does_not_block_the_host_past_the_step_limit(framing):
    """Case x03_frame_header_hang: model code writes a header announcing 100 MB (in each
    framing of :data:`FRAMINGS`) and 10 bytes on the channel; the host reads with a
    deadline, kills the worker that does not answer, and ``RLM.run`` returns within the
    run's limits (step_timeout=2, max_seconds=10) with its trajectory."""
    child = host_child(_child("x03_host"), 30, env={"T4_ATTACK": framing})
    assert child.finished, f"RLM.run never returned: host blocked; {child.describe()}"
    res = child.result
    assert res is not None and "raised" not in res, child.describe()
    assert res["took"] < 15, f"RLM.run returned after {res['took']:.1f} s"
    assert res["codes"][:1] == [x03_attack(framing).strip()]


# -- x04: a snapshot that hangs while it loads --------------------------------------------------
X04_CODES = ("import time\nclass Slow:\n    def __reduce__(self):\n"
             "        return (time.sleep, (3600,))\nx = Slow()\nprint('bound')",
             "import os\nos._exit(1)",
             "FINAL('after')")


def x04_host():
    _run_and_report(*X04_CODES, step_timeout=2, max_seconds=10)


def test_a_restarted_worker_that_hangs_loading_its_snapshot_does_not_stop_the_run():
    """Case x04_snapshot_load_hang: step 1 leaves a value whose pickle calls
    ``time.sleep(3600)``, step 2 ends its worker (``os._exit``); the dead worker is a
    failed step, a new one starts (what it cannot load in time is lost, not waited for)
    and the run goes on to its ``FINAL`` within its limits."""
    child = host_child(_child("x04_host"), 30)
    assert child.finished, f"RLM.run never returned: host blocked; {child.describe()}"
    res = child.result
    assert res is not None and "raised" not in res, child.describe()
    assert res["took"] < 15, f"RLM.run returned after {res['took']:.1f} s"
    assert res["answer"] == "after", res
    assert res["codes"][:2] == [c.strip() for c in X04_CODES[:2]]


# -- x06: junk on the channel after FINAL -------------------------------------------------------
X06_ATTACK = CHANNEL + r'''
import threading, time
JUNK = b'\x00\x00\x00\x04junk\x00\x00\x00\x00\x00\x00\x00\x04junk'
fired = []
def fire(fd):
    if not fired:
        fired.append(fd)
        write_raw(fd, JUNK, 5)
originals = {n: getattr(socket.socket, n) for n in ('recv', 'recv_into', 'recvmsg')}
real_read = os.read
def restore():
    for n, f in originals.items():
        setattr(socket.socket, n, f)
    os.read = real_read
def first(name):
    method = originals[name]
    def receive(self, *args, **kwargs):
        restore()
        fire(self.fileno())
        return method(self, *args, **kwargs)
    return receive
def read(fd, n):
    if fd in channel_fds():
        restore()
        fire(fd)
    return real_read(fd, n)
def later():
    time.sleep(0.5)
    for fd in channel_fds():
        fire(fd)
ans = 'the answer'
stop = None
try:
    FINAL(ans)
except BaseException as exc:
    stop = exc
for n in originals:
    setattr(socket.socket, n, first(n))
os.read = read
threading.Thread(target=later, daemon=True).start()
if stop is not None:
    raise stop
'''


def test_junk_on_the_channel_after_final_does_not_lose_the_answer():
    """Case x06_junk_frame_loses_answer: model code calls ``FINAL(ans)``, then writes
    junk frames (4-byte and 8-byte lengths) on the channel when the worker next reads
    from it, that is right after the step's reply (or half a second later); ``FINAL`` was recorded when it was called, so
    ``RLM.run`` returns the answer and the trajectory (a fault ends with a readable
    reason, never an exception out of ``RLM.run``)."""
    res, _, _ = run_isolated(X06_ATTACK)
    assert res.answer == "the answer", (res.stopped_by, res.error)
    entries = res.history.entries
    assert entries and entries[0].code == X06_ATTACK.strip()


# -- x07: a C call that never returns, in a helper ----------------------------------------------
X07_CODES = ("hits = search(r'^(a+)+$', 'a' * 40 + '!', regex=True)\nprint(len(hits))",
             "FINAL('after')")


def x07_host():
    _run_and_report(*X07_CODES, step_timeout=2, max_seconds=6)


def test_a_catastrophic_regex_in_search_is_held_by_the_wall():
    """Case x07_host_search_redos: ``search(r'^(a+)+$', 'a' * 40 + '!', regex=True)``
    runs where model code runs (behind the wall), so the operating system stops it at
    the step limit: ``RLM.run`` returns within its limits (step_timeout=2,
    max_seconds=6) instead of freezing the host in the regex engine."""
    child = host_child(_child("x07_host"), 30)
    assert child.finished, f"RLM.run never returned: host frozen; {child.describe()}"
    res = child.result
    assert res is not None and "raised" not in res, child.describe()
    assert res["took"] < 12, f"RLM.run returned after {res['took']:.1f} s"
    assert res["codes"][:1] == [X07_CODES[0].strip()]


# -- x21: a typed answer that is a DAG ----------------------------------------------------------
X21_CODE = "a = []\nfor i in range(23):\n    a = [a, a]\nFINAL(a)"


def x21_host():
    _run_and_report(X21_CODE, output_type=list, max_seconds=5, step_timeout=2,
                    max_iterations=6)


def test_a_typed_answer_that_expands_exponentially_keeps_the_time_limits():
    """Case x21_typed_dag_to_json: ``output_type=list`` and ``FINAL(a)`` where
    ``a = [a, a]`` nested 23 times (8 million leaves expanded, a small pickle):
    validation and rendering of the answer are time-capped, so ``RLM.run`` returns
    within the run's limits (max_seconds=5)."""
    child = host_child(_child("x21_host"), 30)
    assert child.finished, f"RLM.run never returned; {child.describe()}"
    res = child.result
    assert res is not None and "raised" not in res, child.describe()
    assert res["took"] < 12, f"RLM.run returned after {res['took']:.1f} s"


# -- x30: call frames written on the channel ----------------------------------------------------
X30_ATTACK = CHANNEL + r'''
import time
sent = []
originals = {n: getattr(socket.socket, n) for n in ('send', 'sendall', 'sendmsg')}
real_write = os.write
def recorder(name):
    method = originals[name]
    def record(self, data, *args, **kwargs):
        result = method(self, data, *args, **kwargs)
        chunk = b''.join(bytes(b) for b in data) if name == 'sendmsg' else bytes(data)
        sent.append((self.fileno(), chunk if result is None else chunk[:result]))
        return result
    return record
def write(fd, data):
    n = real_write(fd, data)
    if fd in channel_fds():
        sent.append((fd, bytes(data[:n])))
    return n
for n in originals:
    setattr(socket.socket, n, recorder(n))
os.write = write
try:
    llm_query('probe')
finally:
    for n, f in originals.items():
        setattr(socket.socket, n, f)
    os.write = real_write
frames = {}
for fd, chunk in sent:
    frames[fd] = frames.get(fd, b'') + chunk
print('FORGED', sum(len(b) for b in frames.values()), 'bytes of call frames')
for i in range(30):
    for fd, blob in frames.items():
        write_raw(fd, blob, 5)
time.sleep(1)
print('sent 30 forged calls')
'''


def test_call_frames_written_on_the_channel_are_budgeted_and_recorded():
    """Case x30_forged_call_frames_budget: model code records the bytes the worker
    writes for one ``llm_query`` call and writes them 30 times more on the channel at
    once; with max_llm_calls=3, every call the host makes is within the budget and in
    the ledger, forged frames included."""
    res, lm, _ = run_isolated(X30_ATTACK, "FINAL('done')", max_llm_calls=3, step_timeout=3)
    out = res.history.entries[0].output if res.history.entries else ""
    assert "FORGED" in out and "FORGED 0 " not in out, \
        f"the attack did not capture a call frame to replay: {out[-500:]!r}"
    assert len(lm.calls) <= 3, f"{len(lm.calls)} model calls made, limit 3"
    assert res.llm_calls == len(lm.calls), (res.llm_calls, len(lm.calls))


# -- x33: SIGTERM ignored -----------------------------------------------------------------------
X33_ATTACK = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "signal.signal(signal.SIGALRM, signal.SIG_IGN)\nkept = 7\ntime.sleep(100)")


def test_a_worker_that_ignores_sigterm_is_killed_and_the_run_goes_on():
    """Case x33_sigterm_ignored_isolated: the step ignores SIGTERM and SIGALRM and sleeps
    100 s; past the step limit the worker gets SIGTERM, then SIGKILL, a new worker starts
    from the last snapshot and the run goes on."""
    res, _, took = run_isolated("kept = 7", X33_ATTACK, "FINAL(str(kept))", step_timeout=2)
    assert res.answer == "7" and took < 10, (res.answer, res.stopped_by, took)
    assert [e.code for e in res.history.entries[:2]] == ["kept = 7", X33_ATTACK.strip()]
