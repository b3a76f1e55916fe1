"""Rollout tasks from real code nobody here wrote: the ``inflection`` library (0.5.1, its
sdist pinned by hash in ``requirements/tasks.lock`` and fetched by ``make setup`` into
``.venv/share/rlm-tasks``), with a real bug injected and the tests that catch it held
back as the reward (issue 38, "Real input").

:func:`build_tasks` unpacks the sdist into a task folder, injects a bug by a seeded
mutation of ``inflection/__init__.py``'s syntax tree (:mod:`ast`: an operator flipped, a
comparison's boundary moved, a constant changed; the operators of mutation testing, as
mutmut and MutPy apply them), keeps only mutants that the shipped tests catch, and
(operators and numbers tried before strings) splits ``test_inflection.py`` in two: the test functions that catch the mutant go to
the task's ``held_back`` folder (``test_held_back.py``, never in the folder the model
sees), the others stay.  A mutant is kept only when every case of the functions held
back fails on it (a parametrized function whose other cases pass would give an attempt
that changes nothing a reward above 0).  Each task is checked: its held-back tests fail
on the mutant and pass on the library as released.  The rows of ``tasks.jsonl`` carry ``id``,
``question`` (a bug report naming the symptom, never the mutation), ``workdir``,
``held_back``, ``reward`` (None: pytest on the held-back tests) and ``test_command``.

Run it to build tasks: ``python bench/rollout_tasks.py [N] [SEED] [OUT_DIR]``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["build_tasks", "find_sdist", "Mutant", "mutants", "SDIST_NAME", "SDIST_SHA256",
           "TASKS_DIR", "MODULE", "TEST_FILE", "HELD_BACK_FILE"]

SDIST_NAME = "inflection-0.5.1.tar.gz"
SDIST_SHA256 = "1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417"
"""The sdist's sha256, as in requirements/tasks.lock."""
TASKS_DIR = Path(sys.prefix) / "share" / "rlm-tasks"
"""Where ``make setup`` puts the sdist (inside the venv)."""
MODULE = "inflection/__init__.py"
TEST_FILE = "test_inflection.py"
HELD_BACK_FILE = "test_held_back.py"
PYTEST = [sys.executable, "-m", "pytest", "-q", "--disable-plugin-autoload",
          "-p", "no:cacheprovider"]
_RUN_SECONDS = 60.0

_COMPARE_FLIPS: dict[type, type] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot,
    ast.IsNot: ast.Is}
_BINOP_FLIPS: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv, ast.Div: ast.Mult}
_BOOL_FLIPS: dict[type, type] = {ast.And: ast.Or, ast.Or: ast.And}


def find_sdist() -> Path:
    """The task library's sdist, checked against :data:`SDIST_SHA256`.

    Raises:
        FileNotFoundError: ``make setup`` has not fetched it (the message says so).
        ValueError: the file's hash is not the locked one.
    """
    path = TASKS_DIR / SDIST_NAME
    if not path.is_file():
        raise FileNotFoundError(
            f"the rollout tasks' library {SDIST_NAME} is not in {TASKS_DIR}: run `make setup` "
            "(it downloads the sdist pinned in requirements/tasks.lock)")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise ValueError(f"{path} has sha256 {digest}, not the locked {SDIST_SHA256}: "
                         "remove it and run `make setup` again")
    return path


def _unpack(sdist: Path, dest: Path) -> None:
    """The sdist's top folder's contents into ``dest`` (no byte code, no build files)."""
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(sdist) as archive:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4+ (PEP 706)
            archive.extractall(tmp, filter="data")
        else:  # the same refusals by hand: plain files and folders inside ``tmp`` only
            for member in archive.getmembers():
                if not (member.isfile() or member.isdir()) or member.name.startswith("/") \
                        or ".." in Path(member.name).parts:
                    raise ValueError(f"{sdist.name}: refusing the member {member.name!r}")
            archive.extractall(tmp)  # noqa: S202 (every member checked above)
        (top,) = Path(tmp).iterdir()
        shutil.copytree(top, dest, ignore=shutil.ignore_patterns(
            "__pycache__", "*.pyc", "*.egg-info", "docs"))


@dataclass(frozen=True)
class Mutant:
    """One mutation of the module's source.

    Attributes:
        line: 1-based line of the mutated expression.
        kind: what changed (``"compare"``, ``"binop"``, ``"boolop"``, ``"constant"``: a
            number or a truth value, ``"string"``: a string's last character dropped).
        before / after: the expression's source before and after.
        source: the whole mutated module.
    """

    line: int
    kind: str
    before: str
    after: str
    source: str


def _in_fstring(tree: ast.AST) -> set[int]:
    return {id(n) for j in ast.walk(tree) if isinstance(j, ast.JoinedStr)
            for n in ast.walk(j)}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _mutations(node: ast.AST) -> Iterator[tuple[str, ast.expr]]:
    """The mutated copies of one expression node."""
    import copy

    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _COMPARE_FLIPS:
                new = copy.deepcopy(node)
                new.ops[i] = _COMPARE_FLIPS[type(op)]()
                yield "compare", new
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_FLIPS:
        new_bin = copy.deepcopy(node)
        new_bin.op = _BINOP_FLIPS[type(node.op)]()
        yield "binop", new_bin
    elif isinstance(node, ast.BoolOp):
        new_bool = copy.deepcopy(node)
        new_bool.op = _BOOL_FLIPS[type(node.op)]()
        yield "boolop", new_bool
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            yield "constant", ast.Constant(not value)
        elif isinstance(value, int):
            yield "constant", ast.Constant(value + 1)
        elif isinstance(value, str) and len(value) > 1:
            yield "string", ast.Constant(value[:-1])


def mutants(source: str) -> list[Mutant]:
    """Every single mutation of ``source`` (a module) that still compiles, each made by
    replacing one expression's source text with the mutated expression
    (:func:`ast.unparse`), the rest of the file untouched.  Docstrings and f-strings are
    left alone."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    skip = _in_fstring(tree) | _docstrings(tree)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode()))
    raw = source.encode()
    found: list[Mutant] = []
    for node in ast.walk(tree):
        if id(node) in skip or not isinstance(node, ast.expr) or node.end_lineno is None \
                or node.end_col_offset is None:
            continue
        start = offsets[node.lineno - 1] + node.col_offset
        end = offsets[node.end_lineno - 1] + node.end_col_offset
        before = raw[start:end].decode()
        for kind, new in _mutations(node):
            after = ast.unparse(new)
            if kind not in ("constant", "string"):
                after = f"({after})"
            text = (raw[:start] + after.encode() + raw[end:]).decode()
            try:
                compile(text, MODULE, "exec")
            except SyntaxError:
                continue
            found.append(Mutant(node.lineno, kind, before, after, text))
    return found


def _pytest(folder: Path, files: list[str]) -> dict[str, tuple[str, str]]:
    """``{test id: (outcome, message)}`` of pytest on ``files`` in ``folder``, from its
    JUnit XML report (outcome ``passed``, ``failed``, ``error`` or ``skipped``); empty
    when it wrote no report (it hung past a minute, or crashed)."""
    with tempfile.TemporaryDirectory(prefix="rlm-tasks-") as tmp:
        report = Path(tmp) / "junit.xml"
        try:
            subprocess.run([*PYTEST, f"--junitxml={report}", *files], cwd=folder,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=_RUN_SECONDS, check=False)
        except subprocess.TimeoutExpired:
            return {}
        try:
            root = ElementTree.parse(report).getroot()
        except (OSError, ElementTree.ParseError):
            return {}
    results = {}
    for case in root.iter("testcase"):
        outcome, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            child = case.find(kind)
            if child is not None:
                outcome = "failed" if kind == "failure" else kind
                message = child.get("message", "")
                break
        results[case.get("name", "")] = (outcome, message)
    return results


def _test_functions(source: str) -> dict[str, tuple[int, int]]:
    """``{name: (first line, last line)}`` (1-based, decorators included) of the module's
    top-level test functions."""
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found[node.name] = (first, node.end_lineno or node.lineno)
    return found


def _without(source: str, spans: list[tuple[int, int]]) -> str:
    """``source`` with the given line spans (1-based, inclusive) removed."""
    drop = {i for first, last in spans for i in range(first, last + 1)}
    lines = source.splitlines(keepends=True)
    return "".join(line for i, line in enumerate(lines, 1) if i not in drop)


def _question(failures: dict[str, tuple[str, str]]) -> str:
    """A bug report: how many checks fail and one failing call's message (the symptom)."""
    name, (_, message) = sorted(failures.items())[0]
    symptom = message.splitlines()[0] if message else "it fails"
    example = name.replace("test_", "", 1)
    return (f"Bug report for the inflection library in this folder: {len(failures)} of our "
            f"checks now fail. For example, the check {example} fails with: {symptom}. "
            "Find the cause in the library's code and fix it; do not change the tests. "
            "Call finish() when the library is fixed.")


def build_tasks(n: int, seed: int, out_dir: str | Path) -> list[dict[str, object]]:
    """Build ``n`` rollout tasks from the task library and write ``out_dir/tasks.jsonl``.

    Args:
        n: how many tasks (each a different mutant).
        seed: the mutants' order is drawn from :class:`random.Random` with this seed: the
            same seed gives the same tasks.
        out_dir: where the tasks' folders (``<id>/workdir``, ``<id>/held_back``,
            ``<id>/reference``) and ``tasks.jsonl`` go.

    Returns:
        The rows written, as dicts: ``id``, ``question``, ``workdir``, ``held_back``,
        ``reward`` (None), ``test_command``.  What was mutated (for the person reading
        results, never shown to the model) is in ``<id>/mutation.json``; the library as
        released (the reference fix, the whole test file) in ``<id>/reference``.

    Raises:
        FileNotFoundError: the sdist is missing (run ``make setup``).
        RuntimeError: fewer than ``n`` mutants are caught by the tests, or a built task
            fails its check.
    """
    if n < 1:
        raise ValueError(f"n is a number of tasks, at least 1, got {n!r}")
    sdist = find_sdist()
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    original = out / "library"
    if original.exists():
        shutil.rmtree(original)
    _unpack(sdist, original)
    source = (original / MODULE).read_text()
    tests_source = (original / TEST_FILE).read_text()
    functions = _test_functions(tests_source)
    candidates = mutants(source)
    random.Random(seed).shuffle(candidates)
    # operators and numbers first (the bugs people make); a string cut only after them
    candidates.sort(key=lambda m: m.kind == "string")
    rows: list[dict[str, object]] = []
    scratch = out / "scratch"
    for mutant in candidates:
        if len(rows) == n:
            break
        if scratch.exists():
            shutil.rmtree(scratch)
        shutil.copytree(original, scratch)
        (scratch / MODULE).write_text(mutant.source)
        results = _pytest(scratch, [TEST_FILE])
        failures = {k: v for k, v in results.items() if v[0] in ("failed", "error")}
        caught = sorted({k.split("[")[0] for k in failures})
        if not results or not failures or not set(caught) <= set(functions) \
                or len(caught) > len(functions) // 2:
            continue  # not caught, or caught by most tests (a broken import)
        if any(outcome not in ("failed", "error") for name, (outcome, _) in results.items()
               if name.split("[")[0] in caught):
            continue  # a held-back function with cases that pass: doing nothing would score > 0
        task_id = f"inflection-{seed}-{len(rows) + 1}"
        rows.append(_write_task(out / task_id, task_id, original, mutant, tests_source,
                                functions, caught, failures))
    shutil.rmtree(scratch, ignore_errors=True)
    if len(rows) < n:
        raise RuntimeError(f"only {len(rows)} of {len(candidates)} mutants of {MODULE} are "
                           f"caught by its tests; asked for {n}")
    with open(out / "tasks.jsonl", "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return rows


def _write_task(base: Path, task_id: str, original: Path, mutant: Mutant,
                tests_source: str, functions: dict[str, tuple[int, int]],
                caught: list[str], failures: dict[str, tuple[str, str]]) -> dict[str, object]:
    """One task's folders, checked; its row."""
    if base.exists():
        shutil.rmtree(base)
    workdir, held_back, reference = base / "workdir", base / "held_back", base / "reference"
    shutil.copytree(original, workdir)
    shutil.copytree(original, reference)
    (workdir / MODULE).write_text(mutant.source)
    kept = [span for name, span in functions.items() if name not in caught]
    held = [span for name, span in functions.items() if name in caught]
    (workdir / TEST_FILE).write_text(_without(tests_source, held))
    held_back.mkdir()
    (held_back / HELD_BACK_FILE).write_text(_without(tests_source, kept))
    _check(base, workdir, held_back, reference)
    (base / "mutation.json").write_text(json.dumps(
        {"line": mutant.line, "kind": mutant.kind, "before": mutant.before,
         "after": mutant.after, "held_back_tests": caught}))
    return {"id": task_id, "question": _question(failures), "workdir": str(workdir),
            "held_back": str(held_back), "reward": None,
            "test_command": " ".join([*PYTEST[:5], TEST_FILE])}


def _check(base: Path, workdir: Path, held_back: Path, reference: Path) -> None:
    """The held-back tests fail on the mutant and pass on the reference library; the
    visible ones pass on both.

    Raises:
        RuntimeError: they do not.
    """
    check = base / "check"
    for library, must_fail in ((workdir, True), (reference, False)):
        if check.exists():
            shutil.rmtree(check)
        shutil.copytree(library, check)
        shutil.copy2(held_back / HELD_BACK_FILE, check / HELD_BACK_FILE)
        shutil.copy2(workdir / TEST_FILE, check / TEST_FILE)
        held = _pytest(check, [HELD_BACK_FILE])
        visible = _pytest(check, [TEST_FILE])
        held_failed = any(o in ("failed", "error") for o, _ in held.values())
        held_passed = bool(held) and all(o == "passed" for o, _ in held.values())
        visible_pass = bool(visible) and all(o == "passed" for o, _ in visible.values())
        if (must_fail and not held_failed) or (not must_fail and not held_passed) \
                or not visible_pass:
            raise RuntimeError(f"task {base.name}: the held-back tests do not "
                               f"{'fail on the mutant' if must_fail else 'pass unmutated'}, "
                               "or a visible test fails")
    shutil.rmtree(check)


def main(argv: list[str]) -> None:
    """``python bench/rollout_tasks.py [N] [SEED] [OUT_DIR]``: build and list the tasks."""
    import argparse

    parser = argparse.ArgumentParser(description="Build rollout tasks from the task library "
                                     "(a seeded bug, its catching tests held back).")
    parser.add_argument("n", nargs="?", type=int, default=2, help="tasks (default 2)")
    parser.add_argument("seed", nargs="?", type=int, default=0, help="seed (default 0)")
    parser.add_argument("out", nargs="?", help="output folder (default: a new temporary one)")
    args = parser.parse_args(argv)
    n, seed = args.n, args.seed
    out = args.out or tempfile.mkdtemp(prefix="rlm-rollout-tasks-")
    rows = build_tasks(n, seed, out)
    print(f"{'id':<20} {'line':>4}  {'mutation':<40} held-back tests")
    for row in rows:
        mutation = json.loads((Path(out) / str(row["id"]) / "mutation.json").read_text())
        change = f"{mutation['before']} -> {mutation['after']}"
        print(f"{row['id']:<20} {mutation['line']:>4}  {change[:40]:<40} "
              f"{', '.join(mutation['held_back_tests'])}")
    print(f"tasks file: {Path(out) / 'tasks.jsonl'}")


if __name__ == "__main__":
    main(sys.argv[1:])
