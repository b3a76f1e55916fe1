"""The eval's tasks and the fixed dev/test split.

``load_split("dev")`` and ``load_split("test")`` build :data:`TASKS_PER_KIND` tasks of
every kind in :data:`KINDS`.  Task ``i`` of a kind uses the split's phrasing ``i % 3`` of
that kind (three phrasings per kind per split; dev and test never share one) and draws
its target with ``random.Random(f"{seed}/{split}/{kind}/{i}/{attempt}")``; a draw that
cannot give an unambiguous task, or that repeats a question, is drawn again.  If a
phrasing's source is missing on this machine, the slot falls back to the split's other
phrasings of the kind (and is left out only if none of them works).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from . import compute_tasks, find_tasks, reason_tasks  # noqa: F401  (they register phrasings)
from .base import PHRASINGS, Draft, Phrasing, Skip, Unavailable

__all__ = ["Task", "load_split", "KINDS", "SEED", "TASKS_PER_KIND", "phrasings"]

SEED = 20250611
KINDS: tuple[str, ...] = ("locate", "count", "extreme", "multi-hop", "arithmetic", "aggregate",
                          "needle", "structure", "records", "yes-no", "compare")
TASKS_PER_KIND = 7
ATTEMPTS = 80


@dataclass(frozen=True)
class Task:
    """One question about one ``context``, with its answer computed by code."""

    id: str            # "<split>-<kind>-<nn>", stable and unique
    split: str         # "dev" | "test"
    kind: str          # one of KINDS
    phrasing: str      # phrasing template id, e.g. "count/p4"
    source: str        # "stdlib:<unit>", "stdlib:all", "licenses", "dpkg-status", ...
    question: str      # the full question given to the model
    context: Any = field(repr=False, compare=False)  # bound to the REPL variable `context`
    context_form: str  # "str" | "dict" | "list"
    expected: str      # the correct answer as text
    answer_form: str   # "file name", "path", "number", "line number", "index", "name", ...
    check: Callable[[str | None], bool] = field(repr=False, compare=False)  # judges an answer

    @property
    def context_chars(self) -> int:
        """Characters in the context (summed over a dict's values or a list's items)."""
        return context_size(self.context)


def context_size(context: Any) -> int:
    """Characters in a context: str length, or the sum over values / items."""
    if isinstance(context, str):
        return len(context)
    if isinstance(context, dict):
        return sum(len(str(k)) + context_size(v) for k, v in context.items())
    if isinstance(context, list):
        return sum(context_size(v) for v in context)
    return len(str(context))


def _form(context: Any) -> str:
    for kind, name in ((str, "str"), (dict, "dict"), (list, "list")):
        if isinstance(context, kind):
            return name
    raise TypeError(f"unexpected context type {type(context).__name__}")


def phrasings(split: str, kind: str) -> list[Phrasing]:
    """The split's phrasings of ``kind``, in id order."""
    return sorted((p for p in PHRASINGS if p.split == split and p.kind == kind),
                  key=lambda p: p.id)


def _draw(split: str, kind: str, i: int, seed: int, seen: set[str]) -> tuple[Phrasing, Draft]:
    options = phrasings(split, kind)
    if not options:
        raise Unavailable(f"no phrasing for {kind} in {split}")
    n = len(options)
    for shift in range(n):
        phr = options[(i + shift) % n]
        try:
            for attempt in range(ATTEMPTS):
                rng = random.Random(f"{seed}/{split}/{kind}/{i}/{attempt}")
                try:
                    draft = phr.make(split, rng, i)
                except Unavailable:
                    raise
                except Skip:
                    continue
                if draft.question not in seen:
                    return phr, draft
        except Unavailable:
            continue
    raise Unavailable(f"no task for {split}/{kind}/{i}")


@cache
def _build(split: str, seed: int) -> tuple[Task, ...]:
    if split not in ("dev", "test"):
        raise ValueError(f"split must be 'dev' or 'test', not {split!r}")
    tasks = []
    for kind in KINDS:
        seen: set[str] = set()
        for i in range(TASKS_PER_KIND):
            try:
                phr, d = _draw(split, kind, i, seed, seen)
            except Unavailable:
                continue
            seen.add(d.question)
            tasks.append(Task(f"{split}-{kind}-{i:02d}", split, kind, phr.id, d.source,
                              d.question, d.context, _form(d.context), d.expected,
                              d.answer_form, d.check))
    return tuple(tasks)


def load_split(split: str, seed: int = SEED) -> list[Task]:
    """The tasks of ``split`` ("dev" or "test"); the same for a given machine and seed.

    Built once per process; every call returns fresh copies of the contexts, so a REPL
    that changes its ``context`` cannot change a later load.
    """
    return [replace(t, context=copy.deepcopy(t.context)) for t in _build(split, seed)]
