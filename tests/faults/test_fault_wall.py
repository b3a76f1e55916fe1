"""Shared fault cases that only the process wall holds: each runs against the isolated
executor only (in-process, model code shares the host's process, and these attacks end
it, outlive the step or rewrite what the host relies on).

For each: the run ends with a readable reason or goes on, the trajectory so far is kept,
the host process survives and the limit holds.  The docstring of each test names its case
file in ``../shared/fault-cases/``.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from pathlib import Path

import pytest

from rlm_kernel.executors import PlainExecutor
from tests.replies import block
from tests.scripted import scripted_rlm

from .helpers import THOUGHT

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux process limits")

SECRET = "sk-test-0123456789abcdefSECRET"


def run_isolated(*codes: str, **cfg):
    """A scripted run of ``codes`` (one step each) behind the process wall, with a 2 s step
    limit as the cases' ``h.run`` has; returns (result, model, seconds)."""
    cfg.setdefault("step_timeout", 2)
    rlm, lm = scripted_rlm([block(c, THOUGHT) for c in codes], executor="isolated", **cfg)
    started = time.monotonic()
    res = rlm.run("question", context="some data")
    return res, lm, time.monotonic() - started


def kept(res, *codes: str) -> bool:
    """The trajectory holds one entry per step run, in order, with the code of each."""
    entries = res.history.entries
    return len(entries) == res.steps and [e.code for e in entries[:len(codes)]] == list(codes)


def _alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# -- the process ends or is signalled ------------------------------------------------------
def test_os_exit_ends_only_the_child_and_the_run_goes_on():
    """Shared fault case c11_os_exit.py."""
    pid = os.getpid()
    attack = "import os\nos._exit(3)"
    res, _, _ = run_isolated("x = 41", attack, "FINAL(x + 1)")
    assert os.getpid() == pid and res.answer == "42" and res.stopped_by == "final"
    assert kept(res, "x = 41", attack)
    out = res.history.entries[1].output
    assert "exited with status 3 during the step" in out and "restarted" in out


def test_sigterm_to_itself_is_a_model_error_and_the_run_goes_on():
    """Shared fault case c12_sigterm_self.py: the signal reaches the child only, which
    tells it from the host's (sent only past the step's limit)."""
    attack = "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\nimport time; time.sleep(0.5)"
    res, _, took = run_isolated(attack, "FINAL('still here')", step_timeout=10)
    assert res.answer == "still here" and took < 8
    assert kept(res, attack)
    out = res.history.entries[0].output
    assert "SIGTERM reached the REPL process from model code" in out
    assert "StepTimeout" not in out


def test_faulthandler_exit_later_ends_only_the_child():
    """Shared fault case c13_faulthandler_later_exit.py: the C watchdog kills the child a
    second later, in the middle of the next step; the host lives on."""
    arm = "import faulthandler\nfaulthandler.dump_traceback_later(1, exit=True, file=2)"
    res, _, _ = run_isolated("x = 7", arm, "import time\ntime.sleep(3)\nprint('slept')",
                             "FINAL(x)", step_timeout=6)
    assert res.answer == "7" and res.stopped_by == "final"
    assert kept(res, "x = 7", arm)
    out = res.history.entries[2].output
    assert "during the step" in out and "restarted" in out and "slept" not in out
    time.sleep(1.5)  # no watchdog of the child's is left to end the host
    assert PlainExecutor().execute("y = 1").success


# -- fork --------------------------------------------------------------------------------------
def test_fork_makes_one_run_inside_its_budget():
    """Shared fault case c18_fork.py: the forked copy of the worker ends with its copy
    of the step; only the worker talks to the host, so the run is made once."""
    pid = os.getpid()
    fork = "import os\npid = os.fork()\nwho = 'child' if pid == 0 else 'parent'"
    res, lm, _ = run_isolated(fork, "print(who)", "FINAL(who)", max_llm_calls=3)
    assert os.getpid() == pid
    assert res.answer == "parent" and len(lm.calls) == res.llm_calls == 3
    assert kept(res, fork) and res.history.entries[1].output.strip() == "parent"


def test_a_forked_spinning_child_does_not_outlive_the_run():
    """Shared fault case c19_fork_spin.py: the forked process is in the worker's PID
    namespace, killed with it when the run ends.  (It names itself, ``prctl``'s
    ``PR_SET_NAME``, so the host can look for it: its pid is the namespace's.)"""
    name = f"rlmspin{os.getpid() % 100000}"
    spin = (f"import ctypes, os, time\npid = os.fork()\nif pid == 0:\n"
            f"    ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\n"
            "    while True:\n        pass\ntime.sleep(0.3)\n"
            "print(open(f'/proc/{pid}/comm').read().strip())")
    res, _, took = run_isolated(spin, "FINAL('parent done')")
    assert res.answer == "parent done" and took < 10 and kept(res, spin)
    assert res.history.entries[0].output.strip() == name  # it was spinning

    def spinners() -> list[int]:
        found = []
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and open(f"/proc/{entry}/comm").read().strip() == name:
                    found.append(int(entry))
            except OSError:
                pass
        return found

    deadline = time.monotonic() + 5
    while spinners() and time.monotonic() < deadline:
        time.sleep(0.05)
    left = spinners()
    for pid in left:
        os.kill(pid, 9)
    assert not left, "the forked child of a step spins on after the run"


# -- process-wide hooks and settings -------------------------------------------------------
def test_an_audit_hook_stays_in_the_child():
    """Shared fault case c24_audit_hook.py: the hook refuses the child's later steps (its
    own process), but neither the host nor a later run is touched."""
    hook = ("import sys\n"
            "def hook(event, args):\n"
            "    if event == 'exec' and getattr(args[0], 'co_filename', '').startswith('<rlm-step'):\n"
            "        raise RuntimeError('refused by a hook a model installed')\n"
            "sys.addaudithook(hook)")
    res, _, _ = run_isolated(hook, "FINAL('after')", max_consecutive_errors=2)
    assert kept(res, hook)
    assert "refused by a hook a model installed" in res.history.entries[1].output
    res2, _, _ = run_isolated("x = 41 + 1", "FINAL(x)", max_consecutive_errors=2)
    assert res2.answer == "42"
    assert PlainExecutor().execute("z = 1").success  # no hook in the host


def test_a_starved_switch_interval_does_not_outlast_the_step_limit():
    """Shared fault case b06_switchinterval.py: a huge switch interval and SIGALRM ignored
    starve the child's own watchdog; the host's signals end the step."""
    attack = ("import sys, signal\nsys.setswitchinterval(1000)\n"
              "signal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True: pass")
    res, _, took = run_isolated("x = 1", attack, "FINAL(x)")
    assert took < 15 and res.answer == "1" and kept(res, "x = 1", attack)
    assert "time limit of 2 s" in res.history.entries[1].output
    assert sys.getswitchinterval() < 1


def test_a_cleared_linecache_does_not_outlast_the_step_limit():
    """Shared fault case t01_linecache_clear.py: the child's escalation no longer sees the
    step's lines; the host kills the child and restarts it from the last snapshot."""
    attack = ("import linecache, time\nlinecache.clearcache()\n"
              "while True:\n    try:\n        time.sleep(1)\n    except BaseException:\n"
              "        pass")
    res, _, took = run_isolated("x = 5", attack, "FINAL(x)", step_timeout=1)
    assert took < 10 and res.answer == "5" and kept(res, "x = 5", attack)
    out = res.history.entries[1].output
    assert "time limit of 1 s" in out and "restarted" in out


def test_sigalrm_ignored_around_a_blocking_sleep_does_not_outlast_the_step_limit():
    """Shared fault case t03_sigign_sleep.py."""
    attack = "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ntime.sleep(3600)"
    res, _, took = run_isolated("x = 3", attack, "FINAL(x)", step_timeout=1)
    assert took < 10 and res.answer == "3" and kept(res, "x = 3", attack)
    assert "time limit of 1 s" in res.history.entries[1].output


# -- budgets ---------------------------------------------------------------------------------
def test_the_guard_cannot_be_replaced_through_llm_query():
    """Shared fault case b01_guard_budget_swap.py: ``llm_query`` in the child is a stub;
    the guard and its budget live on the host."""
    attack = ("try:\n    g = llm_query.__self__.guard\n    g.budget = type(g.budget)()\n"
              "except AttributeError as exc:\n    print('no guard:', exc)\n"
              "for i in range(20):\n    llm_query('p%d' % i)\nprint('made 20 sub-calls')")
    res, lm, _ = run_isolated(attack, "FINAL('done')", max_llm_calls=3)
    assert res.llm_calls <= 3 and len(lm.calls) == res.llm_calls
    assert res.stopped_by == "budget" and "3 LLM calls" in res.error
    out = res.history.entries[0].output
    assert "no guard:" in out and "made 20 sub-calls" not in out and kept(res, attack)


def test_the_ledger_cannot_be_cleared_through_llm_query():
    """Shared fault case b02_ledger_clear.py: the ledger lives on the host; every call
    is recorded."""
    attack = ("try:\n    led = llm_query.__self__.guard.ledger\n"
              "except AttributeError as exc:\n    print('no ledger:', exc)\n    led = None\n"
              "for i in range(10):\n    llm_query('p%d' % i)\n"
              "    if led is not None:\n        led.calls.clear()\nprint('ok')")
    res, lm, _ = run_isolated(attack, "FINAL('done')", max_llm_calls=3)
    assert res.llm_calls == len(lm.calls) <= 3
    assert res.stopped_by == "budget" and kept(res, attack)
    assert "no ledger:" in res.history.entries[0].output


# -- secrets ---------------------------------------------------------------------------------
def test_an_encoded_key_cannot_be_printed_since_the_child_has_no_key(monkeypatch):
    """Shared fault case s06_encoded.py: redaction matches literal values only, but behind
    the process wall the key is not in the child's environment to encode."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    attack = ("import os, base64\nk = os.environ['OPENAI_API_KEY']\n"
              "print(base64.b64encode(k.encode()).decode())\nprint(' '.join(k))")
    res, lm, _ = run_isolated(attack, "FINAL('done')")
    assert res.answer == "done" and kept(res, attack)
    assert "KeyError: 'OPENAI_API_KEY'" in res.history.entries[0].output
    everything = json.dumps(res.to_dict(), default=str) + json.dumps(lm.calls)
    for form in (SECRET, base64.b64encode(SECRET.encode()).decode(), " ".join(SECRET)):
        assert form not in everything
