"""The host imports no module from a folder model code can write.

A working folder (``IsolatedExecutor(workdir=...)``) is the one folder of the user's that
model code writes, from behind the wall.  It is often also on the *host's* ``sys.path``:
``python app.py`` puts the script's folder first, ``python -m ...`` and a Jupyter kernel
the current folder (``''``).  A module the host imports for the first time after model
code could write there (``import pyarrow`` when a frame comes back, ``pydantic`` for a
typed answer, ``nbformat`` for an export) would then be the ``pyarrow.py`` model code left
in the folder, run in the host process, outside the wall.

:class:`FolderImportGuard` is a finder on :data:`sys.meta_path`, placed first, installed
when a first folder is guarded (:func:`guard_folder`; the isolated executor guards its
working folder from its start to its close).  Every import (top-level or a
package's submodule) is looked up as it would be without the guard, by the finders after
it; when the module found lives in a guarded folder, it is looked up again over the same
search path without the entries inside the guarded folders, as if they were not there,
and a module found *only* there is refused with :class:`FolderImportRefused` (an
``ImportError`` that names the module, the folder and what to do).  A path counts as
inside a folder when it, or any folder on the way to it, resolves into it (so a symbolic
link model code makes in the folder cannot lead the host out and back between the check
and the load).

The Python installation (``sys.prefix``, ``sys.base_prefix``, their ``site-packages``) and
this package are never refused, even inside a working folder (a project's ``.venv``):
refusing them would stop the host itself.  Keeping them out of model code's reach is the
sandbox's part: a working folder that holds them has them bound read-only over it
(:func:`.sandbox.installation_in`).

Once released (the executor closed), a folder stays *watched* for the life of the
process: a module found there that is also found elsewhere on the search path is still
passed over for that one (``import nbformat`` for an export after the run takes the
installed ``nbformat``, not the ``nbformat.py`` model code left), while a module found
only there is imported (the user's own code, which model code may have rewritten: what
the user imports by name is the user's choice).

Not held: modules already imported before the folder was guarded are the ones in
:data:`sys.modules` (never looked up again); a module of the user's own, found only in
the folder, that model code rewrote, once the executor is closed; and a later process
started there (``python app.py`` imports the ``json.py`` model code left): what model
code wrote stays in a working folder (docs/security.md).

The hook follows :pep:`451` (``find_spec`` on ``sys.meta_path``) and the lookup order of
:class:`importlib.machinery.PathFinder`.
"""

from __future__ import annotations

import importlib.machinery
import logging
import os
import site
import sys
import threading
from collections.abc import Callable, Iterable
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

__all__ = ["FolderImportGuard", "FolderImportRefused", "guard_folder", "guarded_folders",
           "inside", "warm_channel_modules", "CHANNEL_MODULES"]

log = logging.getLogger(__name__)

CHANNEL_MODULES = ("numpy", "pyarrow", "pyarrow.ipc", "pyarrow.types", "pandas")
"""The modules the host decodes a value from the worker with (:mod:`.wire`,
:mod:`.arrow_frames`), imported when an executor with a working folder starts
(:func:`warm_channel_modules`) where they are installed."""

_PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # rlm_kernel/


class FolderImportRefused(ImportError):
    """An import the host refused: the module is found only in a folder model code can
    write (a working folder of a live isolated executor).

    Attributes (those of :class:`ImportError`): ``name``, the module; ``path``, the file
    or folder it would have been loaded from.
    """


def _real(path: str) -> str:
    return os.path.realpath(path)


def inside(path: str, folder: str) -> bool:
    """Whether ``path``, or a folder on the way to it, resolves into ``folder``.

    Args:
        path: a file or folder (absolute, or relative to the current folder; ``''`` is
            the current folder, as on ``sys.path``).
        folder: an absolute folder, symbolic links resolved (``os.path.realpath``).

    Every ancestor is resolved on its own: ``DIR/link/x.py``, where ``link`` is a
    symbolic link in ``DIR`` that points out of it, is inside ``DIR`` (the link can be
    changed between a check and a load).
    """
    current = os.path.abspath(path or os.curdir)
    prefix = folder.rstrip(os.sep) + os.sep
    while True:
        real = _real(current)
        if real == folder or real.startswith(prefix):
            return True
        parent = os.path.dirname(current)
        if parent == current:
            return False
        current = parent


def _installation() -> tuple[str, ...]:
    """The interpreter's own folders and this package (resolved), never refused."""
    places = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, _PACKAGE}
    try:
        places.update(site.getsitepackages())
    except AttributeError:  # an old virtualenv's site module
        pass
    user_site = getattr(site, "USER_SITE", None)
    if user_site:
        places.add(user_site)
    return tuple(sorted({_real(p) for p in places if p}))


def _locations(spec: ModuleSpec) -> list[str]:
    """The files and folders a spec loads from (its origin when it is a file, its
    package folders)."""
    found = []
    if spec.has_location and isinstance(spec.origin, str):
        found.append(spec.origin)
    if spec.submodule_search_locations is not None:
        found += [p for p in spec.submodule_search_locations if isinstance(p, str)]
    return found


class FolderImportGuard:
    """The :data:`sys.meta_path` finder of this module (see its docstring): one per
    process, holding the guarded folders with a count of their holders."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders: dict[str, int] = {}
        self.folders: tuple[str, ...] = ()
        self.watched: tuple[str, ...] = ()  # released: passed over, never refused
        self._installation = _installation()
        self._busy = threading.local()
        # folders known to resolve outside every guarded folder, per set of folders
        self._outside: dict[tuple[str, ...], dict[str, str]] = {}

    # -- folders ----------------------------------------------------------------------
    def add(self, folder: str) -> None:
        """Guard ``folder`` (one more holder) and put the finder first on
        :data:`sys.meta_path`."""
        real = _real(folder)
        with self._lock:
            self._holders[real] = self._holders.get(real, 0) + 1
            self.folders = tuple(sorted(self._holders))
            self.watched = tuple(f for f in self.watched if f != real)
            if sys.meta_path[:1] != [self]:
                while self in sys.meta_path:
                    sys.meta_path.remove(self)
                sys.meta_path.insert(0, self)

    def remove(self, folder: str) -> None:
        """One holder less for ``folder``; with the last, the folder is only watched
        (its modules that shadow others passed over, none refused) and the finder stays
        on :data:`sys.meta_path`."""
        real = _real(folder)
        with self._lock:
            count = self._holders.get(real, 0) - 1
            if count > 0:
                self._holders[real] = count
                return
            if self._holders.pop(real, None) is not None and real not in self.watched:
                self.watched = tuple(sorted((*self.watched, real)))
            self.folders = tuple(sorted(self._holders))

    # -- the finder ---------------------------------------------------------------------
    def _guarded(self, path: str, folders: tuple[str, ...]) -> str | None:
        """The guarded folder ``path`` is inside (as :func:`inside` says), unless it is
        the installation's, or None."""
        outside = self._outside.get(folders)
        if outside is None:
            self._outside = {folders: {}}
            outside = self._outside[folders]
        current = os.path.abspath(path or os.curdir)
        chain: list[tuple[str, str]] = []
        while current not in outside:
            parent = os.path.dirname(current)
            if parent in outside and not os.path.islink(current):
                real = os.path.join(outside[parent], os.path.basename(current))
            else:
                real = _real(current)
            for folder in folders:
                if real == folder or real.startswith(folder.rstrip(os.sep) + os.sep):
                    return None if self._installed(path) else folder
            chain.append((current, real))
            if parent == current:
                break
            current = parent
        if len(outside) < 65536:
            # no guarded folder is on the way to these, so model code cannot change where
            # they lead: known (with their real paths) until the guarded folders change
            outside.update(chain[1:])
        return None

    def _installed(self, path: str) -> bool:
        real = _real(path or os.curdir)
        return any(real == p or real.startswith(p.rstrip(os.sep) + os.sep)
                   for p in self._installation)

    def _others(self) -> list[Any]:
        return [f for f in list(sys.meta_path) if f is not self]

    def find_spec(self, fullname: str, path: Iterable[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        """The spec the finders after this one give ``fullname`` (:pep:`451`), unless it
        lives in a guarded or watched folder: then the spec found over the search path
        without those folders' entries, or, from a watched folder only, the one found.

        Raises:
            FolderImportRefused: the module is found only in a guarded folder.
        """
        held = self.folders
        folders = held + self.watched
        busy: set[str] = self._busy.__dict__.setdefault("names", set())
        if not folders or fullname in busy:
            return None
        busy.add(fullname)
        try:
            return self._find(fullname, path, target, folders, held)
        finally:
            busy.discard(fullname)

    def _find(self, fullname: str, path: Iterable[str] | None, target: ModuleType | None,
              folders: tuple[str, ...], held: tuple[str, ...]) -> ModuleSpec | None:
        found, finder_used = None, None
        for finder in self._others():
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            found = find(fullname, path, target)
            if found is not None:
                finder_used = finder
                break
        if found is None:
            return None
        where = next((f for loc in _locations(found)
                      if (f := self._guarded(loc, folders)) is not None), None)
        if where is None:
            return found
        entries = [e for e in (sys.path if path is None else list(path))
                   if isinstance(e, str) and self._guarded(e, folders) is None]
        again = importlib.machinery.PathFinder.find_spec(fullname, entries, target)
        if again is not None and not any(self._guarded(loc, folders) is not None
                                         for loc in _locations(again)):
            log.info("import of %s: %s in the working folder %s passed over for %s",
                     fullname, found.origin, where, again.origin)
            return again
        if where not in held:  # a watched folder: the user's own module
            return found
        log.warning("import of %s refused: found only in %s, a folder model code can write "
                    "(through %r)", fullname, where, finder_used)
        raise FolderImportRefused(
            f"No module named {fullname!r} outside {where}: the host does not import a "
            f"module from a working folder that model code can write (it would run model "
            f"code outside the sandbox); this one was found only there "
            f"({found.origin or where}). Import it before the isolated executor starts, or "
            f"after it is closed, if it is your own", name=fullname,
            path=found.origin or where)

    def invalidate_caches(self) -> None:
        """Nothing cached here (:func:`importlib.invalidate_caches` calls it)."""


_guard = FolderImportGuard()


def guard_folder(folder: str | os.PathLike[str]) -> Callable[[], None]:
    """Refuse to import into this process a module found only in ``folder`` until the
    returned function is called (see the module docstring).

    Args:
        folder: the folder model code can write (a working folder).

    Returns:
        ``release()``: ends this hold on the folder (idempotent); with the last hold
        the folder is watched for the rest of the process (see the module docstring).
    """
    real = _real(os.fspath(folder))
    _guard.add(real)
    done = threading.Event()

    def release() -> None:
        if not done.is_set():
            done.set()
            _guard.remove(real)

    return release


def guarded_folders() -> tuple[str, ...]:
    """The folders guarded now (resolved); not those only watched."""
    return _guard.folders


_warmed = threading.Event()


def warm_channel_modules() -> None:
    """Import :data:`CHANNEL_MODULES` that are installed, once per process, in a
    background thread (a frame's first decode then waits for it through the import
    lock instead of importing): call it with a folder guarded, so that they are the
    installed ones."""
    if _warmed.is_set():
        return
    _warmed.set()

    def load() -> None:
        import importlib

        for name in CHANNEL_MODULES:
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - optional: the decoder says why later
                log.debug("%s not imported ahead: %s", name, exc)

    thread = threading.Thread(target=load, name="rlm-import-ahead", daemon=True)
    thread.start()
    import atexit

    atexit.register(thread.join, 30.0)  # never leave the import lock to a frozen thread
