"""Tell a cell of prose (an RLM task) from code, IPython syntax, or code with a typo."""

from __future__ import annotations

import ast
import builtins
import keyword
import re
from collections.abc import Callable, Collection

__all__ = ["is_prose"]

_HELP = re.compile(r"^\??[\w.]+\?{1,2}$")
_WORDS = re.compile(r"^[^\W\d_][\w'’-]*[,;:]?\s+[^\W\d_]", re.UNICODE)
_ASSIGN = re.compile(r"^\s*[\w.\[\]'\"]+\s*(?:[-+*/%&|^@]|//|\*\*|>>|<<)?=(?!=)")
_BUILTINS = set(dir(builtins))


_KEYWORDS = frozenset(keyword.kwlist)
_CODE_KEYWORDS = frozenset({"import", "def", "elif", "lambda", "return", "yield", "nonlocal",
                            "except", "True", "False", "None"})  # rare in English prose


def _near_keyword(word: str) -> bool:
    """True when lower-case ``word`` is one edit (a letter changed, added, dropped, or two
    neighbours swapped: Damerau's distance 1) from a Python keyword of 3+ letters or
    ``print``: ``improt``, ``retrun``, ``form``, ``whlie``, ``pritn``."""
    if not word.islower() or word in _KEYWORDS or word == "print":
        return False
    for kw in _KEYWORDS | {"print"}:
        if len(kw) < 3 or abs(len(kw) - len(word)) > 1:
            continue
        if len(kw) == len(word):
            diff = [i for i in range(len(kw)) if kw[i] != word[i]]
            if len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and kw[diff[0]] == word[diff[1]]
                                  and kw[diff[1]] == word[diff[0]]):
                return True
        else:
            short, long_ = (kw, word) if len(kw) < len(word) else (word, kw)
            if any(long_[:i] + long_[i + 1:] == short for i in range(len(long_))):
                return True
    return False


def is_prose(text: str, transform: Callable[[str], str] | None = None,
             magics: Collection[str] = ()) -> bool:
    """True when ``text`` reads as a natural-language task rather than code.

    A cell is prose when (1) it is not IPython syntax (``%``, ``!``, ``?`` help),
    (2) it does not parse as Python (the raw text: IPython's own transformation
    would read a question's final ``word?`` as a help request; pass
    ``transform`` only for text known not to end that way), and (3) it looks like words, not code with a typo:
    its first line starts with two words, the first of which is not a Python
    keyword or builtin (``print hello`` is a typo, ``Print the title`` is a
    task), and no line is an assignment or a ``def``/``class``/``import``.
    Two more things stay IPython's: a first word that names a line magic in
    ``magics`` (pass the shell's magics when ``%automagic`` is on:
    ``timeit sum(x)``, ``pip show pip``), and a short line (up to three words, or
    holding a keyword rare in English, such as ``import``) led by a near-miss of a Python keyword
    (``improt os``, ``retrun value``, ``form os import path``): IPython shows
    their errors, which is what the user needs.
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
    if keyword.iskeyword(word) or word in _BUILTINS or word in magics:
        return False
    words = first.split()
    if _near_keyword(word) and (len(words) <= 3 or _CODE_KEYWORDS.intersection(words[1:])):
        return False
    for line in s.splitlines():
        stripped = line.strip()
        if _ASSIGN.match(line) or stripped.startswith(("def ", "class ", "import ", "from ")):
            return False
    return True
