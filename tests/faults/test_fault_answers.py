"""Answers of any value: FINAL keeps the object, and its one guarded text never ends the
run with an internal error, escapes ``RLM.run`` or grows without bound (the shared
fault cases c01, c02, c04, c06, c08, c22, h02)."""

from __future__ import annotations

import time

import pytest

from rlm_kernel.engine.answer.text import ANSWER_CHARS, answer_text, describe_variable
from rlm_kernel.executors import guarded_repr
from rlm_kernel.executors.isolated import RemoteValue
from tests.replies import block

from .helpers import THOUGHT, scripted_run


def run(*codes: str, **cfg):
    rlm, lm = scripted_run([block(code, THOUGHT) for code in codes], step_timeout=5, **cfg)
    return rlm.run("q", context="x"), lm


def test_a_dict_with_tuple_keys_is_the_answer():
    """Shared fault case c01_final_dict_tuple_keys.py."""
    res, _ = run("counts = {('a', 1): 3, ('b', 2): 5}\nprint('computed')", "FINAL(counts)")
    assert (res.stopped_by, res.steps) == ("final", 2)
    assert res.answer_value == {("a", 1): 3, ("b", 2): 5}
    assert "('a', 1): 3" in res.answer


@pytest.mark.parametrize("code", ["d = {'name': 'x'}\nd['self'] = d\nFINAL(d)",
                                  "a = [1]\na.append(a)\nFINAL(a)"])
def test_a_value_that_contains_itself_is_the_answer(code):
    """Shared fault cases c02_final_circular_dict.py and h02_circular_list.py."""
    res, _ = run(code)
    assert res.stopped_by == "final" and res.error is None
    assert res.answer_value is not None
    assert "..." in res.answer or "Recursion" in res.answer


@pytest.mark.parametrize("exc", ["SystemExit(7)", "KeyboardInterrupt", "RuntimeError('no')"])
def test_a_value_whose_str_raises_is_still_the_answer(exc, executor_kind):
    """Shared fault cases c04_final_str_raises_systemexit.py and
    c06_final_str_keyboardinterrupt.py.
    The answer is kept and its text is the guarded one.  Behind the process wall a
    class of model code's never reaches the host (only plain data is unpickled there): the
    answer is a :class:`RemoteValue` of the child's type, its text the repr made there."""
    res, _ = run(f"class A:\n    def __str__(self):\n        raise {exc}\n"
                 "    def __repr__(self):\n        return 'A()'\nFINAL(A())")
    assert (res.stopped_by, res.error) == ("final", None)  # not 'interrupt', not raised
    if executor_kind == "isolated":
        assert isinstance(res.answer_value, RemoteValue) and res.answer_value.type_name == "A"
    else:
        assert type(res.answer_value).__name__ == "A"
    assert res.answer == "A()"


def test_a_value_whose_every_rendering_fails_gets_a_placeholder_text(executor_kind):
    """A placeholder naming the type, the same whichever executor ran the step: behind
    the process wall it is made in the child, where the value lives, by the one guarded
    repr the host uses too."""
    res, _ = run("class B:\n    def __str__(self):\n        raise SystemExit(1)\n"
                 "    __repr__ = __str__\nFINAL(B())")
    assert res.stopped_by == "final" and res.answer == "<B object>"


def test_a_value_whose_str_never_returns_is_cut_off():
    started = time.monotonic()
    text = answer_text(type("Slow", (), {"__str__": lambda self: time.sleep(60) or "x",
                                         "__repr__": lambda self: "Slow()"})(), seconds=0.5)
    assert text == "Slow()"
    assert time.monotonic() - started < 10


def test_a_huge_answer_text_is_capped_and_the_value_kept():
    """Shared fault case c22_huge_answer.py."""
    res, _ = run("FINAL('y' * 3_000_000)")
    assert len(res.answer_value) == 3_000_000
    assert len(res.answer) < ANSWER_CHARS + 100
    assert "characters cut: the answer's value is kept whole ...]" in res.answer


def test_a_reward_whose_float_loops_is_not_read():
    """Shared fault case c08_reward_float_hang.py."""
    started = time.monotonic()
    res, _ = run("import time\nclass R(float):\n    def __float__(self):\n"
                 "        while True:\n            time.sleep(0.1)\nRLM_REWARD = R(1.0)",
                 "FINAL(1)")
    assert res.answer == "1" and time.monotonic() - started < 10


def test_the_answer_check_shows_any_value_guarded(executor_kind):
    """The check's message shows the value through a guarded repr.  Behind the process
    wall the host holds a :class:`RemoteValue` whose text is the child's guarded repr."""
    res, lm = run("class C:\n    def __repr__(self):\n        raise SystemExit\nFINAL(C())",
                  "FINAL('fine')", verify_answer=True)
    shown = "a RemoteValue: <C object>" if executor_kind == "isolated" else "a C: <C object>"
    assert f"You called FINAL with {shown}" in lm.calls[1][-1]["content"]
    assert res.answer == "fine"
    assert guarded_repr(list(range(1000)), max_chars=40).endswith("...")


@pytest.mark.parametrize("describe", [
    lambda v: describe_variable("v", v), lambda v: guarded_repr(v), lambda v: answer_text(v)],
    ids=["describe_variable", "guarded_repr", "answer_text"])
def test_a_guarded_rendering_keeps_the_users_interrupt(describe):
    """The guarded renderings catch what a value's methods raise (c06: model code's own
    KeyboardInterrupt is not an interrupt), but not the user's SIGINT that arrives
    meanwhile: seen as an interrupt of the kernel lost while it described variables."""
    import os
    import signal

    class Users:
        def __len__(self):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)
            return 1
        __repr__ = __str__ = lambda self: (len(self), "users")[1]

    class Own:
        def __len__(self):
            raise KeyboardInterrupt
        __repr__ = __str__ = lambda self: (len(self), "own")[1]

    describe(Own())  # model code's own: caught
    with pytest.raises(KeyboardInterrupt):
        describe(Users())
