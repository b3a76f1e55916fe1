"""A working folder and the helpers model code gets for it: ``ls``, ``read``, ``grep``,
``apply_patch``, ``bash`` and ``run_tests`` (the REPL of spec 003 has the same six;
``run_tests`` is :mod:`~rlm_kernel.executors.test_runs`).  A sub-agent (an
``rlm_query`` child) gets the folder as :class:`SubAgentFolder`: ``apply_patch`` and
``run_tests`` refused, as spec 003 removes them from sub-agents.

:class:`WorkFolder` holds the folder's resolved path and the limits; its methods are the
helpers, bound into the REPL namespace by name (:meth:`WorkFolder.functions`), and
:meth:`WorkFolder.prompt_lines` / :meth:`WorkFolder.prompt_section` tell the model they
exist, with their signatures.

What every helper holds:

* **paths stay inside the folder.**  A path is taken relative to the folder (an absolute
  path is allowed when it lies inside), then resolved with :func:`os.path.realpath`, so
  ``..`` and symbolic links are followed first; a result outside the folder is refused
  with :class:`PermissionError` ("... is outside the working folder ...").  ``grep``
  searches recursively without following the links it meets (``grep -r``), and
  ``apply_patch`` checks every file of a patch before it writes any;
* **a hard time limit.**  ``grep`` and ``bash`` are child processes in a new session (their
  own process group); past the limit the group gets ``SIGTERM``, then ``SIGKILL``
  ``kill_grace`` seconds later, and the helper returns what was printed so far with a
  note.  A command that ends but leaves processes behind (``sleep 100 &``) has them killed
  the same way: nothing a helper started is running when it returns.  ``ls``, ``read``
  and ``apply_patch`` run in-process, in bounded pieces, and check the deadline between
  pieces (``TimeoutError``);
* **bounded output.**  Past ``max_output_chars`` characters the text keeps its head and
  tail and says how many characters were cut; ``bash`` keeps no more than that in memory
  however much a command prints.

Errors reach model code as exceptions of built-in types, as ``llm_query``'s do
(``PermissionError``, ``FileNotFoundError``, ``IsADirectoryError``, ``ValueError``,
``TimeoutError``), so they cross the isolated executor's channel as themselves.  A
command's own failure is not an error: ``bash`` returns its output and exit status.

Not held here: ``bash`` runs with the user's rights, so a command may ``cd /`` and write
anywhere; only the isolated executor's working-folder wall
(:class:`~rlm_kernel.executors.isolated.IsolatedExecutor` with ``workdir=``) makes the
rest of the file system read-only.  Bound into that executor's namespace the helpers are
copied into the child (they carry :data:`PORTABLE`), so they too run behind the wall.  A
process that leaves the group (``setsid``) escapes the group kill unless the executor's
PID namespace holds it.  Between the check of a path and its use, a symbolic link could
be swapped by concurrently running model code (a race no in-process check closes).

The unified-diff applier is this module's own: whatthepatch 1.0.7 does not split a
multi-file patch whose ``---``/``+++`` lines have no timestamps, and ``git apply`` 2.39,
GNU patch 2.7 and unidiff refuse a hunk whose ``@@`` line counts are wrong, as
model-written ones often are (all four checked by hand).  Hunks here are found by their
lines, not their counts.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
import shutil
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..text import HeadTail, middle_cut
from .commands import (
    DEFAULT_KILL_GRACE,
    DEFAULT_OUTPUT_CHARS,
    CommandResult,
    run_command,
    signal_name,
)
from .environment import passed_names
from .test_runs import DEFAULT_TEST_TIMEOUT, run_tests

__all__ = ["WorkFolder", "CommandResult", "run_command", "signal_name", "PORTABLE",
           "DEFAULT_TIMEOUT", "DEFAULT_BASH_TIMEOUT", "DEFAULT_OUTPUT_CHARS", "HELPER_NAMES",
           "SUB_AGENT_REFUSED", "FINISH_LINE", "SubAgentFolder", "sub_agent_refusal"]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
"""Seconds ``ls``, ``read``, ``grep`` and ``apply_patch`` may take."""
DEFAULT_BASH_TIMEOUT = 90.0
"""Seconds a ``bash`` command may take."""
HELPER_NAMES = ("ls", "read", "grep", "apply_patch", "bash", "run_tests")
SUB_AGENT_REFUSED = ("finish", "apply_patch", "run_tests")
"""What an ``rlm_query`` child (a sub-agent) may not call: spec 003 removes ``finish``,
``apply_patch`` and ``run_tests`` from sub-agents, so only the top-level run changes the
folder, judges it and ends with its change.  ``finish`` is bound by the engine
(:meth:`~rlm_kernel.engine.repl_functions.REPLFunctions.finish`: it ends the run), not
here; its line in the prompt is :data:`FINISH_LINE`."""
FINISH_LINE = ("- finish(message=None): end the run, as FINAL does, when your change is "
               "made: the answer is your message and the folder's change as a unified "
               "diff, which the host computes (do not write the diff yourself)")
"""The prompt's line for ``finish`` (a top-level run's folder only)."""
PORTABLE = "__rlm_portable__"
"""Attribute of a callable that may be copied into an isolated REPL (pickled) and run
there instead of being served from the host."""
_LS_MAX_ENTRIES = 2000

F = TypeVar("F", bound=Callable[..., Any])


def _portable(fn: F) -> F:
    setattr(fn, PORTABLE, True)
    return fn


# -- the folder ---------------------------------------------------------------------------
class WorkFolder:
    """A folder model code works in, and its file helpers (see the module docstring).

    Args:
        path: the folder (must exist); resolved, symbolic links included.
        timeout: seconds ``ls``, ``read``, ``grep`` and ``apply_patch`` may take.
        bash_timeout: seconds a ``bash`` command may take (a call may ask for less).
        max_output_chars: characters of a helper's result before its middle is cut.
        kill_grace: seconds between ``SIGTERM`` and ``SIGKILL`` to a process group.
        pass_env: names of the environment variables ``grep``, ``bash`` and
            ``run_tests`` get beyond the allow-list
            (:mod:`~rlm_kernel.executors.environment`): a list, or one text separated by
            commas or spaces.
        test_command: the command ``run_tests`` runs (a command line); None: found from
            the folder (:func:`~rlm_kernel.executors.test_runs.find_test_command`).
        test_timeout: seconds a ``run_tests`` run may take.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        NotADirectoryError: ``path`` is not a folder.
        ValueError: a limit is not positive, or a name of ``pass_env`` is not a
            variable's name.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = DEFAULT_TIMEOUT,
                 bash_timeout: float = DEFAULT_BASH_TIMEOUT,
                 max_output_chars: int = DEFAULT_OUTPUT_CHARS,
                 kill_grace: float = DEFAULT_KILL_GRACE,
                 pass_env: str | Iterable[str] = (), test_command: str | None = None,
                 test_timeout: float = DEFAULT_TEST_TIMEOUT) -> None:
        root = os.path.realpath(os.fspath(path))
        if not os.path.exists(root):
            raise FileNotFoundError(f"working folder {os.fspath(path)!r} does not exist")
        if not os.path.isdir(root):
            raise NotADirectoryError(f"working folder {os.fspath(path)!r} is not a folder")
        for name, value in (("timeout", timeout), ("bash_timeout", bash_timeout),
                            ("max_output_chars", max_output_chars),
                            ("kill_grace", kill_grace), ("test_timeout", test_timeout)):
            if not value > 0:
                raise ValueError(f"{name} must be positive, not {value!r}")
        self.root = root
        self.timeout, self.bash_timeout = float(timeout), float(bash_timeout)
        self.max_output_chars, self.kill_grace = int(max_output_chars), float(kill_grace)
        self.pass_env = tuple(passed_names(pass_env, environ={}))
        self.test_command = test_command or None
        self.test_timeout = float(test_timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

    def for_sub_agent(self) -> SubAgentFolder:
        """The same folder and limits as a sub-agent sees them: without
        :data:`SUB_AGENT_REFUSED` (calling one raises :class:`PermissionError`)."""
        return SubAgentFolder(self.root, timeout=self.timeout, bash_timeout=self.bash_timeout,
                              max_output_chars=self.max_output_chars,
                              kill_grace=self.kill_grace, pass_env=self.pass_env,
                              test_command=self.test_command,
                              test_timeout=self.test_timeout)

    # -- for the engine ---------------------------------------------------------------
    def functions(self) -> dict[str, Callable[..., Any]]:
        """The helpers by the names model code calls them (:data:`HELPER_NAMES`).  Keep
        the returned objects: a bound method is a new object at each attribute access."""
        return {name: getattr(self, name) for name in HELPER_NAMES}

    def prompt_lines(self) -> list[str]:
        """One line per helper for the model's prompt: ``- name(signature) -> str: what it
        does`` (its docstring's first line, with this folder's limits)."""
        lines = []
        for name in self._offered():
            fn = getattr(self, name)
            params = ", ".join(p.name if p.default is inspect.Parameter.empty
                               else f"{p.name}={p.default!r}"
                               for p in inspect.signature(fn).parameters.values())
            summary = (inspect.getdoc(fn) or "").split("\n\n")[0].replace("\n", " ")
            returns = "TestRun" if name == "run_tests" else "str"
            lines.append(f"- {name}({params}) -> {returns}: {summary}")
        return lines

    def _offered(self) -> tuple[str, ...]:
        """The helpers the prompt lists."""
        return HELPER_NAMES

    @property
    def finishes(self) -> bool:
        """True when a run in this folder may end with ``finish()`` (not a sub-agent's)."""
        return True

    def prompt_section(self) -> str:
        """The paragraph that tells the model about the folder and its helpers."""
        return (f"Working folder: your code runs in {self.root} (the current folder). "
                "Paths are relative to it; a path outside it is refused. Functions for its "
                "files (each returns text; print it):\n" + "\n".join(self.prompt_lines())
                + f"\nA result longer than {self.max_output_chars:,} characters is cut in "
                "the middle; file helpers stop after "
                f"{self.timeout:g} s, bash after {self.bash_timeout:g} s"
                + (f", run_tests after {self.test_timeout:g} s." if "run_tests"
                   in self._offered() else ".")
                + (f"\n{FINISH_LINE}." if self.finishes else ""))

    # -- paths ------------------------------------------------------------------------
    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """``path`` as an absolute path inside the folder, symbolic links resolved.

        Raises:
            PermissionError: the path leads outside the folder.
            TypeError: ``path`` is not a string or path.
            ValueError: it holds a NUL character.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"a path is a str, not {type(path).__name__}")
        text = os.fspath(path)
        if "\x00" in text:
            raise ValueError("a path cannot hold a NUL character")
        full = os.path.realpath(os.path.join(self.root, text))
        if full != self.root and os.path.commonpath([self.root, full]) != self.root:
            raise PermissionError(f"{text!r} is outside the working folder {self.root} "
                                  f"(it resolves to {full}); use paths inside it")
        return Path(full)

    def _show(self, full: Path) -> str:
        rel = os.path.relpath(full, self.root)
        return "." if rel == "." else rel

    def _deadline(self) -> float:
        return time.monotonic() + self.timeout

    def _check(self, deadline: float, what: str) -> None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} took longer than {self.timeout:g} s and was stopped")

    # -- the helpers ----------------------------------------------------------------------
    @_portable
    def ls(self, path: str = ".") -> str:
        """The entries of a folder: name/ for folders, name -> target for links, sizes in bytes.

        Args:
            path: a folder (or a file) inside the working folder.

        Raises:
            PermissionError: the path is outside the folder.
            FileNotFoundError: it does not exist.
            TimeoutError: listing took longer than ``timeout`` seconds.
        """
        full = self.resolve(path)
        deadline = self._deadline()
        if not full.is_dir():
            if not full.exists():
                raise FileNotFoundError(f"no file or folder {path!r} in the working folder")
            return f"{self._show(full)}  ({full.stat().st_size:,} bytes)"
        lines, count = [], 0
        with os.scandir(full) as entries:
            for count, entry in enumerate(sorted(entries, key=lambda e: e.name), 1):
                if count % 200 == 0:
                    self._check(deadline, f"ls({path!r})")
                if count > _LS_MAX_ENTRIES:
                    continue
                lines.append(self._entry(entry))
        if count > _LS_MAX_ENTRIES:
            lines.append(f"[... {count - _LS_MAX_ENTRIES:,} more entries not shown]")
        text = "\n".join(lines) if lines else "(empty folder)"
        return middle_cut(text, self.max_output_chars, "ls() a sub-folder or grep() for names")

    @staticmethod
    def _entry(entry: os.DirEntry[str]) -> str:
        try:
            if entry.is_symlink():
                return f"{entry.name} -> {os.readlink(entry.path)}"
            if entry.is_dir():
                return f"{entry.name}/"
            return f"{entry.name}  ({entry.stat().st_size:,} bytes)"
        except OSError as exc:
            return f"{entry.name}  (unreadable: {exc.strerror})"

    @_portable
    def read(self, path: str, start: int | None = None, end: int | None = None) -> str:
        """The text of a file, or its lines start..end (counted from 1, end included).

        Args:
            path: a file inside the working folder.
            start: first line to return (default: 1).
            end: last line to return (default: the last line).

        Raises:
            PermissionError: the path is outside the folder.
            FileNotFoundError / IsADirectoryError: no such file / it is a folder.
            ValueError: a line number below 1, or a file that is not text.
            TimeoutError: reading took longer than ``timeout`` seconds.
        """
        for name, value in (("start", start), ("end", end)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} is a line number from 1, not {value!r}")
        full = self.resolve(path)
        try:
            info = full.stat()
        except FileNotFoundError:
            raise FileNotFoundError(f"no file {path!r} in the working folder") from None
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(f"{path!r} is a folder: ls({path!r}) lists it")
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path!r} is not a regular file")
        deadline = self._deadline()
        first, last = start or 1, end
        kept = HeadTail(self.max_output_chars)
        fd = os.open(full, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, encoding="utf-8", errors="replace", newline="") as f:
            if "\x00" in f.read(8192):
                raise ValueError(f"{path!r} is a binary file ({info.st_size:,} bytes), "
                                 "not text")
            f.seek(0)
            for number, line in enumerate(f, 1):
                if number % 5000 == 0:
                    self._check(deadline, f"read({path!r})")
                if last is not None and number > last:
                    break
                if number >= first:
                    kept.add(line)
        return kept.text(f"read({path!r}, start, end) a smaller range of lines")

    @_portable
    def grep(self, pattern: str, path: str = ".") -> str:
        """Lines matching an extended regular expression (grep -E), as file:line:text.

        Searches ``path`` (a file, or a folder recursively; ``.git`` and binary files
        skipped; symbolic links met on the way not followed).

        Raises:
            PermissionError: the path is outside the folder.
            FileNotFoundError: it does not exist.
            ValueError: grep failed (an invalid pattern; grep's message says).
        """
        full = self.resolve(path)
        if not full.exists():
            raise FileNotFoundError(f"no file or folder {path!r} in the working folder")
        grep = shutil.which("grep")
        if grep is None:
            raise FileNotFoundError("grep is not installed")
        result = run_command(
            [grep, "-rnHIE", "--color=never", "--exclude-dir=.git", "-e", str(pattern), "--",
             *([] if full == Path(self.root) else [self._show(full)])], cwd=self.root, timeout=self.timeout,
            max_chars=self.max_output_chars, kill_grace=self.kill_grace,
            hint="grep a narrower pattern or path", pass_env=self.pass_env)
        text = result.output.rstrip("\n")
        if result.timed_out:
            return f"{text}\n[grep stopped after {self.timeout:g} s: these are the matches " \
                   "found so far]"
        if result.exit_code == 1 and not text:
            return "(no matches)"
        if result.exit_code == 2 and all(line.startswith((grep + ":", "grep:"))
                                         for line in text.splitlines()):
            raise ValueError(f"grep failed for the pattern {pattern!r}: {text}")
        return text

    @_portable
    def bash(self, command: str, timeout: float | None = None) -> str:
        """Run a shell command in the working folder: its output (stdout and stderr) and exit status.

        The command runs in its own process group with no input; past the time limit,
        or when it ends with processes left in the background, the whole group is killed
        (``SIGTERM``, then ``SIGKILL``).

        Args:
            command: a bash command line.
            timeout: seconds for this command, at most ``bash_timeout`` (default: that).

        Raises:
            TypeError: ``command`` is not a string.
            ValueError: ``timeout`` is not a number more than 0.
        """
        if not isinstance(command, str):
            raise TypeError(f"the command is a str, not {type(command).__name__}")
        limit = self.bash_timeout if timeout is None else float(timeout)
        if not limit > 0:  # NaN fails this too: min() would keep it, and no deadline fires
            raise ValueError(f"timeout is seconds more than 0, got {timeout!r}")
        limit = min(limit, self.bash_timeout)
        shell = shutil.which("bash") or "/bin/sh"
        result = run_command([shell, "-c", command], cwd=self.root, timeout=limit,
                             max_chars=self.max_output_chars, kill_grace=self.kill_grace,
                             hint="print less, or send the output to a file and grep it",
                             pass_env=self.pass_env)
        text = result.output
        notes = []
        if result.timed_out:
            notes.append(f"[stopped after {limit:g} s: the command ran past its time limit "
                         "and its process group was killed]")
        elif result.exit_code:
            code = result.exit_code
            notes.append(f"[exit status {code}]" if code > 0
                         else f"[killed by {signal_name(-code)}]")
        if notes:
            text = (text if not text or text.endswith("\n") else text + "\n") + "\n".join(notes)
        return text

    @_portable
    def run_tests(self) -> Any:
        """Run the folder's tests: a TestRun with passed, failed, errors, exit_code, seconds and output (print it).

        The command is the ``test_command`` setting, or pytest when the folder has tests,
        else ``make test`` (:mod:`~rlm_kernel.executors.test_runs`); it runs as ``bash``
        does, its process group killed after ``test_timeout`` seconds.

        Raises:
            ValueError: no test command is set and none is found (the message says how
                to set one).
            FileNotFoundError: the command's program does not exist.
        """
        return run_tests(self.root, self.test_command, timeout=self.test_timeout,
                         max_chars=self.max_output_chars, pass_env=self.pass_env)

    @_portable
    def apply_patch(self, patch: str) -> str:
        """Apply a unified diff (--- a/file, +++ b/file, @@ hunks); /dev/null creates or deletes a file.

        Every file the patch names must resolve inside the working folder; all hunks are
        checked before any file is written, so a patch applies whole or not at all.
        Hunks are found by their lines (the ``@@`` line numbers are a hint; wrong counts
        are tolerated).

        Returns:
            A summary: each file created, modified or deleted, with lines added/removed.

        Raises:
            TypeError: ``patch`` is not a string.
            PermissionError: a file of the patch is outside the folder.
            ValueError: the text is not a patch, names a file twice, or a hunk does not
                match its file.
            FileNotFoundError / FileExistsError: a file to change is missing / a file to
                create exists.
            TimeoutError: applying took longer than ``timeout`` seconds.
        """
        if not isinstance(patch, str):
            raise TypeError(f"the patch is a str, not {type(patch).__name__}")
        deadline = self._deadline()
        files = _parse_patch(patch)
        paths = [(None if item.old is None else self.resolve(item.old),
                  None if item.new is None else self.resolve(item.new))
                 for item in files]  # every path is checked before anything is read
        named = [p for pair in paths for p in dict.fromkeys(pair) if p is not None]
        twice = sorted({str(p.relative_to(self.root)) for p in named if named.count(p) > 1})
        if twice:  # each change is made on the file as it is on disk: one entry a file
            raise ValueError(f"the patch names {', '.join(twice)} more than once; put all "
                             "of a file's hunks under one ---/+++ header")
        results = []
        for item, (old, new) in zip(files, paths, strict=True):
            name = item.new or item.old
            self._check(deadline, "apply_patch")
            if old is None:
                if new is not None and new.exists() and (new.is_dir() or new.stat().st_size):
                    raise FileExistsError(f"the patch creates {name!r}, which exists already")
                lines: list[str] = []
            else:
                if not old.is_file():
                    kind = "a folder" if old.is_dir() else "missing"
                    raise FileNotFoundError(f"the patch changes {item.old!r}, which is {kind}")
                with open(old, encoding="utf-8", errors="surrogateescape", newline="") as f:
                    lines = f.read().splitlines(keepends=True)
            text, added, removed = _apply_hunks(item, lines, deadline, self._check)
            if new is None and text.strip():
                raise ValueError(f"the patch deletes {item.old!r} but does not remove all "
                                 "of its lines")
            results.append((item, old, new, text, added, removed))
        summary = []
        for item, old, new, text, added, removed in results:
            if new is None:
                assert old is not None
                old.unlink()
                summary.append(f"deleted {item.old}")
                continue
            new.parent.mkdir(parents=True, exist_ok=True)
            with open(new, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
                f.write(text)
            if old is None:
                summary.append(f"created {item.new} (+{added})")
            else:
                if old != new:
                    old.unlink()
                verb = "modified" if old == new else f"renamed {item.old} to"
                summary.append(f"{verb} {item.new} (+{added} -{removed})")
        log.debug("apply_patch in %s: %s", self.root, summary)
        return "Applied: " + "; ".join(summary)




class SubAgentFolder(WorkFolder):
    """A working folder as an ``rlm_query`` child sees it: the parent's folder and
    limits, its reading helpers and ``bash``, but not :data:`SUB_AGENT_REFUSED`; those
    stay bound (their names are reserved in the REPL) and raise
    :class:`PermissionError` with one readable sentence.  Made by
    :meth:`WorkFolder.for_sub_agent`.  ``bash`` could still write files: the refusal
    follows spec 003's list, it is not a wall."""

    def _offered(self) -> tuple[str, ...]:
        return tuple(n for n in HELPER_NAMES if n not in SUB_AGENT_REFUSED)

    @property
    def finishes(self) -> bool:
        return False

    @_portable
    def apply_patch(self, patch: str) -> str:
        """Refused to a sub-agent.

        Raises:
            PermissionError: always.
        """
        raise PermissionError(sub_agent_refusal("apply_patch"))

    @_portable
    def run_tests(self) -> Any:
        """Refused to a sub-agent.

        Raises:
            PermissionError: always.
        """
        raise PermissionError(sub_agent_refusal("run_tests"))


def sub_agent_refusal(name: str) -> str:
    """The one sentence a sub-agent's model code gets for a helper of
    :data:`SUB_AGENT_REFUSED` (as a :class:`PermissionError`)."""
    return (f"{name}() is not available to a sub-agent (an rlm_query run): only the "
            "top-level run changes the working folder, runs its tests and finishes; "
            "return what you found as your answer instead")


# -- unified diffs ------------------------------------------------------------------------
@dataclass
class _Hunk:
    start: int  # the old side's first line (from 1; 0 for "-0,0"), a hint
    lines: list[tuple[str, str, bool]]  # (" ", "-" or "+", text, ends with a newline)


@dataclass
class _FilePatch:
    old: str | None  # None: /dev/null (created)
    new: str | None  # None: /dev/null (deleted)
    hunks: list[_Hunk]


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")


def _header_path(line: str) -> str | None:
    """The path of a ``---``/``+++`` line (timestamp dropped); None for /dev/null."""
    path = line[4:].split("\t")[0].strip()
    if path.startswith('"') and path.endswith('"') and len(path) > 1:
        path = path[1:-1]
    return None if path == "/dev/null" else path


def _strip_prefix(old: str | None, new: str | None) -> tuple[str | None, str | None]:
    """Drop git's ``a/`` and ``b/`` when the patch uses them."""
    if (old is None or old.startswith("a/")) and (new is None or new.startswith("b/")):
        return (None if old is None else old[2:]), (None if new is None else new[2:])
    return old, new


def _parse_patch(text: str) -> list[_FilePatch]:
    """The files of a unified diff; a hunk ends at the next ``@@``, the next file header
    or a ``diff`` line, whatever its ``@@`` counts say.

    Raises:
        ValueError: no file header or no hunk.
    """
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    files: list[_FilePatch] = []
    hunk: _Hunk | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _strip_prefix(_header_path(line), _header_path(lines[i + 1]))
            if old is None and new is None:
                raise ValueError("a file header of the patch names /dev/null twice")
            files.append(_FilePatch(old, new, []))
            hunk = None
            i += 2
            continue
        if line.startswith("diff ") or line.startswith("Index: "):
            hunk = None
        elif (match := _HUNK.match(line)) is not None:
            if not files:
                raise ValueError("the patch has a hunk before any '--- a/file' / "
                                 "'+++ b/file' header")
            hunk = _Hunk(int(match.group(1)), [])
            files[-1].hunks.append(hunk)
        elif hunk is not None:
            if line.startswith("\\"):  # "\ No newline at end of file"
                if hunk.lines:
                    tag, body, _ = hunk.lines[-1]
                    hunk.lines[-1] = (tag, body, False)
            elif line[:1] in (" ", "-", "+"):
                hunk.lines.append((line[0], line[1:], True))
            elif line == "":
                hunk.lines.append((" ", "", True))  # a blank context line lost its space
            else:
                hunk = None  # text between files (git's "index ..." and the like)
        i += 1
    if not files:
        raise ValueError("no '--- a/file' / '+++ b/file' header found: apply_patch takes a "
                         "unified diff")
    for item in files:
        if not item.hunks and not (item.old is None or item.new is None):
            raise ValueError(f"the patch has no hunk for {item.new!r}")
    return files


def _find(lines: list[str], block: list[str], hint: int, cursor: int,
          same: Callable[[str, str], bool]) -> int:
    """The index where ``block`` occurs in ``lines`` at or after ``cursor``, nearest to
    ``hint``; -1 if nowhere."""
    n, m = len(lines), len(block)
    best = -1
    for at in range(cursor, n - m + 1):
        if all(same(lines[at + k], block[k]) for k in range(m)):
            if best < 0 or abs(at - hint) < abs(best - hint):
                best = at
            if at >= hint:
                break
    return best


def _apply_hunks(item: _FilePatch, lines: list[str], deadline: float,
                 check: Callable[[float, str], None]) -> tuple[str, int, int]:
    """The new text of a file: ``lines`` with the hunks of ``item`` applied, and the
    counts of lines added and removed.

    Raises:
        ValueError: a hunk's old lines are not in the file.
    """
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    bare = [line.rstrip("\r\n") for line in lines]
    out: list[str] = []
    cursor = added = removed = 0
    for number, hunk in enumerate(item.hunks, 1):
        check(deadline, "apply_patch")
        old = [body for tag, body, _ in hunk.lines if tag != "+"]
        if old:
            hint = max(hunk.start - 1, cursor)
            at = _find(bare, old, hint, cursor, lambda a, b: a == b)
            if at < 0:
                at = _find(bare, old, hint, cursor, lambda a, b: a.rstrip() == b.rstrip())
            if at < 0:
                name = item.old or item.new
                shown = "\n".join(old[:8]) + ("\n..." if len(old) > 8 else "")
                raise ValueError(f"hunk {number} of the patch for {name!r} does not match the "
                                 f"file: these lines were not found (after line {cursor}):\n"
                                 f"{shown}\nread() the file and make the patch from its "
                                 "current text")
        else:  # "-L,0": insert after line L
            at = max(min(hunk.start, len(lines)), cursor)
        out.extend(lines[cursor:at])
        k = at
        for tag, body, eol in hunk.lines:
            if out and not out[-1].endswith("\n"):
                out[-1] += newline  # a last line without a newline gets one before more
            if tag == "-":
                removed += 1
                k += 1
            elif tag == " ":  # the file's own line (its whitespace and line ending)
                kept = lines[k]
                out.append(kept if eol else kept.rstrip("\r\n"))
                k += 1
            else:
                added += 1
                out.append(body + (newline if eol else ""))
        cursor = at + len(old)
    if cursor < len(lines) and out and not out[-1].endswith("\n"):
        out[-1] += newline
    out.extend(lines[cursor:])
    return "".join(out), added, removed
