"""What a run changed in its working folder: the folder as the run found it, kept by the
host, and the unified diff against it that ``finish()`` answers with.

:meth:`FolderBaseline.take` records the folder's files when a top-level run starts, and
:meth:`FolderBaseline.diff` gives the change since then, as ``git diff`` prints it.  Both
use git (the folder's files hashed into a tree with ``git add -A`` and
``git write-tree``; two trees compared with ``git diff``), as spec 003's ``finish``
("the diff of the repository") asks, but never the folder's own repository: the trees go
into a private repository in a host temporary folder (``GIT_DIR``) with the working
folder as its work tree (``GIT_WORK_TREE``).  So

* the diff is the run's own change, whether the folder is a git checkout or not, and
  whatever was committed or left uncommitted before the run;
* nothing in the folder steers the host's git: the folder's ``.git/config`` (hooks,
  ``core.fsmonitor``, filter and diff drivers, ``includeIf``) is never read, the system
  and global configurations are off (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL``), and
  a ``.gitattributes`` the model writes can name a filter or diff driver that nothing
  defines (git then ignores it); ``--no-ext-diff --no-textconv`` besides;
* git reads only the folder's regular files: a symbolic link is recorded as a link (its
  target's path, never the file it names), a FIFO or socket is skipped, a nested ``.git``
  is not followed into;
* each git command has a time limit (a folder of huge files ends with a readable note,
  not a hung run); the diff is cut in the middle past ``max_chars`` characters.

The folder's ``.gitignore`` files are honoured (a diff without ``__pycache__`` or a
virtual environment), and ``__pycache__/`` and ``*.pyc`` are always left out.

Model code in the isolated executor's working-folder wall cannot reach the private
repository (it lives in the host's temporary folder, outside the sandbox); in-process
(the ``plain`` executor) model code runs as the host does and holds no wall at all.

References: git's environment variables (``git help git``: ``GIT_DIR``,
``GIT_WORK_TREE``, ``GIT_INDEX_FILE``, ``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL``);
the idea of a diff against a tree written by the harness, not the agent's repository,
follows SWE-bench's harness, which takes ``git diff`` of the agent's checkout against
the task's base commit.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..text import middle_cut

__all__ = ["DEFAULT_DIFF_CHARS", "DEFAULT_DIFF_TIMEOUT", "FolderBaseline", "FolderDiffError"]

log = logging.getLogger(__name__)

DEFAULT_DIFF_TIMEOUT = 60.0
"""Seconds each git command of a baseline or a diff may take."""
DEFAULT_DIFF_CHARS = 1_000_000
"""Characters of a diff kept before its middle is cut."""
_EXCLUDE = "__pycache__/\n*.pyc\n"


class FolderDiffError(RuntimeError):
    """The folder's change could not be computed (git is missing, a git command failed
    or ran past its time limit); the message says which, in one sentence."""


class FolderBaseline:
    """A working folder as a run found it, kept by the host (see the module docstring).

    Made by :meth:`take`; :meth:`diff` gives the change since; :meth:`close` removes the
    private repository (also on garbage collection: it is a temporary folder).

    Args:
        root: the working folder (an existing folder, resolved).
        timeout: seconds each git command may take.
        max_chars: characters of a diff kept before its middle is cut.

    Attributes:
        error: why no baseline was taken (then :meth:`diff` raises it), else None.
    """

    def __init__(self, root: str | os.PathLike[str], *,
                 timeout: float = DEFAULT_DIFF_TIMEOUT,
                 max_chars: int = DEFAULT_DIFF_CHARS) -> None:
        self.root = os.path.realpath(os.fspath(root))
        self.timeout, self.max_chars = float(timeout), int(max_chars)
        self.error: str | None = None
        self._start: str | None = None
        self._temp: tempfile.TemporaryDirectory[str] | None = None

    @classmethod
    def take(cls, root: str | os.PathLike[str], *, timeout: float = DEFAULT_DIFF_TIMEOUT,
             max_chars: int = DEFAULT_DIFF_CHARS) -> FolderBaseline:
        """Record the folder's files now.  Never raises: a failure is kept in
        :attr:`error` (logged) and said by :meth:`diff`."""
        baseline = cls(root, timeout=timeout, max_chars=max_chars)
        try:
            baseline._start = baseline._snapshot()
        except FolderDiffError as exc:
            baseline.error = str(exc)
            log.warning("no baseline of the working folder %s: %s", baseline.root, exc)
        return baseline

    def diff(self) -> str:
        """The folder's change since :meth:`take` as a unified diff (``git diff``'s
        text, paths ``a/...`` and ``b/...``); empty when nothing changed.

        Raises:
            FolderDiffError: no baseline was taken, or git failed now.
        """
        if self._start is None:
            raise FolderDiffError(self.error or "no baseline of the working folder was taken")
        end = self._snapshot()
        text = self._git("diff", "--no-ext-diff", "--no-textconv", "--no-color",
                         "--no-renames", self._start, end)
        return middle_cut(text, self.max_chars)

    def close(self) -> None:
        """Remove the private repository (idempotent)."""
        if self._temp is not None:
            self._temp.cleanup()
            self._temp = None
        self._start = None

    def __enter__(self) -> FolderBaseline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- git ----------------------------------------------------------------------------
    def _snapshot(self) -> str:
        """The folder's files as a tree of the private repository; its id."""
        if self._temp is None:
            self._temp = tempfile.TemporaryDirectory(prefix="rlm-baseline-")
            self._git("init", "--quiet")
            Path(self._temp.name, "info").mkdir(exist_ok=True)
            Path(self._temp.name, "info", "exclude").write_text(_EXCLUDE, encoding="utf-8")
        self._git("add", "--all", "--ignore-errors", ".")
        return self._git("write-tree").strip()

    def _git(self, *args: str) -> str:
        assert self._temp is not None
        gitdir = self._temp.name
        env = {"GIT_DIR": gitdir, "GIT_WORK_TREE": self.root,
               "GIT_INDEX_FILE": os.path.join(gitdir, "index"),
               "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
               "HOME": gitdir, "XDG_CONFIG_HOME": gitdir, "GIT_TERMINAL_PROMPT": "0",
               "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C",
               "PATH": os.environ.get("PATH", os.defpath)}
        git = shutil.which("git", path=env["PATH"])
        if git is None:
            raise FolderDiffError("git is not installed: the folder's change cannot be "
                                  "computed")
        command = [git, "-c", "core.hooksPath=" + os.devnull, "-c", "core.fsmonitor=false",
                   "-c", "core.autocrlf=false", "-c", "core.symlinks=true",
                   "-c", "core.quotePath=false", "-c", "diff.noprefix=false", *args]
        try:
            done = subprocess.run(command, cwd=self.root, env=env, capture_output=True,
                                  timeout=self.timeout, stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            raise FolderDiffError(f"git {args[0]} ran past its time limit of "
                                  f"{self.timeout:g} s (a folder of very large files?)") \
                from None
        except OSError as exc:
            raise FolderDiffError(f"git {args[0]} could not run: {exc}") from None
        if done.returncode != 0:
            why = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise FolderDiffError(f"git {args[0]} failed (exit {done.returncode}): "
                                  + (why[-1] if why else "no message"))
        return done.stdout.decode("utf-8", "replace")
