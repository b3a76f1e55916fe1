"""Questions about real documents on this machine, with answers found by code.

Used by the demo, the end-to-end tests and the accuracy benchmark.  The
documents are ones nobody on this project wrote: the running interpreter's own
standard library source, and the licence texts under
``/usr/share/common-licenses``.  Expected answers are computed here with
``ast`` or plain text search, never written down by hand.
"""

from __future__ import annotations

import ast
import random
import re
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlm_kernel.context.files import load_folder

__all__ = ["Question", "stdlib_dir", "licenses_dir", "defines_function_question",
           "unique_line_question", "class_line_question", "count_functions_question",
           "question_set"]

LICENSES = Path("/usr/share/common-licenses")


@dataclass
class Question:
    """A question, the context it is about, and how to check an answer.

    Attributes:
        kind: short label of the question type.
        text: the question put to the model.
        context: the value bound to ``context`` (str or dict of texts).
        context_path: where the context came from (for ``rlm run --context``).
        expected: the correct answer, as text.
        check: ``callable(answer: str | None) -> bool``.
    """

    kind: str
    text: str
    context: Any
    context_path: str
    expected: str
    check: Callable[[str | None], bool]


def stdlib_dir() -> Path:
    """The standard library folder of the running interpreter."""
    return Path(sysconfig.get_paths()["stdlib"])


def licenses_dir() -> Path:
    """Debian's common licence texts (present on every Debian system)."""
    return LICENSES


def _top_level_functions(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def defines_function_question(package: str, rng: random.Random) -> Question:
    """"Which file defines the function X?" over one stdlib package folder.

    X is a public top-level function, found with ``ast``, that is defined at top
    level in exactly one file and whose ``def X(`` appears in no other file.
    """
    folder = stdlib_dir() / package
    files = {k: v for k, v in load_folder(folder).items() if k.endswith(".py")}
    owners: dict[str, list[str]] = {}
    for path, text in files.items():
        for name in _top_level_functions(text):
            owners.setdefault(name, []).append(path)
    candidates = sorted(
        name for name, paths in owners.items()
        if len(paths) == 1 and not name.startswith("_") and len(name) > 4
        and sum(f"def {name}(" in t for t in files.values()) == 1
    )
    name = rng.choice(candidates)
    path = owners[name][0]
    base = Path(path).name
    return Question(
        kind="defines-function",
        text=f"Which file defines the function `{name}`? Answer with the file's path.",
        context=files, context_path=str(folder), expected=path,
        check=lambda ans: ans is not None and base in ans.replace("\\", "/").split("/")[-1],
    )


def unique_line_question(rng: random.Random, folder: Path = LICENSES) -> Question:
    """"Which file contains the line L?" over the licence texts; L occurs once."""
    files = load_folder(folder)
    counts: dict[str, list[str]] = {}
    for path, text in files.items():
        for line in {ln.strip() for ln in text.splitlines()}:
            if 40 <= len(line) <= 90 and re.search(r"[A-Za-z]{4}", line):
                counts.setdefault(line, []).append(path)
    lines = sorted(line for line, paths in counts.items() if len(paths) == 1)
    line = rng.choice(lines)
    path = counts[line][0]
    return Question(
        kind="unique-line",
        text=f"Which file contains this exact line: \"{line}\"? Answer with the file name.",
        context=files, context_path=str(folder), expected=path,
        check=lambda ans: ans is not None and path in ans,
    )


def class_line_question(module: str, rng: random.Random) -> Question:
    """"On which line is class C defined?" over one stdlib file given as a str."""
    path = stdlib_dir() / module
    text = path.read_text(encoding="utf-8")
    classes = [(n.name, n.lineno) for n in ast.parse(text).body if isinstance(n, ast.ClassDef)
               and text.count(f"class {n.name}") == 1]
    name, lineno = rng.choice(sorted(classes))
    return Question(
        kind="class-line",
        text=(f"On which line number (counting from 1) is the class `{name}` defined? "
              "Answer with the number."),
        context=text, context_path=str(path), expected=str(lineno),
        check=lambda ans: ans is not None and re.search(rf"\b{lineno}\b", ans) is not None,
    )


def count_functions_question(package: str, rng: random.Random) -> Question:
    """"How many top-level functions does file F define?" (counted with ``ast``)."""
    folder = stdlib_dir() / package
    files = {k: v for k, v in load_folder(folder).items() if k.endswith(".py")}
    counts = {p: len(_top_level_functions(t)) for p, t in files.items()}
    path = rng.choice(sorted(p for p, n in counts.items() if 2 <= n <= 40))
    n = counts[path]
    return Question(
        kind="count-functions",
        text=(f"How many top-level functions (lines that start with `def `) does the file "
              f"`{path}` define? Answer with the number."),
        context=files, context_path=str(folder), expected=str(n),
        check=lambda ans: ans is not None and re.fullmatch(rf"\D*{n}\D*", ans) is not None,
    )


def question_set(seed: int = 0) -> list[Question]:
    """The project's question set: 10 questions over stdlib and licence texts."""
    rng = random.Random(seed)
    questions = [defines_function_question(p, rng)
                 for p in ("email", "json", "logging", "http")]
    if LICENSES.is_dir():
        questions += [unique_line_question(rng) for _ in range(2)]
    questions += [class_line_question(m, rng) for m in ("argparse.py", "fractions.py")]
    questions += [count_functions_question(p, rng) for p in ("email", "json")]
    return questions
