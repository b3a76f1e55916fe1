"""Command-line options made from :func:`~rlm_kernel.engine.config.settings`, shared by
the ``rlm`` command and the ``%rlm`` magic: the same flags, help, defaults and bounds,
and a bad value gets one readable line from argparse, never a traceback."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from .config import Setting, settings

__all__ = ["add_setting_options", "config_overrides", "non_empty", "positive_float",
           "positive_int", "value_type"]


def value_type(setting: Setting) -> Callable[[str], Any]:
    """The argparse ``type=`` of a setting: parses the text and checks its bound.

    Raises (from the returned function):
        argparse.ArgumentTypeError: not a number of the setting's kind, or out of bounds.
    """
    def parse(text: str) -> Any:
        try:
            value = int(text) if setting.kind == "int" else float(text)
        except ValueError:
            what = "a whole number" if setting.kind == "int" else "a number"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if isinstance(value, float) and math.isnan(value):
            raise argparse.ArgumentTypeError(f"must be {setting.bound()}, got {text}")
        if isinstance(value, float) and math.isinf(value) and setting.high is None:
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text} (leave "
                                             "the option out for no limit)")
        try:
            setting.check(value)
        except ValueError:
            bound = setting.bound().removesuffix(" (or None: no limit)")
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}") from None
        return value

    parse.__name__ = setting.kind  # argparse names the type in its messages
    return parse


def add_setting_options(parser: argparse.ArgumentParser, *, with_help: bool = True) -> None:
    """Add every setting that has a flag (``--max-iterations`` ...) to ``parser``.

    Values land under the setting's name (``max_cost_usd`` for ``--max-cost``);
    unset options are None, so :func:`config_overrides` leaves their defaults alone.
    A yes/no setting takes its flag and the flag's ``--no-`` form (``--verify-answer``,
    ``--no-ground-answer``), whatever its default; a list of names takes them in one
    argument, separated by commas or spaces (``--pass-env DB_HOST,DB_USER``).
    """
    for s in settings():
        if s.flag is None:
            continue
        if s.kind == "bool":
            text = f"{s.help.rstrip('.')} (default: {'on' if s.default else 'off'})."
        elif s.kind in ("str", "list"):
            text = s.help
        else:
            shown = "no limit" if s.default is None else f"{s.default:g}"
            text = f"{s.help.rstrip('.')} (default: {shown})."
        kwargs: dict[str, Any] = {"dest": s.name, "help": text if with_help else None}
        if s.kind == "bool":
            parser.add_argument(s.flag, action=argparse.BooleanOptionalAction, **kwargs)
        elif s.kind == "str" and s.choices:
            parser.add_argument(s.flag, choices=s.choices, **kwargs)
        elif s.kind == "str":
            parser.add_argument(s.flag, metavar="M", **kwargs)
        elif s.kind == "list":  # names separated by commas or spaces, one argument
            parser.add_argument(s.flag, metavar="NAMES", **kwargs)
        else:
            metavar = "N" if s.kind == "int" else "X"
            parser.add_argument(s.flag, type=value_type(s), metavar=metavar, **kwargs)


def config_overrides(namespace: argparse.Namespace) -> dict[str, Any]:
    """The settings given on a command line, as ``RLMConfig`` keyword arguments."""
    names = {s.name for s in settings() if s.flag}
    return {k: v for k, v in vars(namespace).items() if k in names and v is not None}


def _bounded(kind: str, low: float, above: bool) -> Callable[[str], Any]:
    return value_type(Setting("value", kind, False, None, "", low, above, None))


positive_int = _bounded("int", 1, False)
"""An integer >= 1 (argparse type; raises ``argparse.ArgumentTypeError``)."""
positive_float = _bounded("float", 0, True)
"""A number > 0 (argparse type; raises ``argparse.ArgumentTypeError``)."""


def non_empty(text: str) -> str:
    """A string with something besides white space (a question).

    Raises:
        argparse.ArgumentTypeError: empty or blank.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("the question is empty")
    return text

