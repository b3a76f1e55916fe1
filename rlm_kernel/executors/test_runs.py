"""``run_tests()`` of a working folder: the folder's test command, run with a hard time
limit, and its result as counts (spec 003's REPL has ``run_tests`` beside the file
helpers; issue 38, item 1).

The command is the ``test_command`` setting, or found from the folder
(:func:`find_test_command`): pytest when the folder has tests or a pytest configuration,
else ``make test`` when its Makefile has a ``test`` target.  It runs as ``bash`` does
(:func:`~rlm_kernel.executors.commands.run_command`: its own session, the process group
killed at the time limit, bounded output, the environment cut to the allow-list), so
behind the isolated executor's wall it runs behind that wall too.

The counts come from pytest's own report, its JUnit XML (``--junitxml``, written to a
fresh temporary folder and read with :mod:`xml.etree.ElementTree`), never from the text a
test prints: a test that prints a forged "5 passed" line changes nothing.  Another
runner (``make test``) gives no counts, only its exit status.
"""

from __future__ import annotations

import configparser
import logging
import os
import re
import shlex
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .commands import DEFAULT_OUTPUT_CHARS, run_command

__all__ = ["TestRun", "TestCommandMissing", "find_test_command", "run_tests",
           "DEFAULT_TEST_TIMEOUT"]

log = logging.getLogger(__name__)

DEFAULT_TEST_TIMEOUT = 300.0
"""Seconds a test run may take before its process group is killed."""
_TEST_FILES = ("test_*.py", "*_test.py")
_SKIPPED_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".nox",
                 "build", "dist"}
_SEARCH_DEPTH = 4
"""Folder levels searched for test files (the folder itself is level 0)."""
_MAKE_TEST_RULE = re.compile(r"test\s*::?(?!=)")
"""A Makefile line that starts a ``test`` rule (``test:`` or ``test::``, not ``test :=``)."""


class TestCommandMissing(ValueError):
    """The folder has no test command: no ``test_command`` setting, no pytest tests or
    configuration, no Makefile with a ``test`` target.  The message says how to set one."""

    __test__ = False  # not a pytest test class, whatever the name


@dataclass
class TestRun:
    """What ``run_tests()`` gives back.

    Attributes:
        command: the test command as given or found (the report options added for
            pytest not shown).
        passed / failed / errors / skipped: test counts from pytest's JUnit XML report;
            None when the runner is not pytest or wrote no report.
        exit_code: the command's status (negative: killed by that signal); None if it
            did not start.
        seconds: wall time of the run.
        timed_out: the time limit stopped it.
        output: stdout and stderr interleaved, its middle cut past ``max_chars``.
        cut: characters of output not kept.
    """

    __test__ = False

    command: list[str]
    passed: int | None
    failed: int | None
    errors: int | None
    skipped: int | None
    exit_code: int | None
    seconds: float
    timed_out: bool
    output: str
    cut: int = 0

    @property
    def ok(self) -> bool:
        """The run ended by itself with status 0 and no test failed or errored."""
        return (not self.timed_out and self.exit_code == 0 and not self.failed
                and not self.errors)

    def summary(self) -> str:
        """One line: the counts (or the status alone), the seconds and the status."""
        status = f"exit {self.exit_code}" if self.exit_code is not None else "not run"
        if self.timed_out:
            status = f"stopped at the time limit, {status}"
        if self.passed is None:
            return f"{shlex.join(self.command)}: {status} in {self.seconds:.1f} s"
        counts = f"{self.passed} passed, {self.failed} failed, {self.errors} errors"
        if self.skipped:
            counts += f", {self.skipped} skipped"
        return f"{counts} in {self.seconds:.1f} s ({status})"

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-safe values, with ``ok`` and ``summary``."""
        return {**asdict(self), "ok": self.ok, "summary": self.summary()}

    def __str__(self) -> str:
        tail = self.output.rstrip("\n")
        lines = tail.splitlines()
        if len(lines) > 40:
            tail = "\n".join(["...", *lines[-40:]])
        return f"{self.summary()}\n{tail}" if tail else self.summary()

    __repr__ = __str__


def _has_test_files(root: Path) -> bool:
    """Whether a test file (``test_*.py`` / ``*_test.py``) lies within
    :data:`_SEARCH_DEPTH` levels of ``root`` (``.git``, virtual environments and build
    folders skipped)."""
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.is_file(follow_symlinks=False) and any(
                    Path(entry.name).match(p) for p in _TEST_FILES):
                return True
            if (entry.is_dir(follow_symlinks=False) and depth < _SEARCH_DEPTH
                    and entry.name not in _SKIPPED_DIRS):
                stack.append((Path(entry.path), depth + 1))
    return False


def _has_pytest_config(root: Path) -> bool:
    """Whether the folder configures pytest (pytest.ini, pyproject's
    ``[tool.pytest.ini_options]``, setup.cfg's ``[tool:pytest]``, tox.ini's ``[pytest]``)."""
    if (root / "pytest.ini").is_file():
        return True
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            if "[tool.pytest.ini_options]" in pyproject.read_text(errors="replace"):
                return True
        except OSError:
            pass
    for name, section in (("setup.cfg", "tool:pytest"), ("tox.ini", "pytest")):
        path = root / name
        if path.is_file():
            parser = configparser.ConfigParser(interpolation=None, strict=False)
            try:
                parser.read(path, encoding="utf-8")
            except (configparser.Error, OSError, UnicodeDecodeError):
                continue
            if parser.has_section(section):
                return True
    return False


def _make_has_test(root: Path) -> bool:
    """Whether a Makefile of the folder defines a ``test`` target."""
    for name in ("GNUmakefile", "makefile", "Makefile"):
        path = root / name
        if path.is_file():
            try:
                text = path.read_text(errors="replace")
            except OSError:
                return False
            return any(_MAKE_TEST_RULE.match(line) for line in text.splitlines())
    return False


def find_test_command(root: str | os.PathLike[str]) -> list[str]:
    """The folder's test command when no ``test_command`` is set.

    pytest (``<this interpreter> -m pytest``) when the folder holds test files or a
    pytest configuration; else ``make test`` when a Makefile has a ``test`` target.

    Args:
        root: the working folder.

    Raises:
        TestCommandMissing: none of these; the message says how to set one.
    """
    folder = Path(root)
    if _has_pytest_config(folder) or _has_test_files(folder):
        return [sys.executable, "-m", "pytest"]
    if _make_has_test(folder) and shutil.which("make"):
        return ["make", "test"]
    raise TestCommandMissing(
        f"no test command found for {os.fspath(root)!r}: it has no pytest tests or "
        "configuration and no Makefile with a 'test' target.  Set the test_command "
        "setting (RLM(test_command='...'), rlm run --test-command '...', "
        "%%rlm --test-command '...', c.RLM.test_command)")


def _is_pytest(argv: Sequence[str]) -> bool:
    """Whether ``argv`` runs pytest (``pytest ...``, ``py.test``, ``python [options] -m
    pytest``)."""
    if not argv:
        return False
    if os.path.basename(argv[0]) in ("pytest", "py.test"):
        return True
    i = 1  # the interpreter's own options first (``python -P -m pytest``)
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-m":
        i += 1
    return list(argv[i:i + 2]) == ["-m", "pytest"]


def _counts(report: Path) -> tuple[int, int, int, int] | None:
    """(passed, failed, errors, skipped) from a JUnit XML report of pytest: the sums of
    its ``<testsuite>`` elements' ``tests``, ``failures``, ``errors`` and ``skipped``
    attributes; None when there is no readable report."""
    try:
        tree = ElementTree.parse(report)
    except (OSError, ElementTree.ParseError):
        return None
    top = tree.getroot()
    suites = [top] if top.tag == "testsuite" else top.findall("testsuite")
    if not suites:
        return None
    total = failed = errors = skipped = 0
    try:
        for suite in suites:
            total += int(suite.get("tests", 0))
            failed += int(suite.get("failures", 0))
            errors += int(suite.get("errors", 0))
            skipped += int(suite.get("skipped", 0))
    except ValueError:
        return None
    return max(total - failed - errors - skipped, 0), failed, errors, skipped


def run_tests(root: str | os.PathLike[str], command: str | Sequence[str] | None = None, *,
              timeout: float = DEFAULT_TEST_TIMEOUT, max_chars: int = DEFAULT_OUTPUT_CHARS,
              pass_env: Iterable[str] = (), junit_dir: str | None = None,
              wrap: Callable[[list[str], str], list[str]] | None = None) -> TestRun:
    """Run the folder's tests and read their counts.

    Args:
        root: the working folder (the command's current folder).
        command: a command line (split with :func:`shlex.split`) or argv; None: found
            with :func:`find_test_command`.
        timeout: seconds before the command's process group is stopped.
        max_chars: characters of output kept (head and tail).
        pass_env: names of environment variables passed beyond the allow-list.
        junit_dir: folder for pytest's report (a fresh temporary folder when None; the
            report is removed after it is read).
        wrap: given the whole command line (report options included) and the report's
            folder, the command line to run instead: the same command behind a wall
            (:func:`~rlm_kernel.executors.walled.walled_command`), which must let it
            write that folder.  None: run it as it is.

    Returns:
        A :class:`TestRun`; a failing test run is a result, not an error.

    Raises:
        TestCommandMissing: no command given and none found.
        ValueError: ``command`` is empty, or ``timeout`` is not more than 0.
        FileNotFoundError: the command's program does not exist.
    """
    if not timeout > 0:
        raise ValueError(f"timeout is seconds more than 0, got {timeout!r}")
    if command is None:
        argv = find_test_command(root)
    elif isinstance(command, str):
        argv = shlex.split(command)
    else:
        argv = [str(part) for part in command]
    if not argv:
        raise ValueError("the test command is empty")
    pytest = _is_pytest(argv)
    report_dir = tempfile.mkdtemp(prefix="rlm-tests-", dir=junit_dir)
    report = Path(report_dir) / "junit.xml"
    full = [*argv, f"--junitxml={report}", "-p", "no:cacheprovider"] if pytest else argv
    log.debug("running tests in %s: %s", root, full)
    try:
        if wrap is not None:
            full = wrap(full, report_dir)
        result = run_command(full, cwd=os.fspath(root), timeout=timeout, max_chars=max_chars,
                             hint="run_tests(): run fewer tests with bash('pytest -x ...')",
                             pass_env=pass_env)
        counts = _counts(report) if pytest else None
    finally:
        shutil.rmtree(report_dir, ignore_errors=True)
    passed, failed, errors, skipped = counts if counts is not None else (None,) * 4
    return TestRun(command=argv, passed=passed, failed=failed,
                   errors=errors, skipped=skipped, exit_code=result.exit_code,
                   seconds=result.seconds, timed_out=result.timed_out,
                   output=result.output, cut=result.cut)
