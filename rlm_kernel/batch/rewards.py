"""A rollout attempt's reward: the host scores the folder the model left, after the loop,
on its own terms (issue 38, item 5).

:func:`score` does three things in order:

1. **puts back** every file of the folder that can steer pytest or the interpreter and
   that the model changed, added or removed, as the task's untouched copy (``pristine``)
   has it: test files (``test_*.py``, ``*_test.py``), ``conftest.py`` anywhere, pytest's
   and the packaging configuration (``pytest.ini``, ``.pytest.ini``, ``tox.ini``,
   ``setup.cfg``, ``pyproject.toml``), ``sitecustomize.py`` / ``usercustomize.py``,
   ``*.pth`` files; distributions' metadata (``*.dist-info`` / ``*.egg-info`` folders,
   whose ``pytest11`` entry points pytest loads as plugins) likewise; and it removes
   every cache (``__pycache__``, ``*.pyc``, ``.pytest_cache``: a forged cached test
   module).  A symbolic link the model put in the way is removed,
   never followed: nothing is written outside the folder.
2. **copies in** the held-back files (``RewardSpec.held_back``): tests model code never
   saw, since they were not in its folder during the loop.
3. **runs** the reward command (``RewardSpec.command``; None: pytest on the held-back
   test files, no plugin loaded through entry points: ``--disable-plugin-autoload``) with :func:`~rlm_kernel.executors.test_runs.run_tests`: its process
   group killed at ``RewardSpec.timeout``, behind the isolated executor's wall when
   bubblewrap works here (:func:`~rlm_kernel.executors.walled.walled_command`: the
   code under test is model-written), pytest's counts read from its JUnit XML report,
   written in a host folder outside the attempt's folder: a report or reward file the
   model left in the folder is never read.

The reward (:attr:`Reward.value`) is the share of the held-back tests that pass:
``passed / (passed + failed + errors + skipped)`` from the report; a command that is not
pytest gives 1.0 when it exits with status 0, else 0.0.  0.0 with :attr:`Reward.error`
set when nothing ran (no report, a time-out, a command that could not start).

What this holds against model code that patches pytest from inside its process (pytest
imports the model's code): with the default command a host test that always fails, under
a random name, is collected first (:func:`_write_sentinel`); a report in which it did not
fail while tests passed scores 0.0 as forged.  A forgery aimed at the held-back tests
alone is not caught; the wall keeps such code from reaching anything but the folder and
the report's own folder.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import secrets
import shlex
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..executors import SandboxUnavailable, TestRun, run_tests, walled_command

__all__ = ["RewardSpec", "Reward", "score", "restore", "PROTECTED_NAMES", "CACHE_NAMES",
           "METADATA_NAMES", "DEFAULT_REWARD_TIMEOUT"]

log = logging.getLogger(__name__)

DEFAULT_REWARD_TIMEOUT = 120.0
"""Seconds the reward command may run before its process group is killed."""
PROTECTED_NAMES = ("test_*.py", "*_test.py", "conftest.py", "pytest.ini", ".pytest.ini",
                   "tox.ini", "setup.cfg", "pyproject.toml", "sitecustomize.py",
                   "usercustomize.py", "*.pth")
"""File names (:mod:`fnmatch` patterns, anywhere in the folder) put back as the pristine
folder has them before scoring: what steers pytest's collection, configuration and
plugins, or the interpreter's start."""
CACHE_NAMES = ("__pycache__", "*.pyc", "*.pyo", ".pytest_cache")
"""Caches removed before scoring wherever they are, the pristine folder's too: a forged
cached test module would run in the real one's place."""
METADATA_NAMES = ("*.dist-info", "*.egg-info")
"""Installed distributions' metadata (``pytest11`` entry points are plugins pytest loads):
removed before scoring, and those of the pristine folder copied back whole."""
_OUTPUT_CHARS = 4000


@dataclass(frozen=True)
class RewardSpec:
    """How a task's attempts are scored.

    Attributes:
        command: the reward command line (split with :func:`shlex.split`; run in the
            attempt's folder); None: pytest (this interpreter's) on the files of
            ``held_back`` named as tests (``test_*.py`` / ``*_test.py``).
        held_back: a folder whose files are copied into the attempt's folder (same
            relative paths) after the loop, before the command runs; None: nothing.
        timeout: seconds before the command's process group is killed.
    """

    command: str | None = None
    held_back: str | None = None
    timeout: float = DEFAULT_REWARD_TIMEOUT

    def __post_init__(self) -> None:
        if self.command is None and self.held_back is None:
            raise ValueError("a RewardSpec needs a command or a held_back folder of tests "
                             "(None for both leaves nothing to score)")
        if not self.timeout > 0:
            raise ValueError(f"timeout is seconds more than 0, got {self.timeout!r}")


@dataclass
class Reward:
    """An attempt's score.

    Attributes:
        value: in [0, 1]: the share of the held-back tests that pass (see the module).
        metrics: JSON-safe figures: ``passed``, ``failed``, ``errors``, ``skipped``,
            ``total`` (None when the command is not pytest), ``exit_code``,
            ``timed_out``, ``seconds`` (the command), ``prepare_seconds`` (putting back
            and copying in), ``restored`` (paths put back or removed), ``walled``
            (whether the command ran behind the wall).
        error: why nothing was scored (value 0.0), else None.
        output: the tail of the command's output (for a person reading a failure).
    """

    value: float
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    output: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-safe values."""
        return asdict(self)


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _walk(root: Path) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """``(relative path, entry)`` of everything under ``root``, links not followed."""
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(root / rel if rel else root))
        except OSError:
            continue
        for entry in entries:
            path = f"{rel}/{entry.name}" if rel else entry.name
            yield path, entry
            if entry.is_dir(follow_symlinks=False):
                stack.append(path)


def _remove(path: Path) -> None:
    """Remove a file, link or folder (a link itself, never what it points to)."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def _place(folder: Path, rel: str) -> Path:
    """``folder/rel`` with every folder on the way a real folder inside ``folder``: a
    link or a file the model put where a folder belongs is removed (never followed)."""
    current = folder
    parts = Path(rel).parts
    for part in parts[:-1]:
        current = current / part
        if current.is_symlink() or (current.exists() and not current.is_dir()):
            _remove(current)
        current.mkdir(exist_ok=True)
    target = folder.joinpath(*parts)
    if target.is_symlink() or target.exists():
        _remove(target)
    return target


def _same(a: Path, b: Path) -> bool:
    try:
        sa, sb = a.lstat(), b.lstat()
    except OSError:
        return False
    if not (stat.S_ISREG(sa.st_mode) and stat.S_ISREG(sb.st_mode)) or sa.st_size != sb.st_size:
        return False
    return a.read_bytes() == b.read_bytes()


def restore(folder: str | os.PathLike[str], pristine: str | os.PathLike[str]) -> list[str]:
    """Put back the files of :data:`PROTECTED_NAMES` and the folders of
    :data:`METADATA_NAMES` as ``pristine`` has them, and remove every cache of
    :data:`CACHE_NAMES` (step 1 of the module docstring).

    Args:
        folder: the attempt's folder, as the model left it.
        pristine: the task's untouched folder.

    Returns:
        The relative paths put back or removed, sorted.
    """
    root, base = Path(folder), Path(pristine)
    changed: set[str] = set()
    gone: list[str] = []  # folders removed: nothing under them is looked at again
    for rel, entry in list(_walk(root)):
        if any(rel.startswith(d + "/") for d in gone):
            continue
        name, origin, here = entry.name, base / rel, root / rel
        if _matches(name, CACHE_NAMES):
            pass
        elif _matches(name, METADATA_NAMES):
            if _same_tree(origin, here):
                continue
        elif not _matches(name, PROTECTED_NAMES) or _same(origin, here):
            continue
        _remove(here)  # added or changed by the model (or a link in a file's place)
        changed.add(rel)
        gone.append(rel)
    for rel, entry in list(_walk(base)):
        if entry.is_symlink() or (root / rel).exists() or (root / rel).is_symlink():
            continue
        if entry.is_file() and _matches(entry.name, PROTECTED_NAMES):
            shutil.copy2(base / rel, _place(root, rel))
            changed.add(rel)
        elif entry.is_dir() and _matches(entry.name, METADATA_NAMES):
            shutil.copytree(base / rel, _place(root, rel), symlinks=True)
            changed.add(rel)
    return sorted(changed)


def _same_tree(a: Path, b: Path) -> bool:
    """Whether folders ``a`` and ``b`` hold the same regular files with the same bytes and
    nothing else (links count as different)."""
    if a.is_symlink() or b.is_symlink() or not (a.is_dir() and b.is_dir()):
        return False
    left = {rel: e for rel, e in _walk(a)}
    right = {rel: e for rel, e in _walk(b)}
    if left.keys() != right.keys():
        return False
    return all(e.is_dir(follow_symlinks=False) and right[rel].is_dir(follow_symlinks=False)
               or _same(a / rel, b / rel) for rel, e in left.items())


def _copy_in(folder: Path, held_back: Path) -> list[str]:
    """Copy every file of ``held_back`` into ``folder`` at its relative path, replacing
    whatever is there; the relative paths of the test files among them."""
    tests = []
    for rel, entry in sorted(_walk(held_back)):
        if entry.is_file(follow_symlinks=False):
            shutil.copy2(held_back / rel, _place(folder, rel))
            if _matches(entry.name, ("test_*.py", "*_test.py")):
                tests.append(rel)
    return tests


def _wall(folder: Path) -> Any:
    """The ``wrap`` for :func:`run_tests` that puts the command behind the wall, or None
    when bubblewrap cannot run here (logged: the command then runs unwalled)."""
    try:
        walled_command(["true"], workdir=folder)
    except SandboxUnavailable as exc:
        log.warning("scoring without the sandbox's wall: %s", exc)
        return None

    def wrap(argv: list[str], report_dir: str) -> list[str]:
        return walled_command(argv, workdir=folder, writable=(report_dir,))

    return wrap


def score(folder: str | os.PathLike[str], spec: RewardSpec, *,
          pristine: str | os.PathLike[str]) -> Reward:
    """Score an attempt's folder after the loop (the module docstring says how).

    Args:
        folder: the attempt's own copy of the task's folder, as the model left it; it
            is changed (files put back, held-back files copied in): score a copy you
            mean to keep.
        spec: the task's reward.
        pristine: the task's untouched folder (the test and configuration files are put
            back as they are there).

    Returns:
        A :class:`Reward`; a failing or broken attempt is a reward of 0.0, not an error.

    Raises:
        FileNotFoundError: ``folder``, ``pristine`` or ``spec.held_back`` is not a folder.
    """
    root = Path(folder).resolve()
    for path, what in ((root, "attempt's folder"), (Path(pristine), "pristine folder"),
                       *([(Path(spec.held_back), "held-back folder")] if spec.held_back
                         else [])):
        if not path.is_dir():
            raise FileNotFoundError(f"the {what} {os.fspath(path)!r} is not a folder")
    start = time.monotonic()
    restored = restore(root, pristine)
    tests = _copy_in(root, Path(spec.held_back)) if spec.held_back else []
    prepare_seconds = time.monotonic() - start
    if restored:
        log.info("scoring %s: put back %d files the attempt changed: %s", root,
                 len(restored), restored[:10])
    metrics: dict[str, Any] = {"restored": restored, "prepare_seconds": prepare_seconds}
    sentinel: str | None = None
    if spec.command is not None:
        argv = shlex.split(spec.command)
    elif tests:
        sentinel = _write_sentinel(root)
        argv = [sys.executable, "-m", "pytest", "-q", "--disable-plugin-autoload", sentinel,
                *tests]
    else:
        return Reward(0.0, metrics, error=f"the held-back folder {spec.held_back!r} has no "
                      "test files (test_*.py, *_test.py) and no reward command is set")
    wrap = _wall(root)
    metrics["walled"] = wrap is not None
    with tempfile.TemporaryDirectory(prefix="rlm-reward-") as report_dir:
        os.chmod(report_dir, 0o711)  # the sandbox uid reaches its own folder inside
        try:
            run = run_tests(root, argv, timeout=spec.timeout, max_chars=_OUTPUT_CHARS,
                            junit_dir=report_dir, wrap=wrap)
        except (OSError, ValueError) as exc:
            return Reward(0.0, metrics, error=f"the reward command did not run: {exc}")
        finally:
            if sentinel is not None:
                (root / sentinel).unlink(missing_ok=True)
    return _reward(run, metrics, sentinel is not None)


def _write_sentinel(root: Path) -> str:
    """Write a test that always fails, under a random name, into ``root``; its name.

    pytest collects it first, before any model-written module is imported.  A report in
    which it did not fail while other tests passed was forged from inside pytest's
    process (model code that patches pytest's reports to pass): such an attempt scores
    0.0.  A forgery aimed at the held-back tests alone is not caught this way."""
    name = f"test_{secrets.token_hex(6)}.py"
    left, right = secrets.token_hex(8), secrets.token_hex(8)
    (_place(root, name)).write_text(
        f"def test_{secrets.token_hex(6)}():\n    assert {left!r} == {right!r}\n")
    return name


def _is_pytest(argv: list[str]) -> bool:
    """Whether ``argv`` runs pytest (``pytest ...``, ``py.test``, ``python -m pytest``):
    then a missing report means nothing was scored, whatever the exit status."""
    if argv and os.path.basename(argv[0]) in ("pytest", "py.test"):
        return True
    return len(argv) >= 3 and argv[1] == "-m" and argv[2] == "pytest"


def _reward(run: TestRun, metrics: dict[str, Any], sentinel: bool) -> Reward:
    """The :class:`Reward` of a finished reward command; with ``sentinel``, the counts
    include :func:`_write_sentinel`'s test, which must have failed."""
    failed = run.failed
    forged = False
    if sentinel and failed is not None:
        forged = failed < 1 and bool(run.passed)
        failed = max(failed - 1, 0)
    counts = {"passed": run.passed, "failed": failed, "errors": run.errors,
              "skipped": run.skipped}
    total = None if run.passed is None else sum(v or 0 for v in counts.values())
    metrics.update(counts, total=total, exit_code=run.exit_code, timed_out=run.timed_out,
                   seconds=run.seconds)
    output = run.output[-_OUTPUT_CHARS:]
    if run.timed_out:
        return Reward(0.0, metrics, f"the reward command ran past its time limit "
                      f"({run.seconds:.1f} s) and was killed", output)
    if total is None:
        if not _is_pytest(run.command):
            return Reward(1.0 if run.exit_code == 0 else 0.0, metrics, None, output)
        return Reward(0.0, metrics, "pytest wrote no report (it did not start, or its "
                      f"process ended before writing one): exit {run.exit_code}", output)
    if forged:
        return Reward(0.0, metrics, "the test report was forged: a host test that always "
                      "fails was reported as not failing", output)
    if total == 0:
        return Reward(0.0, metrics, "no test ran (none collected)", output)
    return Reward((run.passed or 0) / total, metrics, None, output)
