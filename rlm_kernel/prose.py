"""Tell a cell of prose (an RLM task) from code, IPython syntax, or code with a typo."""

from __future__ import annotations

import ast
import builtins
import keyword
import re
from collections.abc import Callable

__all__ = ["is_prose"]

_HELP = re.compile(r"^\??[\w.]+\?{1,2}$")
_WORDS = re.compile(r"^[^\W\d_][\w'’-]*[,;:]?\s+[^\W\d_]", re.UNICODE)
_ASSIGN = re.compile(r"^\s*[\w.\[\]'\"]+\s*(?:[-+*/%&|^@]|//|\*\*|>>|<<)?=(?!=)")
_BUILTINS = set(dir(builtins))


def is_prose(text: str, transform: Callable[[str], str] | None = None) -> bool:
    """True when ``text`` reads as a natural-language task rather than code.

    A cell is prose when (1) it is not IPython syntax (``%``, ``!``, ``?`` help),
    (2) it does not parse as Python (the raw text: IPython's own transformation
    would read a question's final ``word?`` as a help request; pass
    ``transform`` only for text known not to end that way), and (3) it looks like words, not code with a typo:
    its first line starts with two words, the first of which is not a Python
    keyword or builtin (``print hello`` is a typo, ``Print the title`` is a
    task), and no line is an assignment or a ``def``/``class``/``import``.
    """
    s = text.strip()
    if not s or s[0] in "%!?" or _HELP.match(s):
        return False
    try:
        ast.parse(transform(s) if transform else s)
        return False
    except SyntaxError:
        pass
    except Exception:  # noqa: BLE001 - a transformer failing means "not clean Python"
        pass
    first = s.splitlines()[0].strip()
    if not _WORDS.match(first):
        return False
    word = re.split(r"[\s,;:]", first, maxsplit=1)[0]
    if keyword.iskeyword(word) or word in _BUILTINS:
        return False
    for line in s.splitlines():
        stripped = line.strip()
        if _ASSIGN.match(line) or stripped.startswith(("def ", "class ", "import ", "from ")):
            return False
    return True
