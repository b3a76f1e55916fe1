"""Limits that model code tries to switch off or walk around (engine + plain executor).

The model is scripted: these cases are about the host's mechanics, not answers.
Each asserts what the user must get: the run ends, with a readable reason, and
the steps so far are kept.
"""

from __future__ import annotations

import signal
import sys
import time

import pytest

from rlm_kernel.executors import PlainExecutor
from tests.replies import block

from .helpers import THOUGHT, scripted_run

SWALLOW = """import time
while True:
    try:
        time.sleep(1)
    except BaseException:
        pass"""

TIMEOUT_CASES = {
    "alarm(0) then spin": "import signal, time\nsignal.alarm(0)\n"
                          "signal.setitimer(signal.ITIMER_REAL, 0)\nwhile True: pass",
    "SIGALRM ignored": "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                       "while True: pass",
    "own SIGALRM handler": "import signal\nsignal.signal(signal.SIGALRM, lambda *a: None)\n"
                           "while True: pass",
    "except BaseException loop": SWALLOW,
    "bare except loop": SWALLOW.replace("except BaseException:", "except:"),
    "nested swallowing loops": "import time\nwhile True:\n  try:\n    while True:\n"
                               "      try:\n        time.sleep(1)\n"
                               "      except BaseException:\n        pass\n"
                               "  except BaseException:\n    pass",
    "swallow and untrace": "import sys, time\nwhile True:\n    try:\n        time.sleep(0.2)\n"
                           "    except BaseException:\n        sys.settrace(None)",
    "swallow inside a function": "import time\ndef f():\n    while True:\n        try:\n"
                                 "            time.sleep(0.2)\n        except BaseException:\n"
                                 "            pass\nwhile True:\n    try:\n        f()\n"
                                 "    except BaseException:\n        pass",
}


@pytest.mark.parametrize("code", TIMEOUT_CASES.values(), ids=TIMEOUT_CASES.keys())
def test_step_timeout_survives_signal_games_and_swallowing(code):
    rlm, _ = scripted_run([block(code, THOUGHT), block("FINAL('after')", THOUGHT)], step_timeout=1)
    alarm_before = signal.getsignal(signal.SIGALRM)
    start = time.monotonic()
    ex = PlainExecutor()
    res = rlm.run("q", context="x", executor=ex)
    took = time.monotonic() - start
    assert res.stopped_by == "final" and res.answer == "after"
    assert "StepTimeout" in res.history.entries[0].output
    assert took < 15, f"a 1 s step ran {took:.1f} s"
    # nothing of the escalation is left behind in the host
    assert sys.gettrace() is None
    assert signal.getsignal(signal.SIGALRM) is alarm_before
    assert "BaseException" not in ex.namespace  # the escalation's shadow name is gone


def test_swallowed_final_still_ends_the_run():
    for handler in ("except BaseException:", "except:"):
        rlm, _ = scripted_run([block(f"try:\n    FINAL(42)\n{handler}\n    pass\nx = 1", THOUGHT),
                               block("FINAL('too late')", THOUGHT)])
        res = rlm.run("q", context="x")
        assert (res.stopped_by, res.answer_value, res.steps) == ("final", 42, 1), handler


def test_first_final_of_a_step_wins():
    rlm, _ = scripted_run([block("try:\n    FINAL('first')\nexcept BaseException:\n    pass\n"
                                 "FINAL('second')", THOUGHT)])
    assert rlm.run("q", context="x").answer == "first"


def test_depth_limit_is_not_an_attribute_of_the_namespace_functions(executor_kind):
    """Child runs would go on for ever if the depth came from the namespace.  Behind the
    process wall ``llm_query`` is a stub with no ``__self__`` (the depth lives on the
    host only): the rewrite fails, and the calls that follow keep the host's depth."""
    attack = ("try:\n    llm_query.__self__.max_depth = 99\n    llm_query.__self__.depth = -5\n"
              "except AttributeError as exc:\n    print('no handle:', exc)\n"
              "print(rlm_query('go deeper'))")
    rlm, lm = scripted_run([block(attack, THOUGHT)] * 12 + [block("FINAL('done')", THOUGHT)] * 5,
                           max_depth=1, child_max_iterations=2)
    res = rlm.run("q", context="x")
    assert max(c.depth for c in res.calls) <= 1
    assert res.stopped_by in ("final", "max_iterations", "stuck")  # the attack repeats
    rewrite_failed = "no handle: 'HostFunction' object has no attribute '__self__'" \
        in res.history.entries[0].output
    assert rewrite_failed == (executor_kind == "isolated")


def test_child_runner_called_directly_keeps_the_hosts_depth():
    attack = "runner = llm_query.__self__.child_runner\nprint(runner('go deeper', None))"
    rlm, _ = scripted_run([block(attack, THOUGHT)] * 12 + [block("FINAL('done')", THOUGHT)] * 5,
                          max_depth=1, child_max_iterations=2)
    res = rlm.run("q", context="x")
    assert max(c.depth for c in res.calls) <= 1


def test_batched_calls_cannot_overshoot_the_call_budget():
    rlm, lm = scripted_run([block("r = llm_query_batched(['p%d' % i for i in range(20)])\n"
                                  "print(sum(x.startswith('Error') for x in r))", THOUGHT)] * 3,
                           max_llm_calls=5)
    res = rlm.run("q", context="x")
    assert res.llm_calls <= 5
    assert res.stopped_by == "budget" and "5 LLM calls" in res.error
    assert res.steps == 1 and res.history.entries[0].output.strip() == "16"


def test_calling_the_client_behind_llm_query_is_still_budgeted(executor_kind):
    """In-process the attack calls the client object behind ``llm_query``.  Behind the
    process wall there is no client in the child: the nearest thing is the worker's
    channel behind the stub, and calls made through it directly are the host's
    ``llm_query``, budgeted the same."""
    attack = ("c = llm_query.__self__.sub_client\nn = 0\nfor i in range(20):\n"
              "    try:\n        c.complete([{'role': 'user', 'content': 'hi'}], role='sub')\n"
              "        n += 1\n    except BaseException:\n        pass\nprint(n)\nFINAL(n)")
    if executor_kind == "isolated":
        attack = ("w = llm_query._worker\nn = 0\nfor i in range(20):\n"
                  "    try:\n        w.call_host(llm_query.key, ('hi',), {})\n"
                  "        n += 1\n    except BaseException:\n        pass\nprint(n)\nFINAL(n)")
    rlm, _ = scripted_run([block(attack, THOUGHT)], max_llm_calls=3)
    res = rlm.run("q", context="x")
    assert res.llm_calls <= 3
    assert res.stopped_by == "budget"
    assert res.history.entries[0].output.strip() == "2"


def test_calls_made_around_the_guard_end_the_run(executor_kind):
    """In-process the raw client is reachable and calls made with it end the run.  Behind
    the process wall no client is in the child (``llm_query`` is a stub with no
    ``__self__``): no call can be made around the guard, so the model saw only the
    calls the run recorded."""
    attack = ("c = llm_query.__self__.sub_client\nwhile hasattr(c, '_client'):\n"
              "    c = c._client  # the wrappers' innermost: the model client itself\n"
              "for i in range(10):\n"
              "    c.complete([{'role': 'user', 'content': 'hi'}], role='sub')\nFINAL('x')")
    rlm, lm = scripted_run([block(attack, THOUGHT)], max_llm_calls=3)
    res = rlm.run("q", context="x")
    if executor_kind == "isolated":
        assert "'HostFunction' object has no attribute '__self__'" \
            in res.history.entries[0].output
        assert len(lm.calls) == res.llm_calls <= 3
        return
    assert res.stopped_by == "budget" and "around the budget check" in res.error
    assert res.steps == 1


def test_token_budget_caps_each_call():
    rlm, lm = scripted_run([block("print(llm_query('a'))", THOUGHT)] * 20, max_tokens=100,
                           max_step_tokens=1024)
    res = rlm.run("q", context="x")
    assert res.stopped_by == "budget"
    assert all(cap is not None and cap <= 100 for cap in lm.caps)
    used = res.prompt_tokens + res.completion_tokens
    assert used <= 100 + 15  # at most one call past the line, and that call capped
