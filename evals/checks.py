"""Answer checkers: ``check_*`` functions judge one answer; ``*_check`` build a task's check.

Every check takes the model's answer (``str`` or ``None``) and returns a bool; ``None``
is always wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

__all__ = [
    "integers", "check_number", "check_file", "check_name", "check_yes_no", "check_text",
    "number_check", "file_check", "name_check", "yes_no_check", "text_check",
]

Check = Callable[[str | None], bool]

# An integer not glued to a word or a decimal: "1,234" -> 1234, "429.0" -> 429, "1.2.3" -> none.
_INT = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(?:\.0+)?(?![\w]|\.\d|,\d)")
# Characters that can belong to a name: identifiers, package names, versions, licence ids.
_BEFORE = r"(?<![\w+~:.-])"
_AFTER = r"(?![\w+~:-]|\.\w)"


def integers(text: str) -> set[int]:
    """Integers written in ``text`` (thousands separators allowed, ``.0`` ignored)."""
    return {int(m.group(1).replace(",", "")) for m in _INT.finditer(text)}


def _strip(text: str) -> str:
    return text.strip().strip("`'\"*.,;:!?()[]{} \n\t")


def check_number(answer: str | None, expected: int, question: str = "") -> bool:
    """The answer is the number, or its integers not in the question are exactly {expected}."""
    if answer is None:
        return False
    if _strip(answer).replace(",", "") == str(expected):
        return True
    return integers(answer) - integers(question) == {expected}


def _tokens(text: str) -> set[str]:
    text = text.replace("\\", "/")
    return {t.rstrip(".").lower() for t in re.findall(r"[\w.+~-]+", text)}


def check_file(answer: str | None, expected: str, names: Iterable[str] = ()) -> bool:
    """The expected file's base name is a token or path component of the answer, and no
    other file name of the context is."""
    if answer is None:
        return False
    tokens = _tokens(answer)
    base = expected.replace("\\", "/").rsplit("/", 1)[-1].lower()
    if base not in tokens:
        return False
    others = {n.replace("\\", "/").rsplit("/", 1)[-1].lower() for n in names} - {base}
    return not others & tokens


def _has_name(answer: str, name: str) -> bool:
    pattern = _BEFORE + re.escape(name) + _AFTER
    return re.search(pattern, answer, re.IGNORECASE) is not None


def check_name(answer: str | None, expected: str, others: Iterable[str] = (),
               alternatives: Iterable[str] = ()) -> bool:
    """The expected name (or an accepted alternative) occurs as a whole token,
    case-insensitively, and none of ``others`` does."""
    if answer is None:
        return False
    if not any(_has_name(answer, n) for n in (expected, *alternatives)):
        return False
    return not any(_has_name(answer, o) for o in others if o.lower() != expected.lower())


def check_yes_no(answer: str | None, expected: bool) -> bool:
    """The answer's first word is yes/true (or no/false) and matches ``expected``."""
    if answer is None:
        return False
    words = re.findall(r"[a-z]+", answer.strip().lower())
    if not words or words[0] not in ("yes", "true", "no", "false"):
        return False
    return (words[0] in ("yes", "true")) == expected


def check_text(answer: str | None, expected: str) -> bool:
    """The expected text occurs (whitespace normalised, as a whole token) in a short answer."""
    if answer is None:
        return False
    norm = " ".join(answer.split())
    want = " ".join(expected.split())
    if len(norm) > 3 * len(want) + 40:
        return False
    pattern = _BEFORE + re.escape(want) + _AFTER
    return re.search(pattern, norm) is not None


def number_check(expected: int, question: str) -> Check:
    """A check for a number answer to ``question``."""
    return lambda answer: check_number(answer, expected, question)


def file_check(expected: str, names: Iterable[str]) -> Check:
    """A check for a file (or document) name answer; ``names`` are the context's files."""
    names = tuple(names)
    return lambda answer: check_file(answer, expected, names)


def name_check(expected: str, others: Iterable[str] = (),
               alternatives: Iterable[str] = ()) -> Check:
    """A check for a name answer; ``others`` must not appear (e.g. the other candidate)."""
    others, alternatives = tuple(others), tuple(alternatives)
    return lambda answer: check_name(answer, expected, others, alternatives)


def yes_no_check(expected: bool) -> Check:
    """A check for a yes/no answer."""
    return lambda answer: check_yes_no(answer, expected)


def text_check(expected: str) -> Check:
    """A check for a short text answer (a version, a date, a value)."""
    return lambda answer: check_text(answer, expected)
