"""Argument types shared by the ``rlm`` command and the ``%rlm`` magic: a bad value
gets one readable line from argparse, never a traceback."""

from __future__ import annotations

import argparse

__all__ = ["positive_int", "positive_float", "non_empty"]


def positive_int(text: str) -> int:
    """An integer >= 1 (step limits, budgets).

    Raises:
        argparse.ArgumentTypeError: not an integer, or below 1.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """A number > 0 (seconds, US dollars).

    Raises:
        argparse.ArgumentTypeError: not a number, or not above 0.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def non_empty(text: str) -> str:
    """A string with something besides white space (a question).

    Raises:
        argparse.ArgumentTypeError: empty or blank.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("the question is empty")
    return text
