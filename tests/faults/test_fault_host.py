"""Model code that tries to break the host process (engine + plain executor)."""

from __future__ import annotations

import builtins
import signal
import sys

import pytest

from rlm_kernel.executors import PlainExecutor
from rlm_kernel.models import Completion, LLMCall
from tests.replies import block

from .helpers import THOUGHT, scripted_run


@pytest.mark.parametrize("code", ["exit()", "quit()", "exit(3)", "import sys; sys.exit(2)",
                                  "raise SystemExit"])
def test_exit_in_model_code_is_ignored_and_closes_nothing(code):
    stdin = sys.stdin
    rlm, _ = scripted_run([block(code, THOUGHT), block("FINAL('still here')", THOUGHT)])
    res = rlm.run("q", context="x")
    assert res.answer == "still here"
    assert "ignored" in res.history.entries[0].output
    assert sys.stdin is stdin and not stdin.closed


def test_closing_the_real_stdout_touches_only_the_step():
    real = sys.__stdout__
    rlm, _ = scripted_run([block("import sys\nsys.__stdout__.close()\nsys.__stderr__.close()\n"
                                 "sys.stdout = None", THOUGHT),
                           block("print('ok')\nFINAL(1)", THOUGHT)])
    res = rlm.run("q", context="x")
    assert res.answer == "1" and res.history.entries[1].output.strip() == "ok"
    assert sys.__stdout__ is real and not real.closed


@pytest.mark.parametrize("exc", ["GeneratorExit", "StopIteration", "MemoryError",
                                 "RecursionError"])
def test_odd_exceptions_are_model_errors(exc):
    rlm, _ = scripted_run([block(f"raise {exc}", THOUGHT), block("FINAL('went on')", THOUGHT)])
    res = rlm.run("q", context="x")
    assert res.answer == "went on"
    assert f"{exc}" in res.history.entries[0].output
    assert "Traceback" in res.history.entries[0].output


def test_rebound_builtins_are_restored_and_reported():
    original = builtins.len
    rlm, lm = scripted_run([block("import builtins\nbuiltins.len = lambda x: 42\n"
                                  "builtins.novel = 1\ndel builtins.sorted\nprint(len([1]))",
                                  THOUGHT),
                            block("FINAL(len([1, 2]))", THOUGHT)])
    res = rlm.run("q", context="x")
    assert builtins.len is original and not hasattr(builtins, "novel")
    assert builtins.sorted([2, 1]) == [1, 2]
    out = res.history.entries[0].output
    assert "42" in out and "len" in out and "restored" in out
    assert res.answer_value == 2


def test_signal_handlers_and_tracers_set_by_model_code_are_undone():
    sigint = signal.getsignal(signal.SIGINT)
    rlm, _ = scripted_run([block("import signal, sys\n"
                                 "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                 "sys.settrace(lambda *a: None)\nsys.setprofile(lambda *a: None)",
                                 THOUGHT),
                           block("FINAL(1)", THOUGHT)])
    rlm.run("q", context="x")
    assert signal.getsignal(signal.SIGINT) is sigint
    assert sys.gettrace() is None and sys.getprofile() is None


def test_reading_stdin_does_not_wait():
    rlm, _ = scripted_run([block("x = input('? ')", THOUGHT), block("FINAL(1)", THOUGHT)],
                          step_timeout=30)
    res = rlm.run("q", context="x")
    assert "EOFError" in res.history.entries[0].output


class _BrokenClient:
    """A client that answers once, then misbehaves in the given way."""

    model = "broken"
    max_tokens = context_window = None  # the LanguageModel protocol's facts

    def __init__(self, failure):
        self.failure, self.n, self.ledger, self.depth = failure, 0, None, 0

    def check(self):
        pass

    def complete(self, messages, **kw):
        self.n += 1
        if self.n == 1:
            return Completion(text=block("x = 1\nprint(x)", THOUGHT),
                              call=LLMCall(model="broken", role="root"))
        if self.failure == "none":
            return Completion(text=None, call=LLMCall(model="broken", role="root"))
        raise self.failure


@pytest.mark.parametrize("failure", ["none", RuntimeError("socket went away"),
                                     ValueError("bad json"), ConnectionResetError(104, "reset")],
                         ids=["text None", "RuntimeError", "ValueError", "ConnectionResetError"])
def test_a_broken_client_ends_the_run_with_its_steps(failure):
    from rlm_kernel import RLM

    client = _BrokenClient(failure)
    ex = PlainExecutor()
    res = RLM(root_client=client, sub_client=client, verify_answer=False).run(
        "q", context="x", executor=ex)
    assert res.stopped_by == "error" and res.error
    assert "Traceback" not in res.error
    assert res.steps == 1 and ex.namespace["x"] == 1
