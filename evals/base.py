"""What the task generators share: the draft they return, the phrasing registry, helpers.

A *phrasing* is one question template of one kind, used in one split only.  It is a
function ``make(split, rng, index) -> Draft`` registered with :func:`phrasing`; it draws
a target with ``rng`` from the split's sources, computes the answer with code, and
raises :class:`Skip` when the draw cannot give an unambiguous task (the builder then
draws again) or :class:`Unavailable` when a source is missing on this machine.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, TypeVar

from . import checks

__all__ = ["Draft", "Phrasing", "PHRASINGS", "phrasing", "Skip", "Unavailable", "pick",
           "unique_best", "number", "file_answer", "name_answer", "yes_no", "text_answer",
           "need", "base_name", "quote_line"]

T = TypeVar("T")


class Skip(Exception):
    """This draw cannot give a valid, unambiguous task: draw again."""


class Unavailable(Skip):
    """A source this phrasing needs is missing on this machine."""


@dataclass(frozen=True)
class Draft:
    """A generated question before it gets its id: everything but split, kind, phrasing."""

    source: str
    question: str
    context: Any
    expected: str
    answer_form: str
    check: Callable[[str | None], bool]


@dataclass(frozen=True)
class Phrasing:
    """A registered question template."""

    id: str       # "<kind>/p<n>"
    split: str
    make: Callable[[str, random.Random, int], Draft]

    @property
    def kind(self) -> str:
        return self.id.split("/")[0]


PHRASINGS: list[Phrasing] = []


def phrasing(pid: str, split: str) -> Callable[[Callable[..., Draft]], Callable[..., Draft]]:
    """Register ``make(split, rng, index) -> Draft`` as phrasing ``pid`` of ``split``."""
    def register(make: Callable[..., Draft]) -> Callable[..., Draft]:
        PHRASINGS.append(Phrasing(pid, split, make))
        return make
    return register


def need(value: T) -> T:
    """``value`` if the source gave anything, else raise :class:`Unavailable`."""
    if not value:
        raise Unavailable("source missing on this machine")
    return value


def pick(rng: random.Random, items: Iterable[T]) -> T:
    """A random item of ``items`` (in their given order); :class:`Skip` if there is none."""
    seq: Sequence[T] = list(items)
    if not seq:
        raise Skip("no candidate")
    return rng.choice(seq)


def unique_best(scores: dict[str, int], largest: bool = True) -> str:
    """The key with the largest (or smallest) score; :class:`Skip` on a tie."""
    if len(scores) < 2:
        raise Skip("nothing to compare")
    ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=largest)
    if ranked[0][1] == ranked[1][1]:
        raise Skip("tie")
    return ranked[0][0]


def base_name(path: str) -> str:
    return PurePosixPath(path).name


def quote_line(line: str) -> str:
    """A line set apart in a question (indented, on its own line)."""
    return "\n\n    " + line + "\n\n"


# ---------------------------------------------------------------- drafts by answer type

def number(source: str, question: str, context: Any, value: int,
           form: str = "number") -> Draft:
    """A draft whose answer is a positive integer that the question does not mention."""
    if value <= 0 or value in checks.integers(question):
        raise Skip("zero, or the number is written in the question")
    return Draft(source, question, context, str(value), form,
                 checks.number_check(value, question))


def file_answer(source: str, question: str, context: Any, expected: str,
                names: Iterable[str], form: str = "file name") -> Draft:
    """A draft answered by a file or document name (``form`` "file name" or "path")."""
    names = list(names)
    base = base_name(expected)
    if sum(base_name(n) == base for n in names) != 1:
        raise Skip("base name not unique in the context")
    shown = expected if form == "path" else base
    return Draft(source, question, context, shown, form, checks.file_check(expected, names))


def name_answer(source: str, question: str, context: Any, expected: str,
                others: Iterable[str] = (), alternatives: Iterable[str] = ()) -> Draft:
    """A draft answered by a name; ``others`` must not appear in a right answer."""
    others = [o for o in others if o.lower() != expected.lower()]
    if any(checks.check_name(expected, o) for o in others):
        raise Skip("the expected name contains another candidate")
    return Draft(source, question, context, expected, "name",
                 checks.name_check(expected, others, alternatives))


def yes_no(source: str, question: str, context: Any, value: bool) -> Draft:
    """A draft answered by yes or no."""
    return Draft(source, question, context, "yes" if value else "no", "yes/no",
                 checks.yes_no_check(value))


def text_answer(source: str, question: str, context: Any, expected: str) -> Draft:
    """A draft answered by a short text (a version, a date, a value)."""
    if len(expected.strip()) < 2:
        raise Skip("too short to check")
    return Draft(source, question, context, expected, "text", checks.text_check(expected))
