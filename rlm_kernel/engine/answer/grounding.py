"""Does a ``FINAL`` answer come from the data?  The grounding check: :func:`finding` (what
the model is told) and :func:`is_grounded` (what labels an accepted answer
``ungrounded``), pure functions.

A model can end a run with a value no code of the run produced: ``FINAL("foo.py")`` or
``FINAL(42)`` typed from what it expects rather than from what its code printed.
:func:`finding` tells such an answer apart, before it is accepted, from one that was
computed:

- ``FINAL``'s argument is an expression that reads a name (``FINAL(hits[0]["doc"])``,
  ``FINAL(len(found))``, ``FINAL(f"{n} files")``) or the answer is ``FINAL_VAR("x")``:
  grounded, the value came from executed code.
- The argument reads no name (a constant, a container of constants, ``-1``,
  ``"a" + "b"``), or the ``FINAL`` is written in prose (a reply with no code): the value
  is a literal the model typed.  It is grounded only if the data holds it:

  - ``True``/``False``/``None``, empty values and yes/no/true/false texts are judgements
    no output prints verbatim: always grounded;
  - a number: a numeric token of a step's output that rounds to it at the answer's
    own precision (``1234`` matches ``1234``, ``1,234``, ``1234.0`` and ``1233.7``;
    ``3.14`` matches ``3.14159`` but not ``3.1``: those digits were never printed; the
    sign is not compared), or a numeric variable, a number inside a list, tuple, set
    or dict variable, or the length of a variable;
  - a text: normalised (case-folded, white space collapsed, quotes and a trailing
    period stripped), it occurs in a step's output or in a ``str`` variable (or a
    ``str`` member of a list, tuple, set or dict variable); a text that reads as a
    number (``"1,234"``, ``"45%"``, ``"$3.50"``) is also matched as that number;
  - a list, tuple or set: every member is grounded; a dict: every value is.

"Outputs" are whatever executed code produced that the caller passes: the run's step
outputs and its sub-calls' responses.  Variables are the REPL namespace's data: names
that start with ``_``, the reserved functions (``llm_query``, ``FINAL`` ...) and
IPython's helpers (``In`` holds the model's code, ``FINAL("foo.py")`` included) are not
data.

Cost: one ``ast.parse`` of the step's code and, for a typed text, one pass over at most
:data:`SCAN_CHARS` characters of the namespace's texts (a 4 MB ``context`` is read once);
text beyond that cap is not searched, so an answer found only there counts as not found
(the model is asked once to find it with code; its next ``FINAL`` is accepted anyway).

After fabric-rlm's grounding check (``fabric_rlm/grounding.py`` in
github.com/pawarbi/fabric-rlm-core: ``ungrounded_figures`` flags figures of an answer
that no cell printed, ``submitted_without_evidence`` a run that answered having printed
nothing).  fabric-rlm reads a finished trajectory as an audit; here the check runs before
the answer is accepted, on literal answers only, and sends the model back once
(:meth:`rlm_kernel.engine.run.Run._judge`).
"""

from __future__ import annotations

import ast
import logging
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from ...executors import guarded_repr
from ..names import RESERVED_NAMES, SESSION_NAMES
from ..prompts import ungrounded_answer

__all__ = ["MEMBERS", "SCAN_CHARS", "finding", "is_grounded", "is_literal_final"]

log = logging.getLogger(__name__)

SCAN_CHARS = 5_000_000
"""Characters of the namespace's texts searched for a typed text answer, in all."""
MEMBERS = 10_000
"""Members of the namespace's containers (and of the answer) looked at, in all."""

_NOT_DATA = frozenset(RESERVED_NAMES) | SESSION_NAMES
_JUDGEMENTS = frozenset({"yes", "no", "true", "false"})
_QUOTES = "\"'`"
# A number as printed: thousands groups or plain digits, a fraction, an exponent.
# Not the tail of a longer number (``12345`` gives no ``2345``, ``1.2.3`` no ``.3``).
_NUMBER = re.compile(r"(?<![\d.])-?(?:\d{1,3}(?:,\d{3})+(?![\d,])|\d+)(?:\.\d+)?"
                     r"(?:[eE][+-]?\d+)?")
_NUMERIC_TEXT = re.compile(r"[-+]?[$€£]?\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
                           r"(?:[eE][+-]?\d+)?\s*%?")
_PLAIN_SCALARS = (str, int, float, bool, type(None))
_PLAIN_CONTAINERS = (list, tuple, set, frozenset, dict)


def finding(code: str, value: Any, outputs: Sequence[str],
            namespace: Mapping[str, Any]) -> str | None:
    """Whether a step's ``FINAL`` answer is grounded in the run's data.

    Args:
        code (str): the code of the step that called ``FINAL``/``FINAL_VAR``; ``""``
            for a ``FINAL`` written in prose (a reply without code).
        value (Any): the answer's value (what ``FINAL`` got).
        outputs (Sequence[str]): texts executed code produced: the steps' outputs
            (this step's included) and the sub-calls' responses.
        namespace (Mapping[str, Any]): the REPL namespace after the step.

    Returns:
        None when the answer is grounded (or cannot be judged); else one sentence for
        the model (str): which (part of the) answer no output and no variable holds,
        e.g. ``The answer 'foo.py' does not appear in any output of your code or in
        any variable.``

    Raises:
        Nothing (but ``KeyboardInterrupt``): a value or code it cannot read counts as
        grounded.
    """
    missing = _missing(code, value, outputs, namespace)
    if missing is _NOTHING:
        return None
    log.debug("a typed FINAL value is not grounded: %s not in %d outputs or %d variables",
              guarded_repr(missing, max_chars=80), len(outputs), len(namespace))
    shown = guarded_repr(value, max_chars=200)
    if missing is value or (type(value) in _PLAIN_CONTAINERS and len(value) == 1):
        return ungrounded_answer(shown)
    return ungrounded_answer(shown, guarded_repr(missing, max_chars=120))


def is_grounded(code: str, value: Any, outputs: Sequence[str],
                namespace: Mapping[str, Any]) -> bool:
    """:func:`finding` as a yes/no, quietly: True when the answer is grounded (or
    cannot be judged).  What labels an accepted answer ``ungrounded``
    (``RLMResult.answer_source``); the arguments are :func:`finding`'s."""
    return _missing(code, value, outputs, namespace) is _NOTHING


def _missing(code: str, value: Any, outputs: Sequence[str],
             namespace: Mapping[str, Any]) -> Any:
    """The part of a ``FINAL`` value no evidence holds, or :data:`_NOTHING` (grounded,
    computed, or not judged)."""
    try:
        if not is_literal_final(code, value):
            return _NOTHING
        if code == "" and any(v is value for v in namespace.values()):
            return _NOTHING  # FINAL(name) in prose: the variable's own value
        return _Evidence(outputs, namespace).missing(value)
    except Exception:  # noqa: BLE001 - a check must never end a run
        return _NOTHING


def is_literal_final(code: str, value: Any) -> bool:
    """True when ``value`` is what a ``FINAL`` of ``code`` got from an argument that
    reads no name (typed by the model), or ``code`` is ``""`` (a prose ``FINAL``).

    A value that is not made of plain built-in types (str, numbers, bool, None, list,
    tuple, set, dict) never comes from a literal.  When ``code`` does not parse, names
    ``FINAL`` only indirectly, or has ``FINAL`` calls with names in their argument and
    none whose literal equals ``value``, the answer is taken as computed (False).

    Args:
        code (str): the step's code (``""``: a prose ``FINAL``).
        value (Any): what ``FINAL`` got.
    """
    if not _plain(value, [MEMBERS]):
        return False
    if code == "":
        return True
    args = _final_args(code)
    typed = [arg for arg in args if not any(isinstance(n, ast.Name) for n in ast.walk(arg))]
    unknown = False
    for arg in typed:
        try:
            literal = ast.literal_eval(arg)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            unknown = True  # "a" + "b", "x".upper(): typed, but not evaluated here
            continue
        if type(literal) is type(value) and literal == value:
            return True
    return unknown and len(typed) == len(args)


def _final_args(code: str) -> list[ast.expr]:
    """The argument expressions of the ``FINAL(...)`` calls written in ``code`` (IPython
    lines, ``%magic`` and ``!shell``, are left out when the code does not parse)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        kept = [line for line in code.splitlines()
                if not line.lstrip().startswith(("%", "!"))]
        try:
            tree = ast.parse("\n".join(kept))
        except (SyntaxError, ValueError):
            return []
    args: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "FINAL":
            args.extend(node.args[:1])
            args.extend(k.value for k in node.keywords if k.arg in ("answer", None))
    return args


def _plain(value: Any, budget: list[int]) -> bool:
    """True when ``value`` is built of exact built-in scalar and container types only
    (no code of the model's runs in comparing it); at most ``budget[0]`` members."""
    budget[0] -= 1
    if budget[0] < 0:
        return False
    if type(value) in _PLAIN_SCALARS:
        return True
    if type(value) is dict:
        return all(_plain(k, budget) and _plain(v, budget) for k, v in value.items())
    if type(value) in _PLAIN_CONTAINERS:
        return all(_plain(v, budget) for v in value)
    return False


_NOTHING = object()  # nothing of the answer is missing


class _Evidence:
    """The outputs and the namespace's data, read lazily: each variable read once per
    pass (texts, numbers) and let go, never all held at once (a namespace behind the
    isolated wall copies each value it reads to the host)."""

    def __init__(self, outputs: Sequence[str], namespace: Mapping[str, Any]) -> None:
        self.outputs = [text for text in outputs if isinstance(text, str)]
        self.namespace = namespace
        self.names = [k for k in list(namespace)
                      if isinstance(k, str) and not k.startswith("_") and k not in _NOT_DATA]
        self._output_text: str | None = None
        self._data_text: str | None = None
        self._printed: list[str] | None = None
        self._numbers: list[float] | None = None

    def missing(self, value: Any) -> Any:
        """The first scalar of ``value`` (itself, a member, a dict's value) that no
        evidence holds, or :data:`_NOTHING`."""
        if type(value) in _PLAIN_CONTAINERS:
            for member in list(value.values() if type(value) is dict else value)[:MEMBERS]:
                part = self.missing(member)
                if part is not _NOTHING:
                    return part
            return _NOTHING
        if type(value) is str:
            return _NOTHING if self._has_text(value) else value
        if type(value) in (int, float):
            return _NOTHING if self._has_number(value) else value
        return _NOTHING  # True, False, None

    # -- texts ----------------------------------------------------------------------
    def _has_text(self, text: str) -> bool:
        needle = _normalise(text).strip(_QUOTES + " ").removesuffix(".").strip(_QUOTES + " ")
        if not needle or needle in _JUDGEMENTS:
            return True
        if needle in self._outputs_normalised() or needle in self._data_normalised():
            return True
        number = _text_number(needle)
        return number is not None and self._has_number(number)

    def _outputs_normalised(self) -> str:
        if self._output_text is None:
            self._output_text = "\n".join(_normalise(t) for t in self.outputs)
        return self._output_text

    def _data_normalised(self) -> str:
        if self._data_text is None:
            room, parts = SCAN_CHARS, []
            for text in _texts(self._data()):
                parts.append(_normalise(text[:room]))
                room -= min(len(text), room)
                if room <= 0:
                    break
            self._data_text = "\n".join(parts)
        return self._data_text

    def _data(self) -> Iterator[Any]:
        """The data variables' values, one at a time (a name gone since is skipped)."""
        for name in self.names:
            try:
                yield self.namespace[name]
            except KeyError:
                continue

    # -- numbers --------------------------------------------------------------------
    def _has_number(self, number: int | float) -> bool:
        if isinstance(number, float) and not math.isfinite(number):
            return any(repr(number) in t.casefold() for t in self.outputs)
        places = _places(number)
        target = abs(number)
        for token in self._printed_numbers():
            try:
                printed = Decimal(token.replace(",", "").lstrip("-"))
            except InvalidOperation:
                continue
            if _places(printed) >= places and _close(float(printed), target, places):
                return True
        return any(_close(abs(n), target, places) for n in self._data_numbers())

    def _printed_numbers(self) -> list[str]:
        if self._printed is None:
            self._printed = [m.group(0) for t in self.outputs for m in _NUMBER.finditer(t)]
        return self._printed

    def _data_numbers(self) -> list[float]:
        """The namespace's numbers: numeric variables, numbers inside containers, and
        the length of every str and container variable."""
        if self._numbers is None:
            found: list[float] = []
            room = MEMBERS
            for value in self._data():
                if type(value) in (int, float):
                    found.append(value)
                elif type(value) in (str, *_PLAIN_CONTAINERS):
                    found.append(len(value))
                for item in _flat(value, 1):
                    room -= 1
                    if room < 0:
                        break
                    if type(item) in (int, float):
                        found.append(item)
                    elif type(item) in (str, *_PLAIN_CONTAINERS):
                        found.append(len(item))
            self._numbers = found
        return self._numbers


def _normalise(text: str) -> str:
    """Case-folded, runs of white space as one space."""
    return " ".join(text.casefold().split())


def _text_number(text: str) -> float | None:
    """The number a text such as ``1,234``, ``45%`` or ``$3.50`` reads as, or None."""
    if not _NUMERIC_TEXT.fullmatch(text):
        return None
    try:
        return float(re.sub(r"[\s,$€£%+]", "", text))
    except ValueError:
        return None


def _places(number: Any) -> int:
    """Decimal places a number is written to (``3.14`` -> 2, ``42``/``42.0`` -> 0)."""
    if type(number) is int:
        return 0
    try:
        exponent = (number if isinstance(number, Decimal) else Decimal(repr(number))) \
            .normalize().as_tuple().exponent
    except (InvalidOperation, ValueError):
        return 0
    return max(0, -exponent) if isinstance(exponent, int) else 0


def _close(printed: float, target: float, places: int) -> bool:
    """True when ``target``, written to ``places`` decimals, is ``printed`` rounded."""
    return abs(printed - target) <= 0.5 * 10.0 ** -places * (1 + 1e-9) + 1e-12


def _flat(value: Any, depth: int) -> Iterator[Any]:
    """``value``'s members (dict values), nested containers to ``depth`` more levels."""
    if type(value) is dict:
        members = value.values()
    elif type(value) in (list, tuple, set, frozenset):
        members = value
    else:
        return
    for item in list(members)[:MEMBERS]:
        yield item
        if depth > 0:
            yield from _flat(item, depth - 1)


def _texts(data: Iterable[Any]) -> Iterator[str]:
    """The ``str`` values of the namespace and the ``str`` members of its containers
    (dict keys and values, one level of nesting)."""
    for value in data:
        if type(value) is str:
            yield value
        elif type(value) is dict:
            for key in list(value)[:MEMBERS]:
                if type(key) is str:
                    yield key
        for item in _flat(value, 1):
            if type(item) is str:
                yield item
