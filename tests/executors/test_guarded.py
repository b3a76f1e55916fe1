"""The one guarded rendering of model code's values (``rlm_kernel.executors.guarded``),
used by the host (answers, prompts) and the isolated executor's worker alike: bounded in
size and time, whatever the value's own code raises caught, the user's interrupt kept."""

from __future__ import annotations

import os
import signal
import time

import pytest

from rlm_kernel.executors import (
    IsolatedExecutor,
    PlainExecutor,
    guarded_render,
    guarded_repr,
    type_name,
)
from rlm_kernel.text import REPR_CHARS, short_repr


class Slow:
    def __repr__(self):
        time.sleep(30)
        return "never"


class Exits:
    def __repr__(self):
        raise SystemExit(3)


class Interrupts:
    def __repr__(self):
        raise KeyboardInterrupt  # model code's own: not the user's interrupt


def test_a_repr_is_bounded_to_the_one_cap():
    assert guarded_repr([1, "a"]) == "[1, 'a']"
    long = guarded_repr("y" * 10**6)
    assert long == short_repr("y" * 10**6) and len(long) <= REPR_CHARS
    assert guarded_repr(list(range(1000)), max_chars=40) == repr(list(range(1000)))[:37] + "..."


def test_a_repr_that_never_returns_is_cut_off_in_time():
    started = time.monotonic()
    assert guarded_repr(Slow(), seconds=0.3) == "<Slow object>"
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("value", [Exits(), Interrupts()],
                         ids=["raises SystemExit", "raises KeyboardInterrupt"])
def test_a_repr_that_fails_gives_the_type_placeholder(value):
    assert guarded_repr(value) == f"<{type(value).__name__} object>"


def test_a_renderer_that_fails_gives_none():
    assert guarded_render(str, 5, 1.0) == "5"
    assert guarded_render(lambda v: 1 / 0, 5, 1.0) is None


def test_a_type_whose_name_raises_is_an_object():
    class Meta(type):
        def __getattribute__(cls, name):
            if name == "__name__":
                raise RuntimeError("no name")
            return super().__getattribute__(name)

    assert type_name(Meta("Odd", (), {})()) == "object"


def test_the_users_interrupt_during_a_repr_is_raised_again():
    class Users:
        def __repr__(self):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)
            return "users"

    with pytest.raises(KeyboardInterrupt):
        guarded_repr(Users())


def test_both_executors_show_a_failing_value_the_same_way():
    """The in-process executor's host and the isolated executor's worker render a value
    with the same guarded repr: a value of model code whose repr exits previews alike."""
    code = "class Exits:\n    def __repr__(self):\n        raise SystemExit(3)\nv = Exits()"
    plain = PlainExecutor()
    plain.execute(code)
    with IsolatedExecutor() as isolated:
        isolated.execute(code)
        remote = isolated.namespace["v"]
        assert str(remote) == guarded_repr(plain.namespace["v"]) == "<Exits object>"
