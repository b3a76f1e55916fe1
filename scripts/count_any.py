"""Count the ``Any`` annotations and ``# type: ignore`` comments in rlm_kernel.

Prints one row per top-level package or module of ``rlm_kernel`` (``engine``,
``jupyter``, ``text.py`` ...) and a total, so that the count can be compared
before and after a change::

    .venv/bin/python scripts/count_any.py            # the table
    .venv/bin/python scripts/count_any.py --files    # and the files with any Any
    git archive dbef53d rlm_kernel | tar -x -C /tmp/old  # an older commit's count:
    .venv/bin/python scripts/count_any.py --root /tmp/old/rlm_kernel

What is counted:

- ``Any``: every annotation that uses ``Any``, read with :mod:`ast` (not grep):
  a parameter's annotation (``*args`` and ``**kwargs`` included), a return
  annotation and an annotated variable or attribute (``x: Any = ...``).  One
  annotation counts once however many times ``Any`` occurs in it
  (``dict[str, Any]`` and ``Callable[..., Any]`` are one each); ``Any`` written as
  ``typing.Any``/``t.Any`` and string (forward-reference) annotations count too.
  ``Any`` outside annotations (``cast(Any, x)``, a ``TypeAlias`` value) is not
  counted.
- ``type: ignore``: every comment that starts ``# type: ignore``, read with
  :mod:`tokenize` so that the words inside a string do not count.
"""

from __future__ import annotations

import argparse
import ast
import io
import tokenize
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "rlm_kernel"


def _uses_any(node: ast.expr | None) -> bool:
    """True when the annotation expression ``node`` names ``Any`` anywhere in it."""
    if node is None:
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "Any":
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "Any":
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                inner = ast.parse(sub.value, mode="eval").body
            except SyntaxError:
                continue
            if _uses_any(inner):
                return True
    return False


def count_any(source: str) -> int:
    """The number of annotations in ``source`` (Python text) that use ``Any``."""
    total = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
            params += [a for a in (args.vararg, args.kwarg) if a is not None]
            total += sum(_uses_any(a.annotation) for a in params)
            if not isinstance(node, ast.Lambda):
                total += _uses_any(node.returns)
        elif isinstance(node, ast.AnnAssign):
            total += _uses_any(node.annotation)
    return total


def count_type_ignores(source: str) -> int:
    """The number of ``# type: ignore`` comments in ``source`` (Python text)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return sum(
        tok.type == tokenize.COMMENT and tok.string.lstrip("#").strip().startswith("type: ignore")
        for tok in tokens
    )


def _group(path: Path, root: Path) -> str:
    """The top-level package (or module) under ``root`` that ``path`` belongs to."""
    return path.relative_to(root).parts[0]


def main() -> None:
    """Print the table (and with ``--files`` the files with any ``Any``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", action="store_true", help="also list the count per file")
    parser.add_argument("--root", type=Path, default=ROOT, help="the package folder to count")
    options = parser.parse_args()
    root: Path = options.root.resolve()
    anys: Counter[str] = Counter()
    ignores: Counter[str] = Counter()
    per_file: Counter[str] = Counter()
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        n = count_any(source)
        anys[_group(path, root)] += n
        ignores[_group(path, root)] += count_type_ignores(source)
        if n:
            per_file[str(path.relative_to(root.parent))] = n
    groups = sorted(set(anys) | set(ignores))
    width = max(len(g) for g in [*groups, "package"])
    print(f"{'package':<{width}}  {'Any':>5}  {'type: ignore':>12}")
    for group in groups:
        print(f"{group:<{width}}  {anys[group]:>5}  {ignores[group]:>12}")
    print(f"{'total':<{width}}  {sum(anys.values()):>5}  {sum(ignores.values()):>12}")
    if options.files:
        print()
        for name, n in per_file.most_common():
            print(f"{n:>5}  {name}")


if __name__ == "__main__":
    main()
