"""How deep a value nests, found without recursion: for a typed answer, whose JSON form
(``answer_value`` in ``--json``, a batch's results, an export) must exist, a value nested
deeper than :data:`MAX_DEPTH` levels or holding itself is refused with that reason
before anything walks it recursively (pydantic's validator and serializer, ``jsonschema``,
``json.dumps``, ``repr``), where it would raise ``RecursionError``.

Model code builds such values in two lines (``x = []`` then ``for _ in range(100_000):
x = [x]``); the walk here keeps its own stack, visits each container once (a value that
shares a part is not walked twice: its height is kept) and stops after
:data:`MAX_NODES` containers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_NODES", "nesting_problem"]

MAX_DEPTH = 100
"""Levels of containers a typed answer may nest: as many as a value crossing the
isolated REPL's wall may (``rlm_kernel.executors.wire.MAX_DEPTH``), so a typed answer
is taken or refused alike by both executors.  JSON data from real sources (APIs,
documents) nests a few levels; the recursion limit of the tools that walk it is about
1,000 frames, several a level."""

MAX_NODES = 1_000_000
"""Containers the walk visits at most; past that it says nothing (a value that wide is
bounded by the validation's time limit instead)."""

_CONTAINERS = (list, tuple, set, frozenset, dict)


def _parts(value: Any) -> list[Any] | None:
    """What ``value`` holds that a JSON encoder walks into: a built-in container's items
    (a dict's keys and values), the fields of a dataclass or pydantic model instance
    (its ``__dict__``); None for anything else (a leaf)."""
    kind = type(value)
    if kind is dict:
        return [*value.keys(), *value.values()]
    if kind in _CONTAINERS:
        return list(value)
    if isinstance(value, type):
        return None
    if dataclasses.is_dataclass(value) or hasattr(kind, "__pydantic_fields__"):
        fields = getattr(value, "__dict__", None)
        if type(fields) is dict:
            return list(fields.values())
    return None


def _holds_parts(value: Any) -> bool:
    kind = type(value)
    return kind in _CONTAINERS or (
        not isinstance(value, type)
        and (dataclasses.is_dataclass(value) or hasattr(kind, "__pydantic_fields__")))


def nesting_problem(value: Any, limit: int = MAX_DEPTH,
                    nodes: int = MAX_NODES) -> str | None:
    """Why ``value`` has no JSON form for its nesting: ``"the answer is nested deeper
    than {limit} levels"`` or ``"the answer contains itself (a container that holds
    itself, at any depth)"``; None when it has one.

    Args:
        value: any object (its containers: ``list``, ``tuple``, ``set``, ``frozenset``,
            ``dict`` of those exact types, dataclass and pydantic model instances).
        limit: the most levels of containers allowed.
        nodes: containers visited at most (then None: no finding).

    Raises:
        Exception: only what the value's own code raises (a model whose ``__dict__``
            is a property of model code's); callers run this under a time limit, catch it.
    """
    if not _holds_parts(value):
        return None
    heights: dict[int, int] = {}  # id -> levels below and including it (finished nodes)
    on_path: set[int] = set()
    # frames: [node, its parts' iterator, the highest finished part's height]
    stack: list[list[Any]] = []
    visited = 0

    def enter(node: Any) -> str | None:
        nonlocal visited
        visited += 1
        if len(stack) + 1 > limit:
            return f"the answer is nested deeper than {limit} levels"
        parts: Iterator[Any] = iter(_parts(node) or ())
        stack.append([node, parts, 0])
        on_path.add(id(node))
        return None

    problem = enter(value)
    while stack and problem is None:
        if visited > nodes:
            return None
        frame = stack[-1]
        for part in frame[1]:
            if not _holds_parts(part):
                continue
            known = heights.get(id(part))
            if known is not None:
                if len(stack) + known > limit:
                    return f"the answer is nested deeper than {limit} levels"
                frame[2] = max(frame[2], known)
                continue
            if id(part) in on_path:
                return "the answer contains itself (a container that holds itself, at any depth)"
            problem = enter(part)
            break
        else:
            stack.pop()
            on_path.discard(id(frame[0]))
            height = frame[2] + 1
            heights[id(frame[0])] = height
            if stack:
                stack[-1][2] = max(stack[-1][2], height)
    return problem
