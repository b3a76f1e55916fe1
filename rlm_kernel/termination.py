"""How a Recursive Language Model run ends: ``FINAL`` / ``FINAL_VAR`` and their detection.

Model code ends a run by calling ``FINAL(answer)`` or ``FINAL_VAR("name")``; both raise
:class:`FinalOutput`, which the host catches at its outermost execution boundary. The
helpers here find those calls in prose or code before execution, pull fenced code out of a
model reply, look a ``FINAL_VAR`` name up in a namespace, and render an answer as text.

Behaviour follows the RLM termination spec (``rlm_code.rlm.termination``), with one
deliberate change: :class:`FinalOutput` derives from :class:`BaseException`, so a bare
``except Exception:`` written by the model cannot swallow the end of a run.
"""

from __future__ import annotations

import io
import json
import re
import textwrap
import tokenize
from dataclasses import dataclass
from typing import Any, NoReturn

__all__ = [
    "FINAL",
    "FINAL_PATTERNS",
    "FINAL_VAR",
    "FINAL_VAR_PATTERNS",
    "POLICY_FINAL_PATTERNS",
    "FinalDetection",
    "FinalOutput",
    "detect_final_in_code",
    "detect_final_in_text",
    "extract_code_blocks",
    "format_final_answer",
    "resolve_final_var",
]

# The regex text the two spec tables (termination's and the termination policy's) share.
_QUOTED_FINAL = r"FINAL\s*\(\s*['\"](.+?)['\"]\s*\)"
_BARE_FINAL = r"FINAL\s*\(\s*(.+?)\s*\)"
_QUOTED_FINAL_VAR = r"FINAL_VAR\s*\(\s*['\"](\w+)['\"]\s*\)"

#: ``FINAL(...)`` detectors, in the order of the RLM termination spec's pattern table:
#: [0] bare argument closed at end of line (nested parentheses allowed), [1] a quoted
#: argument, [2] a triple-quoted argument.
FINAL_PATTERNS: list[re.Pattern[str]] = [
    re.compile(_BARE_FINAL + r"(?:\s*$|\n)", re.DOTALL | re.MULTILINE),
    re.compile(_QUOTED_FINAL, re.DOTALL),
    re.compile(r'FINAL\s*\(\s*"""(.+?)"""\s*\)', re.DOTALL),
]

#: ``FINAL_VAR(...)`` detectors from the same spec table: [0] optional quotes, [1] quoted.
FINAL_VAR_PATTERNS: list[re.Pattern[str]] = [
    re.compile(r"FINAL_VAR\s*\(\s*['\"]?(\w+)['\"]?\s*\)"),
    re.compile(_QUOTED_FINAL_VAR),
]

#: The ``final_pattern`` termination policy's default ``final_patterns`` (regex text, as
#: the termination-policy spec lists them): a quoted ``FINAL``, a bare ``FINAL`` (up to
#: the first ``)``), a quoted ``FINAL_VAR``.  The same spellings as the tables above.
POLICY_FINAL_PATTERNS: tuple[str, ...] = (_QUOTED_FINAL, _BARE_FINAL, _QUOTED_FINAL_VAR)

# Most specific first, so quotes are not captured as part of the answer.
_TEXT_FINAL_ORDER = (FINAL_PATTERNS[2], FINAL_PATTERNS[1], FINAL_PATTERNS[0])
_CODE_FINAL_VAR = re.compile(r"\b" + FINAL_VAR_PATTERNS[0].pattern)  # not FINAL_VARx(
_CODE_FINAL = re.compile(r"\bFINAL\s*\(")
# A fenced block: the rest of the opening line after the tag is ignored; the body ends at
# a closing fence, at the next tagged opening fence, or at the end of the text.
_FENCED_BLOCK = re.compile(
    r"```[ \t]*([\w+.-]*)[^\n`]*\n"  # opening fence and its tag
    r"(.*?)"  # the body
    r"(?:```[ \t]*(?=\n|\Z)"  # a closing fence ends its line
    r"|(?<=\n)(?=[ \t]*```[ \t]*[\w+.-]+[ \t]*\n)"  # an unclosed block meets a new one
    r"|\Z)",  # cut off by a stop sequence
    re.DOTALL,
)
_PYTHON_TAGS = frozenset({"python", "py", "python3"})
_CODE_HINTS = ("import ", "def ", "class ", "print(", "=")


class FinalOutput(BaseException):
    """Raised by :func:`FINAL` / :func:`FINAL_VAR` to end a run.

    Derives from ``BaseException`` (not ``Exception``) on purpose: ``except Exception``
    in model code lets it through, while ``except FinalOutput`` still catches it.

    Attributes:
        output: ``{"answer": value, "type": "direct"}`` for ``FINAL`` or
            ``{"var": name, "type": "variable"}`` for ``FINAL_VAR``.
    """

    def __init__(self, output: dict[str, Any]) -> None:
        super().__init__(output)
        self.output: dict[str, Any] = output


@dataclass(slots=True)
class FinalDetection:
    """What a scan for ``FINAL`` / ``FINAL_VAR`` found.

    Attributes:
        detected: whether a termination call was found.
        final_type: ``"direct"`` (``FINAL``), ``"variable"`` (``FINAL_VAR``) or ``None``.
        content: the answer text or variable name; ``None`` when unknown before running.
        raw_match: the exact text that matched, or ``None``.
    """

    detected: bool
    final_type: str | None = None
    content: str | None = None
    raw_match: str | None = None


def FINAL(answer: Any) -> NoReturn:
    """End the run with ``answer`` (any value). Always raises :class:`FinalOutput`."""
    raise FinalOutput({"answer": answer, "type": "direct"})


def FINAL_VAR(variable_name: str) -> NoReturn:
    """End the run with the value of the namespace variable called ``variable_name``.

    Raises:
        FinalOutput: always, with ``{"var": variable_name, "type": "variable"}``.
        TypeError: if ``variable_name`` is not a ``str`` (a value was passed, not a name).
    """
    if not isinstance(variable_name, str):
        raise TypeError(
            "FINAL_VAR takes the variable's NAME as a string, e.g. FINAL_VAR(\"result\"), "
            f"but got a value of type {type(variable_name).__name__}; "
            "to return a value directly, call FINAL(value)"
        )
    raise FinalOutput({"var": variable_name, "type": "variable"})


def detect_final_in_text(text: str) -> FinalDetection:
    """Find a ``FINAL(...)`` or ``FINAL_VAR(...)`` written in a model's prose.

    ``FINAL_VAR`` is tried first (it is the more specific form); ``FINAL`` patterns are
    tried triple-quoted, then quoted, then bare, so surrounding quotes are not returned.

    Args:
        text: the model reply (str).

    Returns:
        A :class:`FinalDetection`; ``content`` is the answer text or variable name.
    """
    for pattern in FINAL_VAR_PATTERNS:
        m = pattern.search(text)
        if m:
            return FinalDetection(True, "variable", m.group(1), m.group(0))
    for pattern in _TEXT_FINAL_ORDER:
        m = pattern.search(text)
        if m:
            return FinalDetection(True, "direct", m.group(1), m.group(0).rstrip())
    return FinalDetection(False)


def _call_offsets(code: str) -> list[tuple[str, int]] | None:
    """Offsets of ``FINAL``/``FINAL_VAR`` names used as calls outside strings and comments.

    Returns ``None`` when ``code`` cannot be tokenized (then a plain regex scan is used).
    """
    line_starts = [0]  # split exactly as StringIO.readline does: at "\n" only
    for line in code.split("\n"):
        line_starts.append(line_starts[-1] + len(line) + 1)
    found: list[tuple[str, int]] = []
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    for prev, tok, nxt in zip([None, *toks], toks, [*toks[1:], None], strict=False):
        if tok.type != tokenize.NAME or tok.string not in ("FINAL", "FINAL_VAR"):
            continue
        if prev is not None and prev.string == ".":
            continue  # an attribute such as obj.FINAL(...)
        if nxt is not None and nxt.string == "(":
            found.append((tok.string, line_starts[tok.start[0] - 1] + tok.start[1]))
    return found


def detect_final_in_code(code: str) -> FinalDetection:
    """Find a ``FINAL(...)``/``FINAL_VAR(...)`` call in Python source before running it.

    Names such as ``FINALIZE`` or ``FINAL_VALUE`` and (when the code tokenizes) calls
    inside comments or string literals are ignored. For ``FINAL`` the answer is only
    known at run time, so ``content`` is ``None``; for ``FINAL_VAR`` it is the name.

    Args:
        code: Python source (str).
    """
    offsets = _call_offsets(code)
    if offsets is None:  # untokenizable source: fall back to word-boundary regexes
        m = _CODE_FINAL_VAR.search(code)
        if m:
            return FinalDetection(True, "variable", m.group(1), m.group(0))
        m = _CODE_FINAL.search(code)
        return FinalDetection(True, "direct", None, m.group(0)) if m else FinalDetection(False)
    for name, pos in offsets:
        if name == "FINAL_VAR":
            m = _CODE_FINAL_VAR.match(code, pos)
            if m:
                return FinalDetection(True, "variable", m.group(1), m.group(0))
    for name, pos in offsets:
        if name == "FINAL":
            m = FINAL_PATTERNS[0].match(code, pos) or _CODE_FINAL.match(code, pos)
            raw = m.group(0).rstrip() if m else "FINAL("
            return FinalDetection(True, "direct", None, raw)
    return FinalDetection(False)


def resolve_final_var(variable_name: str, namespace: dict[str, Any]) -> Any:
    """Return ``namespace[variable_name]`` for a ``FINAL_VAR`` call.

    Raises:
        KeyError: the name is not bound; the message lists the names that are
            (dunder names such as ``__builtins__`` are left out of that list).
    """
    try:
        return namespace[variable_name]
    except KeyError:
        available = [k for k in namespace if not (k.startswith("__") and k.endswith("__"))]
        raise KeyError(
            f"FINAL_VAR named {variable_name!r}, but no such variable exists in the REPL "
            f"namespace. Variables defined: {available}"
        ) from None


def _looks_like_python(code: str) -> bool:
    return any(hint in code for hint in _CODE_HINTS)


def extract_code_blocks(text: str, language: str = "repl") -> list[str]:
    """Return the code of the fenced blocks in a model reply, in order of appearance.

    Blocks tagged ``language`` (default ``"repl"``), ``python``, ``py`` or ``python3``
    (any case) are returned. Only when there are none, untagged blocks that look like
    Python (contain ``import ``, ``def ``, ``class ``, ``print(`` or ``=``, the spec's
    heuristic) are returned instead. A final block whose closing fence is missing (reply
    cut by a stop sequence) counts and runs to the end of the text. Bodies are dedented
    and stripped of surrounding blank lines; empty blocks are skipped.

    Args:
        text: the model reply (str).
        language: the primary fence tag to accept (str).
    """
    wanted = _PYTHON_TAGS | {language.lower()}
    tagged: list[str] = []
    untagged: list[str] = []
    for m in _FENCED_BLOCK.finditer(text):
        tag = m.group(1).lower()
        body = textwrap.dedent(m.group(2)).strip("\n").rstrip()
        if not body.strip():
            continue
        if tag in wanted:
            tagged.append(body)
        elif not tag and _looks_like_python(body):
            untagged.append(body)
    return tagged or untagged


def format_final_answer(answer: Any) -> str:
    """Render a final answer as text.

    ``str`` is returned unchanged; a ``dict`` with an ``"answer"`` key gives
    ``str(answer["answer"])``; any other ``dict`` is JSON with a 2-space indent (values
    that are not JSON types via ``str``); a ``list`` is its items' ``str`` joined by
    newlines; anything else is ``str(answer)``.
    """
    if isinstance(answer, str):
        return answer
    if isinstance(answer, dict):
        if "answer" in answer:
            return str(answer["answer"])
        return json.dumps(answer, indent=2, default=str, ensure_ascii=False)
    if isinstance(answer, list):
        return "\n".join(str(item) for item in answer)
    return str(answer)
