"""Tell a cell of prose (an RLM task) from code, IPython syntax, or code with a typo; and
give a cell that reads as prose but ran as Python (``hello``: a ``NameError``) a one-line
hint that tasks are written in prose or with ``%%rlm`` (:func:`prose_hint`,
:func:`register_prose_hint`)."""

from __future__ import annotations

import ast
import builtins
import keyword
import re
import sys
from collections.abc import Callable, Collection
from typing import Any

__all__ = ["is_prose", "prose_hint", "register_prose_hint"]

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


_PLAIN_WORD = re.compile(r"^[^\W\d_]+(?:['’-][^\W\d_]+)*[,;:.!?]*$")  # hello, don't, X-ray,


def prose_hint(text: str, error: BaseException | None, prose_tasks: bool) -> str | None:
    """The one-line hint for a cell that reads as prose and failed as Python, or None.

    A cell reads as prose when it is one line of plain words (letters, an apostrophe
    or hyphen inside, sentence punctuation after; no digits, underscores, dots inside,
    brackets, quotes or operators) with no near-miss of a Python keyword (``improt``,
    ``retrun``: code with a typo).  It gets a hint when it failed with a ``NameError``
    for its first word (``hello``) or with a ``SyntaxError`` (``hello there`` in a
    ``python3`` kernel), the latter from three words on when the first is a Python
    keyword or built-in (``print the title of the book``, not ``print x``).  Code
    (``x = hello``, ``foo()``, ``my_var``, ``hello.world``) never does.

    Args:
        text: the cell as the user wrote it.
        error: the error the cell ended with (before or during execution), if any.
        prose_tasks: whether this kernel runs prose cells as tasks (the RLM kernel),
            which changes what the hint suggests.
    """
    if not isinstance(error, (NameError, SyntaxError)):
        return None
    s = text.strip()
    words = s.split()
    if not words or "\n" in s or not all(_PLAIN_WORD.match(w) for w in words):
        return None
    if any(_near_keyword(w.strip(",;:.!?").lower()) for w in words):
        return None
    first = words[0].strip(",;:.!?")
    if isinstance(error, NameError):
        if getattr(error, "name", None) != first and f"'{first}'" not in str(error):
            return None
    elif len(words) < (3 if keyword.iskeyword(first) or first in _BUILTINS
                       else 1 if s.endswith(("!", ".")) else 2):
        return None
    if prose_tasks:
        return ("Hint: to ask the model, write the task as a sentence (a cell of prose is a "
                "task in this kernel) or start the cell with %%rlm.")
    return "Hint: to ask the model, start the cell with %%rlm (or %rlm and the question)."


def register_prose_hint(shell: Any, running: Callable[[], bool] = lambda: False) -> None:
    """Print :func:`prose_hint` after a user's cell that needs it (IPython's
    ``post_run_cell`` event; never for a step of a run, nor a silent cell).

    Args:
        shell: the IPython shell.
        running: tells whether an RLM run is going (its steps are cells too).
    """

    if any(getattr(cb, "rlm_prose_hint", False)
           for cb in shell.events.callbacks.get("post_run_cell", [])):
        return  # once per shell

    def after_cell(result: Any) -> None:
        if result is None or running():
            return
        info = getattr(result, "info", None)
        text = getattr(info, "raw_cell", None)
        if not isinstance(text, str) or getattr(info, "silent", False):
            return
        error = result.error_before_exec or result.error_in_exec
        kernel = getattr(shell, "kernel", None)
        hint = prose_hint(text, error, bool(getattr(kernel, "prose_tasks", False)))
        if hint:
            print(hint, file=sys.stdout)

    after_cell.rlm_prose_hint = True  # type: ignore[attr-defined]
    shell.events.register("post_run_cell", after_cell)
