"""Data passed around the RLM loop: variable metadata, history entries, execution results.

Follows the RLM REPL-types spec (``rlm_code.rlm.repl_types``) with one deliberate change:
:meth:`REPLVariable.from_value` never serialises a whole value. Its cost depends on the
preview length, not on the size of the value, so a multi-gigabyte context is described
as fast as a short one. When an exact character count would need a full serialisation,
the length is given in elements (``length_unit="items"``) or rows instead.
"""

from __future__ import annotations

import array
import collections
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from itertools import chain
from typing import Any, ClassVar

from .text import middle_cut

__all__ = ["REPLEntry", "REPLHistory", "REPLResult", "REPLVariable"]

_SEQUENCES = (list, tuple, set, frozenset, collections.deque, array.array)
#: Containers whose JSON text fits in this many characters get an exact character count.
_EXACT_LIMIT = 1_000
_OUTPUT_LIMIT = 2_000  # characters of output kept by REPLEntry.format (spec value)
_LOCALS_LIMIT = 200  # characters per local value in REPLResult.to_dict (spec value)
_EMPTY = object()


def _plain_text(value: Any, limit: int) -> str:
    """``str(value)``, but bytes are cut before being formatted and failures are named."""
    try:
        if isinstance(value, (bytes, bytearray)):
            return repr(bytes(value[: limit + 1]))
        return str(value)
    except Exception:
        if isinstance(value, int):  # over the int->str digit limit (a ValueError)
            return f"<int of {value.bit_length():,} bits>"
        return f"<{type(value).__name__} object (str() failed)>"


def _json_chunks(value: Any, limit: int, indent: str | None = "  ", depth: int = 0,
                 path: set[int] | None = None) -> Iterator[str]:
    """Lazily yield ``json.dumps(value, indent=2, default=str, ensure_ascii=False)`` in
    pieces (one-line ``[1, 2]`` layout when ``indent`` is ``None``). Sets, deques and
    arrays become arrays; each leaf is cut to about ``limit`` characters, so a consumer
    that stops early pays only for what it read."""
    if isinstance(value, str):
        yield json.dumps(value[: limit + 1], ensure_ascii=False)
    elif value is None or isinstance(value, (bool, float)):
        yield json.dumps(value)
    elif isinstance(value, int):
        yield _plain_text(int(value), limit)
    elif isinstance(value, dict) or isinstance(value, _SEQUENCES):
        is_map, path = isinstance(value, dict), path if path is not None else set()
        items: Iterator[Any] = iter(value.items() if isinstance(value, dict) else value)
        first = next(items, _EMPTY)
        if first is _EMPTY or id(value) in path:
            yield ("{}" if is_map else "[]") if first is _EMPTY else '"<circular reference>"'
            return
        path.add(id(value))
        yield "{" if is_map else "["
        for i, item in enumerate(chain((first,), items)):
            if indent is not None:
                yield ("," if i else "") + "\n" + indent * (depth + 1)
            elif i:
                yield ", "
            if is_map:
                key = item[0] if isinstance(item[0], str) else _json_key(item[0], limit)
                yield json.dumps(key[: limit + 1], ensure_ascii=False) + ": "
                item = item[1]
            yield from _json_chunks(item, limit, indent, depth + 1, path)
        yield ("\n" + indent * depth if indent is not None else "") + ("}" if is_map else "]")
        path.discard(id(value))
    else:  # what ``default=str`` would do
        yield json.dumps(_plain_text(value, limit)[: limit + 1], ensure_ascii=False)


def _bounded_json(value: Any, limit: int, indent: str | None = "  ") -> tuple[str, bool]:
    """The first ``limit``+ characters of :func:`_json_chunks` and whether that is all."""
    parts, size = [], 0
    for chunk in _json_chunks(value, limit, indent):
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            return "".join(parts), False
    return "".join(parts), True


def _log_text(value: Any) -> str:
    """At most ``_LOCALS_LIMIT`` characters describing ``value``, at O(limit) cost."""
    if isinstance(value, dict) or isinstance(value, _SEQUENCES):
        text = _bounded_json(value, _LOCALS_LIMIT, indent=None)[0]
    else:
        text = value if isinstance(value, str) else _plain_text(value, _LOCALS_LIMIT)
    return text[:_LOCALS_LIMIT]


def _json_key(key: Any, limit: int) -> str:
    """A non-str dict key as JSON would write it (``str`` for types JSON rejects)."""
    if key is None or isinstance(key, (bool, float)):
        return json.dumps(key)
    return _plain_text(key, limit)


@dataclass(slots=True)
class REPLVariable:
    """What the model is told about one namespace variable instead of its content.

    Attributes:
        name, type_name: variable name and ``type(value).__name__``.
        description, constraints: optional free text shown to the model.
        total_length: the value's size, counted in ``length_unit``.
        preview: the start of the value's text (at most ``preview_length`` characters
            plus ``...`` when cut).
        length_unit: ``"characters"`` (exact), ``"items"`` (elements of a container),
            ``"rows"`` (first dimension of a 2-D or larger ``.shape``) or ``"bytes"``.
    """

    PREVIEW_LENGTH: ClassVar[int] = 500  # default preview size in characters (spec value)

    name: str
    type_name: str
    description: str = ""
    constraints: str = ""
    total_length: int = 0
    preview: str = ""
    length_unit: str = "characters"

    @classmethod
    def from_value(cls, name: str, value: Any, description: str = "", constraints: str = "",
                   preview_length: int = PREVIEW_LENGTH) -> REPLVariable:
        """Describe ``value`` in time and memory O(``preview_length``), not O(its size).

        ``str``: exact length, preview = its start. ``dict``/``list``/``tuple``/``set``/
        ``deque``/``array``: preview = the start of the 2-space-indented JSON text; the
        length is that text's exact character count when it is under ~1,000 characters,
        else the element count (unit ``"items"``). ``bytes``: byte count. Objects with a
        non-empty ``.shape`` (numpy, pandas): first dimension, shape shown in the
        preview. Anything else: ``str(value)`` (its cost is the object's own).

        Raises:
            ValueError: if ``preview_length`` is negative.
        """
        if preview_length < 0:
            raise ValueError(f"preview_length must be >= 0, got {preview_length}")
        unit = "characters"
        if isinstance(value, str):
            text, total = value[: preview_length + 1], len(value)
        elif isinstance(value, (bytes, bytearray)):
            text, total, unit = _plain_text(value, preview_length), len(value), "bytes"
        elif isinstance(value, dict) or isinstance(value, _SEQUENCES):
            text, complete = _bounded_json(value, max(preview_length, _EXACT_LIMIT))
            total, unit = (len(text), unit) if complete else (len(value), "items")
        elif isinstance(shape := getattr(value, "shape", None), tuple) and shape:
            unit = "rows" if len(shape) >= 2 else "items"
            text = f"shape: {tuple(shape)}\n" + _plain_text(value, preview_length)
            total = shape[0] if isinstance(shape[0], int) else 0  # unknown dimension: 0
        else:
            text = _plain_text(value, preview_length)
            total = len(text)
        if len(text) > preview_length:
            text = text[:preview_length] + "..."
        return cls(name, type(value).__name__, description, constraints, total, text, unit)

    def format(self) -> str:
        """The metadata block shown to the model; empty description/constraints omitted."""
        lines = [f"Variable: `{self.name}` (access it in your code)", f"Type: {self.type_name}"]
        if self.description:
            lines.append(f"Description: {self.description}")
        if self.constraints:
            lines.append(f"Constraints: {self.constraints}")
        fence = "````" if "```" in self.preview else "```"
        lines += [f"Total length: {self.total_length:,} {self.length_unit}", "Preview:",
                  fence, self.preview, fence]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """All fields as a plain dict, for logs and persistence."""
        return asdict(self)


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat()


@dataclass
class REPLEntry:
    """One think-code-observe step: reasoning, code, output (str), execution_time
    (seconds), llm_calls (records of sub-calls), an ISO 8601 UTC timestamp, and
    names_read: the watched names the code read while it ran (sorted; None: not
    recorded, :attr:`REPLResult.names_read`)."""

    reasoning: str = ""
    code: str = ""
    output: str = ""
    execution_time: float = 0.0
    llm_calls: list[dict[str, Any]] = field(default_factory=list)
    timestamp: str = field(default_factory=_utc_now)
    names_read: list[str] | None = None

    def format(self, index: int | None = None) -> str:
        """Text of this step for the history prompt, headed ``[Step index]`` (or
        ``[Step]``); empty sections are omitted; output over 2,000 characters is cut in
        the middle (:func:`rlm_kernel.text.middle_cut`: head, the one marker, tail)."""
        lines = [f"[Step {index}]" if index is not None else "[Step]"]
        if self.reasoning:
            lines.append(f"Reasoning: {self.reasoning}")
        if self.code:
            lines += ["Code:", "```python", self.code, "```"]
        if self.output:
            lines += ["Output:", "```", middle_cut(self.output, _OUTPUT_LIMIT), "```"]
        if self.llm_calls:
            lines.append(f"(Made {len(self.llm_calls)} sub-LLM call(s))")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """All fields as a plain dict (a deep copy)."""
        return asdict(self)


@dataclass(frozen=True)
class REPLHistory:
    """The steps of a run so far. Immutable by convention: :meth:`append` returns a new
    history and leaves this one unchanged."""

    entries: list[REPLEntry] = field(default_factory=list)

    def append(self, *, reasoning: str = "", code: str = "", output: str = "",
               execution_time: float = 0.0,
               llm_calls: list[dict[str, Any]] | None = None,
               names_read: Iterable[str] | None = None) -> REPLHistory:
        """Return a new history with one more :class:`REPLEntry` (keyword-only args)."""
        entry = REPLEntry(reasoning, code, output, execution_time, list(llm_calls or []),
                          names_read=None if names_read is None else sorted(names_read))
        return REPLHistory([*self.entries, entry])

    def format(self, max_entries: int = 10) -> str:
        """The last ``max_entries`` steps, numbered from 1 over the whole history, with a
        ``(Showing last N of M steps)`` header when some are hidden; ``(No prior steps)``
        when empty."""
        if not self.entries:
            return "(No prior steps)"
        total = len(self.entries)
        shown = max(0, min(max_entries, total))
        parts = [] if shown == total else [f"(Showing last {shown} of {total} steps)"]
        first = total - shown
        parts += [e.format(index=first + i + 1) for i, e in enumerate(self.entries[first:])]
        return "\n\n".join(parts)

    def to_list(self) -> list[dict[str, Any]]:
        """Every entry as a dict."""
        return [e.to_dict() for e in self.entries]

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[REPLEntry]:
        return iter(self.entries)

    def __bool__(self) -> bool:
        return bool(self.entries)


@dataclass
class REPLResult:
    """Outcome of running one code block: stdout, stderr, the namespace after the run
    (``locals``), execution_time (seconds), llm_calls, success, and ``final_output``
    (``FinalOutput.output`` when ``FINAL``/``FINAL_VAR`` was called, else ``None``),
    and ``names_read``: the watched names the step's code read while it ran
    (:mod:`rlm_kernel.executors.reads`; None: the executor keeps no such record)."""

    stdout: str = ""
    stderr: str = ""
    locals: Mapping[str, Any] = field(default_factory=dict)  # the namespace, not a copy
    execution_time: float = 0.0
    llm_calls: list[dict[str, Any]] = field(default_factory=list)
    success: bool = True
    final_output: dict[str, Any] | None = None
    names_read: frozenset[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Fields as a dict for logs; each local becomes text of at most 200 characters:
        ``str`` of a scalar, one-line JSON of a container (built lazily, never in full)."""
        local_text = {k: _log_text(v) for k, v in self.locals.items()}
        return {"stdout": self.stdout, "stderr": self.stderr, "locals": local_text,
                "execution_time": self.execution_time, "llm_calls": list(self.llm_calls),
                "success": self.success, "final_output": self.final_output}

