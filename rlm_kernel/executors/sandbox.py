"""The isolated executor's wall: the worker's command line under bubblewrap, and its cgroup.

`bubblewrap <https://github.com/containers/bubblewrap>`_ (``bwrap``; Debian's and
Ubuntu's package ``bubblewrap``, also in Fedora, Arch and Alpine) is the sandbox of
Flatpak and of Linux agent sandboxes.  :func:`bwrap_command` asks it for:

* a new user namespace whose only uid is unprivileged, with every capability dropped
  (``--cap-drop ALL``) and no further user namespaces (``--disable-userns``), whatever
  the caller's uid: an ordinary user's sandbox runs as that user; a root caller's
  (root in a container or CI is the common case) runs as :func:`host_uid`, an unused
  unprivileged host uid, never 0: bubblewrap maps the sandbox's uid onto the uid that
  starts it, so for root it is started through :mod:`.launcher`, which drops to that
  uid after making the Python installation reachable to it and binding the working
  folder idmapped (:func:`wall_command`);
* a seccomp filter (:mod:`.syscall_filter`, ``--seccomp FD``) on the worker and all it
  starts;
* new PID, IPC, UTS, cgroup and (unless the network is asked for) network namespaces,
  with a fresh ``/proc`` of its own PID namespace: model code sees no process of the
  host, and bwrap is PID 1 there (it reaps orphans; when it dies, the kernel kills
  everything left in the namespace); the kernel's settings in it read-only
  (:data:`PROC_READ_ONLY`) and a few files unreadable (:data:`PROC_HIDDEN`);
* ``--die-with-parent`` (the sandbox ends with the host) and ``--new-session`` (no
  ``TIOCSTI`` on the host's terminal);
* the whole file system read-only, with private empty ``tmpfs`` mounts on ``/tmp``,
  ``/var/tmp``, ``/dev/shm`` and ``/run`` (so no path-named socket of the host is
  reachable there), the users' homes (``/root``, ``/home`` and ``$HOME``) hidden, and
  then bound back read-only, wherever they live (a venv under ``/tmp`` too), only what
  the worker needs to run: the Python installation, the ``site-packages`` folders of
  ``sys.path`` and the ``rlm_kernel`` package folder (never the checkout around it, the
  caller's folder or a script's); the folders of :data:`HIDDEN_IN_HOME` stay hidden
  wherever they fall; the worker starts in the working folder, else in the caller's
  folder when the sandbox's uid can read it through the read-only ``/``, else in its
  own ``/tmp``;
* the working folder (``workdir``), when given, bound read-write: the only place
  model code may write that outlives it; its git repository's ``.git`` read-only
  (:func:`git_metadata`), and so are the Python installation and this package where
  it holds them (:func:`installation_in`); a working folder inside them is refused
  (:func:`check_workdir`).

Processes and memory: where the host may make cgroups (root with a writable cgroup
file system), :func:`make_cgroups` makes a ``pids`` and a ``memory`` cgroup and the
worker starts inside them (the cgroup file system is read-only in the sandbox, and the
worker has no capability, so it cannot lift them).  Elsewhere the worker's
``RLIMIT_NPROC`` and ``RLIMIT_AS`` hold (an unprivileged process cannot raise a hard
limit), and the host watches the sandbox's memory (see
:class:`~rlm_kernel.executors.isolated.IsolatedExecutor`).
"""

from __future__ import annotations

import grp
import json
import logging
import os
import pwd
import shutil
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from . import launcher

__all__ = ["WorkerError", "SandboxUnavailable", "bwrap_command", "find_bwrap", "Cgroups", "make_cgroups",
           "HIDDEN_IN_HOME", "limits_command", "SANDBOX_UID", "PACKAGE_ROOT", "process_tree", "host_uid",
           "launcher_command", "wall_command", "HOST_UID_VARIABLE", "DEFAULT_HOST_UID", "PACKAGE_DIR",
           "PROC_READ_ONLY", "PROC_HIDDEN", "git_metadata", "check_workdir",
           "installation_in", "interpreter_path", "VENV_PARTS"]

log = logging.getLogger(__name__)

SANDBOX_UID = 65534
"""The uid (and gid) model code sees itself run as when the host is root (``nobody``
inside the sandbox; outside it is :func:`host_uid`)."""
HOST_UID_VARIABLE = "RLM_SANDBOX_UID"
"""The environment variable that sets the host uid (and gid) a root caller's sandbox runs
as (:func:`host_uid`)."""
DEFAULT_HOST_UID = 2_000_000_000
"""The host uid a root caller's sandbox runs as by default, when it is mapped and no
account uses it: in the range systemd's "Users, Groups, UIDs and GIDs on systemd
Systems" leaves unused (1879048192-2147483647), below 2**31."""
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
"""Parts of ``/proc`` bound read-only over the sandbox's own ``/proc`` whatever the uid
(the OCI runtime's ``readonlyPaths`` as Docker sets them; bubblewrap covers the first
four only when it finds them writable, which it never does for ``/proc/sys``, a 0555
folder of 0644 files)."""
PROC_HIDDEN = ("/proc/kcore", "/proc/keys", "/proc/key-users", "/proc/timer_list",
               "/proc/sched_debug", "/proc/latency_stats")
"""Files of ``/proc`` covered in the sandbox by ``/dev/null`` on a ``nodev`` mount, so
that opening them fails (``EACCES``): Docker's ``maskedPaths`` that are files, and
``/proc/key-users``; ``/proc/keys`` lists the names of the keys of the host's session
keyring."""
LAUNCHER = str(Path(__file__).with_name("launcher.py"))
"""The script a root caller's sandbox starts through (:mod:`.launcher`)."""
HIDDEN_IN_HOME = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config/gcloud",
                  ".password-store", ".netrc", ".git-credentials", ".pypirc")
"""Files and folders of a home that hold keys and credentials: hidden in the sandbox
even where a folder around them is bound back."""
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
"""The folder holding the ``rlm_kernel`` package (first on the worker's ``sys.path``;
for a checkout, only the package folder in it is bound in the sandbox)."""
PACKAGE_DIR = str(Path(__file__).resolve().parents[1])
"""The ``rlm_kernel`` package folder (bound read-only in the sandbox)."""
_PRIVATE = ("/tmp", "/var/tmp", "/dev/shm", "/run")
VENV_PARTS = ("bin", "lib", "lib64", "include", "share", "etc", "pyvenv.cfg")
"""What of a venv runs or configures what runs (:pep:`405`'s layout): its scripts, its
packages, its headers, and the ``share`` and ``etc`` folders where Jupyter finds
kernelspecs (``share/jupyter/kernels``) and the server's settings
(``etc/jupyter``): a kernelspec's ``argv`` is a command your next notebook runs.
Read-only in a working folder that holds the venv; a working folder inside one of them
is refused (:func:`check_workdir`)."""
INSTALL_HINT = ("install bubblewrap: 'apt-get install bubblewrap' (Debian, Ubuntu), "
                "'dnf install bubblewrap' (Fedora), 'pacman -S bubblewrap' (Arch), "
                "'apk add bubblewrap' (Alpine); or run model code in-process "
                "(--executor in-process, c.RLM.executor = 'in-process'), which has no wall")


class WorkerError(RuntimeError):
    """The isolated REPL's worker could not be started or did not answer."""


class SandboxUnavailable(WorkerError):
    """bubblewrap is missing or cannot make its namespaces here; the message says what
    to install or change.  The isolated executor never falls back to running model
    code without its wall."""


def find_bwrap() -> str:
    """The path of ``bwrap``.

    Raises:
        SandboxUnavailable: it is not installed (the message names the package).
    """
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable(f"the isolated executor needs bubblewrap (bwrap), which "
                                 f"is not installed: {INSTALL_HINT}")
    return found


def _homes() -> list[str]:
    found = {"/root", "/home", os.path.expanduser("~")}
    try:
        found.add(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:  # a uid with no passwd entry
        pass
    return sorted(p for p in {os.path.realpath(h) for h in found}
                  if p not in ("/", "") and os.path.isdir(p))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _site_folder(path: str) -> bool:
    """A folder of installed packages on ``sys.path`` (``site-packages``,
    ``dist-packages``: the venv's, the system's, the user's ``~/.local/...``)."""
    return os.path.basename(os.path.normpath(path)) in ("site-packages", "dist-packages")


def interpreter_path(python: str) -> str:
    """The path the sandbox runs ``python`` by: its folder with symbolic links resolved
    (folders are bound back by their real paths, so a link such as ``/tmp/proj/.venv ->
    /srv/venv`` leads nowhere in the sandbox's private ``/tmp``), its own name kept (a
    venv's ``bin/python`` is itself a link, and Python finds ``pyvenv.cfg`` beside the
    path it was started by, :pep:`405`)."""
    folder, name = os.path.split(os.path.abspath(python))
    return os.path.join(os.path.realpath(folder), name)


def _venv(python: str) -> str | None:
    """The venv ``python`` (a path, symbolic links not resolved) runs in: the folder
    above its own with a ``pyvenv.cfg`` (:pep:`405`), or None."""
    venv = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    return venv if os.path.isfile(os.path.join(venv, "pyvenv.cfg")) else None


def _read_only_folders(python: str, *, everywhere: bool = False) -> list[str]:
    """Folders bound back read-only after the homes and /tmp are hidden: what the worker
    needs to run and nothing else: the Python installation (this interpreter's prefixes,
    ``python``'s folder, its installation and its venv), the ``site-packages`` and
    ``dist-packages`` folders of ``sys.path``, and the ``rlm_kernel`` package folder
    (:data:`PACKAGE_DIR`, not the checkout around it).  Never the caller's folder, a
    script's folder, nor another folder of ``sys.path``.  With ``everywhere``, each of
    these wherever it lives (what the sandbox must be able to read,
    :func:`launcher_command`'s ``reach``); else only those the homes and the private
    folders hide."""
    real_python = os.path.realpath(python)
    wanted = [PACKAGE_DIR, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              os.path.dirname(python), os.path.dirname(real_python),
              os.path.dirname(os.path.dirname(real_python))]
    wanted += [p for p in sys.path if p and _site_folder(p)]
    venv = _venv(python)
    if venv is not None:
        wanted.append(venv)  # the worker's own venv: its site-packages too
    homes = _homes()
    found: list[str] = []
    for path in wanted:
        real = os.path.realpath(path)
        if real in ("/", "") or not os.path.exists(real):
            continue
        if os.path.isfile(real):  # a zip on sys.path
            real = os.path.dirname(real)
        hidden = _PRIVATE + tuple(homes)
        if any(_inside(h, real) for h in _PRIVATE + ("/root", "/home")):
            continue  # a private folder or the homes' own
        if real in homes:
            continue
        if everywhere or any(_inside(real, p) for p in hidden):
            found.append(real)  # a home inside it is hidden again (bwrap_command)
    found.sort(key=len)
    kept: list[str] = []
    for path in found:  # a folder inside one already bound needs no bind of its own
        if not any(_inside(path, k) for k in kept):
            kept.append(path)
    return kept


def _installation_parts(python: str) -> list[str]:
    """Folders (and ``pyvenv.cfg``) whose every file belongs to the Python installation
    or this package, so that a working folder neither lies inside one nor holds one
    writable: this package (:data:`PACKAGE_DIR`), the host's standard library, package
    and script folders (``sysconfig``), the ``site-packages`` folders of ``sys.path``,
    the worker interpreter's folder, and for a venv its :data:`VENV_PARTS`.  Not a
    prefix itself (``/usr`` for a system Python; a venv's other folders hold nothing
    that runs)."""
    import sysconfig

    paths = sysconfig.get_paths()
    parts = [PACKAGE_DIR, os.path.dirname(os.path.abspath(python)),
             os.path.dirname(os.path.realpath(python))]
    parts += [paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib",
                                         "scripts")]
    parts += [p for p in sys.path if p and _site_folder(p)]
    venv = _venv(python)
    if venv is not None:
        parts += [os.path.join(venv, name) for name in VENV_PARTS]
    return sorted({os.path.realpath(p) for p in parts if p and os.path.exists(p)})


def check_workdir(workdir: str, python: str) -> None:
    """Refuse a working folder inside the Python installation or this package (a venv's
    ``bin`` or ``lib``, ``site-packages``, the ``rlm_kernel`` folder): bound read-write,
    it would let model code rewrite what the host and your next programs run.  A
    working folder that *holds* them (a project with its ``.venv``, this package's
    checkout) is fine: :func:`bwrap_command` binds them read-only over it
    (:func:`installation_in`).

    Args:
        workdir: the working folder (absolute, symbolic links resolved).
        python: the worker's interpreter.

    Raises:
        ValueError: ``workdir`` is inside one of those folders (the message names it).
    """
    for part in _installation_parts(python):
        if _inside(workdir, part):
            raise ValueError(f"the working folder {workdir!r} is inside {part!r}, part of "
                             "the Python installation or of rlm_kernel: model code could "
                             "rewrite what your programs import; give a folder outside it")


def installation_in(workdir: str, python: str) -> list[str]:
    """The parts of the Python installation and this package that lie inside
    ``workdir`` (a project's ``.venv``, the ``rlm_kernel`` folder of a checkout given
    as the working folder), which :func:`bwrap_command` binds read-only over the
    writable folder, as it does for ``.git`` (:func:`git_metadata`).

    Args:
        workdir: the working folder (absolute, symbolic links resolved).
        python: the worker's interpreter.
    """
    return [p for p in _installation_parts(python) if _inside(p, workdir) and p != workdir]


def git_metadata(workdir: str) -> list[str]:
    """The paths inside ``workdir`` that hold its git repository's settings and hooks,
    bound read-only over the writable folder (as the Linux sandbox of OpenAI's Codex CLI
    does for ``.git`` of its writable roots): a ``.git`` folder; or a ``.git`` file (a
    worktree's, a submodule's) with the ``gitdir`` it names and that one's
    ``commondir``, when they lie inside ``workdir``; or the folder a ``.git`` symbolic
    link leads to inside ``workdir``.  Model code could otherwise write
    ``core.fsmonitor`` or a hook that your next ``git status`` or ``git commit`` runs
    outside the wall.  Empty when ``workdir`` holds no ``.git``.

    Args:
        workdir: the working folder (absolute, symbolic links resolved).
    """
    found: list[str] = []
    dot_git = os.path.join(workdir, ".git")
    if os.path.islink(dot_git):
        target = os.path.realpath(dot_git)
        if _inside(target, workdir) and os.path.exists(target):
            found.append(target)
        return found
    if os.path.isdir(dot_git):
        return [dot_git]
    if not os.path.isfile(dot_git):
        return found
    found.append(dot_git)
    try:
        with open(dot_git, encoding="utf-8", errors="replace") as f:
            line = (f.read(4096).splitlines() or [""])[0]
    except OSError:
        return found
    if not line.startswith("gitdir:"):
        return found
    gitdir = os.path.realpath(os.path.join(workdir, line[len("gitdir:"):].strip()))
    places = [gitdir]
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as f:
            places.append(os.path.realpath(os.path.join(gitdir, f.read().strip())))
    except OSError:
        pass
    for place in places:
        if _inside(place, workdir) and os.path.isdir(place) and place not in found:
            found.append(place)
    return found


def bwrap_command(argv: list[str], *, bwrap: str, python: str, network: bool,
                  workdir: str | None, cwd: str | None, tmp_bytes: int | None,
                  keep_fds: tuple[int, ...] = (), seccomp_fd: int | None = None,
                  writable: tuple[str, ...] = ()) -> list[str]:
    """The command line that runs ``argv`` in the sandbox described in the module
    docstring.

    Args:
        argv: the worker's command (``[python, "-m", ...]``).
        bwrap: the path of ``bwrap`` (:func:`find_bwrap`).
        python: the interpreter in ``argv`` (its installation is bound read-only).
        network: keep the host's network (no new network namespace).
        workdir: the folder bound read-write (absolute, symbolic links resolved), or None.
        cwd: the caller's folder: the worker starts there when the sandbox's uid can
            read it through the read-only ``/`` (outside the homes and ``/tmp``), else in
            the sandbox's ``/tmp``; never bound.  Ignored with ``workdir``.
        tmp_bytes: size of each private ``tmpfs`` in bytes (None: bwrap's default, half
            the memory).
        keep_fds: descriptors the worker inherits (bwrap passes them through).
        seccomp_fd: a descriptor holding the seccomp filter's BPF
            (:func:`~rlm_kernel.executors.syscall_filter.filter_fd`), loaded by bwrap right
            before it runs ``argv``; None: no filter.
        writable: more folders bound read-write at their own paths (absolute; a
            host's report folder the command writes into), after ``workdir``.
    """
    uid = SANDBOX_UID if os.getuid() == 0 else os.getuid()
    gid = SANDBOX_UID if os.getuid() == 0 else os.getgid()
    cmd = [bwrap, "--unshare-all", "--unshare-user", "--uid", str(uid), "--gid", str(gid),
           "--disable-userns", "--cap-drop", "ALL", "--die-with-parent", "--new-session",
           "--hostname", "rlm-sandbox"]
    if network:
        cmd.append("--share-net")
    cmd += ["--ro-bind", "/", "/", "--proc", "/proc"]
    for path in PROC_READ_ONLY:  # the host's: they show the viewer's own namespaces
        if os.path.exists(path):
            cmd += ["--ro-bind", path, path]
    for path in PROC_HIDDEN:
        if os.path.exists(path):
            cmd += ["--ro-bind", "/dev/null", path]
    cmd += ["--dev", "/dev"]
    for folder in _PRIVATE:
        if os.path.isdir(folder) and not os.path.islink(folder):
            if tmp_bytes:
                cmd += ["--size", str(int(tmp_bytes))]
            cmd += ["--perms", "1777", "--tmpfs", folder]
    # bubblewrap's /dev is a tmpfs of its own (half the memory): its device nodes work
    # read-only, and nothing can be stored there (/dev/shm is its own mount above)
    cmd += ["--remount-ro", "/dev"]
    homes = _homes()
    for home in homes:
        cmd += ["--tmpfs", home]
    read_only = _read_only_folders(python)
    for folder in read_only:
        cmd += ["--ro-bind", folder, folder]
    # a home inside a folder bound back (a test's $HOME in a venv's folder) is hidden
    # again before the working folder is bound, so that one inside that home is reached
    rehidden = [h for h in homes if any(_inside(h, b) and h != b for b in read_only)]
    for home in rehidden:
        cmd += ["--tmpfs", home]
    if workdir is not None:
        cmd += ["--bind", workdir, workdir]
        inner = [h for h in homes if _inside(h, workdir) and h != workdir]
        for home in inner:  # a home inside the working folder stays hidden
            cmd += ["--tmpfs", home]
        rehidden += [h for h in inner if h not in rehidden]
        for path in git_metadata(workdir):  # what git runs outside the wall
            cmd += ["--ro-bind", path, path]
        for path in installation_in(workdir, python):  # what the host imports
            cmd += ["--ro-bind", path, path]
    for path in writable:
        cmd += ["--bind", path, path]
    bound = read_only + ([workdir] if workdir else [])
    for home in homes:  # credentials stay hidden where a bound folder holds them
        for name in HIDDEN_IN_HOME:
            path = os.path.join(home, name)
            if not any(_inside(path, b) for b in bound) or home in rehidden or \
                    (workdir is not None and _inside(workdir, path)):
                continue
            if os.path.isdir(path):
                cmd += ["--tmpfs", path, "--remount-ro", path]
            elif os.path.isfile(path):
                cmd += ["--ro-bind", "/dev/null", path]
    for home in homes:  # the hidden homes' own tmpfs: nothing written there either
        cmd += ["--remount-ro", home]
    cmd += ["--chdir", workdir or _start_folder(cwd, homes)]
    for fd in keep_fds:
        os.set_inheritable(fd, True)
    if seccomp_fd is not None:
        os.set_inheritable(seccomp_fd, True)
        cmd += ["--seccomp", str(seccomp_fd)]
    return [*cmd, "--", *argv]


def _start_folder(cwd: str | None, homes: list[str]) -> str:
    """Where the worker starts without a working folder: the caller's folder ``cwd`` when
    the sandbox's uid can read it through the read-only ``/`` as any other path (outside
    the homes and the private folders, every folder on the way searchable and ``cwd``
    itself listable by that uid's mode bits), else the sandbox's own ``/tmp``.  Nothing
    is bound for it."""
    if not cwd or not os.path.isdir(cwd):
        return "/tmp"
    real = os.path.realpath(cwd)
    if any(_inside(real, h) for h in homes + list(_PRIVATE)):
        return "/tmp"
    if os.getuid() == 0:
        uid = host_uid()
        readable = launcher.blocking_folder(real, uid, uid) is None and \
            launcher.allowed(real, uid, uid, read=True)
    else:
        readable = os.access(real, os.R_OK | os.X_OK)
    return real if readable else "/tmp"


# -- the host uid of a root caller's sandbox -----------------------------------------------
_picked: dict[str, int] = {}


def _id_ranges(kind: str) -> list[tuple[int, int]]:
    """``(first, count)`` of each line of ``/proc/self/{kind}_map`` (ids usable here)."""
    try:
        lines = Path(f"/proc/self/{kind}_map").read_text().splitlines()
    except OSError:
        return [(0, 1 << 32)]
    return [(int(f[0]), int(f[2])) for f in (line.split() for line in lines) if len(f) == 3]


def _overflow_ids() -> set[int]:
    found = {65534}
    for name in ("overflowuid", "overflowgid"):
        try:
            found.add(int(Path(f"/proc/sys/kernel/{name}").read_text()))
        except (OSError, ValueError):
            pass
    return found


def _mapped(number: int, ranges: list[tuple[int, int]]) -> bool:
    return any(first <= number < first + count for first, count in ranges)


def _unused(number: int) -> bool:
    """No account and no group has this id."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(number)
            return False
        except KeyError:
            pass
    return True


def host_uid() -> int:
    """The host uid (also the gid) a root caller's sandbox runs as: the
    :data:`HOST_UID_VARIABLE` environment variable (``RLM_SANDBOX_UID``) when set, else
    :data:`DEFAULT_HOST_UID` when this process's user namespace maps it and no account or
    group uses it, else the highest such id of the mapped ranges (root in a rootless
    container has 65,536).  Never 0 nor the overflow uid (``nobody``, 65534), whose
    files would be the sandbox's own.

    Raises:
        SandboxUnavailable: the variable is not a usable id, or no id is free (the message
            says what to set).
    """
    value = os.environ.get(HOST_UID_VARIABLE, "").strip()
    if value in _picked:
        return _picked[value]
    uids, gids = _id_ranges("uid"), _id_ranges("gid")
    refused = _overflow_ids() | {0, 65535, 4294967295}
    if value:
        try:
            number = int(value)
        except ValueError:
            number = -1
        if number < 0 or number in refused or not (_mapped(number, uids)
                                                     and _mapped(number, gids)):
            raise SandboxUnavailable(
                f"{HOST_UID_VARIABLE}={value!r} is not a uid the sandbox can run as: it must "
                f"be a number mapped in /proc/self/uid_map and gid_map, neither 0 nor "
                f"{sorted(refused - {0})}")
        _picked[value] = number
        return number
    checked = 0
    candidates = [DEFAULT_HOST_UID]
    for first, count in sorted(uids, key=lambda r: r[0] + r[1], reverse=True):
        top = min(first + count - 1, (1 << 31) - 1)
        candidates += range(top, max(first, 1000) - 1, -1)[:500]
    for number in candidates:
        checked += 1
        if number not in refused and _mapped(number, uids) and _mapped(number, gids) \
                and _unused(number):
            _picked[value] = number
            return number
    raise SandboxUnavailable(
        f"no unused unprivileged uid is mapped here for the sandbox ({checked} tried): set "
        f"{HOST_UID_VARIABLE} to a uid that no one else uses, mapped in /proc/self/uid_map")


def launcher_command(*, reach: list[str], workdir: str | None,
                     cgroups: list[Path]) -> list[str]:
    """The prefix that starts bubblewrap through :mod:`.launcher` (a root caller only):
    the sandbox runs as :func:`host_uid`, the folders of ``reach`` reachable to it,
    ``workdir`` writable to it through an idmapped mount, in ``cgroups``.

    Args:
        reach: folders bound read-only in the sandbox (absolute).
        workdir: the folder bound read-write, or None.
        cgroups: cgroup folders to join before dropping root.

    Raises:
        SandboxUnavailable: no host uid (see :func:`host_uid`).
    """
    uid = host_uid()
    config: dict[str, object] = {"uid": uid, "gid": uid, "reach": reach,
                                 "cgroups": [str(c) for c in cgroups], "workdir": workdir}
    if workdir is not None:
        info = os.stat(workdir)
        config["owner"] = [info.st_uid, info.st_gid]
    return [sys.executable, "-I", "-S", LAUNCHER, json.dumps(config), "--"]


def limits_command(memory: int | None, nproc: int | None) -> list[str]:
    """A prefix that lowers the ``resource`` limits of everything after it (util-linux's
    ``prlimit``, which sets its own limits and execs the rest of the command line): no
    core dumps, ``RLIMIT_AS`` of ``memory`` bytes and ``RLIMIT_NPROC`` of ``nproc``
    processes when given, soft and hard.  Set before the sandbox starts, they hold
    whatever runs in it (the worker lowers them again itself; without
    ``CAP_SYS_RESOURCE`` nothing in the sandbox can raise them), and a root caller's
    sandbox gets them without the host needing that capability over another uid's
    processes.  Empty when ``prlimit`` is not installed: the worker's own then hold.
    """
    found = shutil.which("prlimit")
    if found is None:
        log.warning("prlimit (util-linux) is not installed: the sandbox's resource limits "
                    "are set by the worker alone")
        return []
    cmd = [found, "--core=0:0"]
    if memory:
        cmd.append(f"--as={int(memory)}:{int(memory)}")
    if nproc:
        cmd.append(f"--nproc={int(nproc)}:{int(nproc)}")
    return [*cmd, "--"]


def wall_command(argv: list[str], *, bwrap: str, python: str, network: bool,
                 workdir: str | None, cwd: str | None, tmp_bytes: int | None,
                 keep_fds: tuple[int, ...], seccomp_fd: int | None,
                 cgroups: Cgroups, writable: tuple[str, ...] = ()) -> list[str]:
    """The whole command that runs ``argv`` behind the wall: :func:`bwrap_command`,
    started (a root caller) through :func:`launcher_command` as an unprivileged host
    uid, or (an ordinary user) as the caller, after joining ``cgroups``.  Arguments as
    :func:`bwrap_command`'s.

    Raises:
        SandboxUnavailable: as :func:`host_uid`.
    """
    command = bwrap_command(argv, bwrap=bwrap, python=python, network=network,
                            workdir=workdir, cwd=cwd, tmp_bytes=tmp_bytes, keep_fds=keep_fds,
                            seccomp_fd=seccomp_fd, writable=writable)
    if os.getuid() != 0:
        return cgroups.join_command() + command
    return launcher_command(reach=_read_only_folders(python, everywhere=True),
                            workdir=workdir, cgroups=cgroups.folders) + command


# -- cgroups ------------------------------------------------------------------------------
@dataclass
class Cgroups:
    """The cgroups the worker runs in (folders of the host's cgroup file system)."""

    folders: list[Path] = field(default_factory=list)
    pids: Path | None = None
    memory: Path | None = None

    def join_command(self) -> list[str]:
        """A ``sh -c`` prefix that moves the process into every cgroup, then execs the
        rest of the command line."""
        if not self.folders:
            return []
        script = "".join(f'echo $$ > "${i + 1}/cgroup.procs" || exit 71; '
                         for i in range(len(self.folders)))
        script += f'shift {len(self.folders)}; exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *map(str, self.folders)]

    def processes(self) -> list[int]:
        """Pids of the processes in the worker's cgroups now."""
        found: set[int] = set()
        for folder in self.folders:
            try:
                found.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
        return sorted(found)

    def pids_refused(self) -> int:
        """How many forks the process limit refused so far."""
        if self.pids is None:
            return 0
        try:
            for line in (self.pids / "pids.events").read_text().splitlines():
                if line.startswith("max "):
                    return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return 0

    def kill(self) -> None:
        """SIGKILL every process of the cgroups until they are empty."""
        for _ in range(200):
            pids = self.processes()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)
        log.warning("processes left in %s after repeated kills", self.folders)

    def remove(self) -> None:
        """Kill what is left and remove the folders."""
        self.kill()
        for folder in self.folders:
            for _ in range(100):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                log.warning("could not remove the cgroup %s", folder)
        self.folders = []


def _own_cgroup(controller: str) -> Path | None:
    """The folder of this process's cgroup holding ``controller`` (v1 hierarchy, else
    the v2 unified one when it offers the controller)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    unified: Path | None = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return Path("/sys/fs/cgroup") / controller / path.lstrip("/")
        if controllers == "":
            unified = Path("/sys/fs/cgroup") / path.lstrip("/")
    if unified is not None:
        try:
            offered = (unified / "cgroup.subtree_control").read_text().split()
        except OSError:
            offered = []
        if controller in offered:
            return unified
    return None


def _sweep(base: Path) -> None:
    """Remove the empty cgroups of hosts that are gone (a host killed with ``SIGKILL``
    could not remove its own)."""
    try:
        entries = [e for e in base.iterdir() if e.name.startswith("rlm-worker-")]
    except OSError:
        return
    for entry in entries:
        pid = entry.name.split("-")[2]
        try:
            young = time.time() - entry.stat().st_mtime < 60  # being set up, perhaps
        except OSError:
            continue
        if pid.isdigit() and not young and not os.path.exists(f"/proc/{pid}"):
            try:
                entry.rmdir()  # refused while a process is still in it
            except OSError:
                pass


def make_cgroups(max_pids: int | None, memory_bytes: int | None) -> Cgroups:
    """New cgroups under the host's own that hold the worker to ``max_pids`` processes
    and ``memory_bytes`` of memory; each is left out where the host may not make it
    (not root, a read-only cgroup file system).  Never raises."""
    made = Cgroups()
    name = f"rlm-worker-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    for controller, limit in (("pids", max_pids), ("memory", memory_bytes)):
        if limit is None:
            continue
        base = _own_cgroup(controller)
        if base is None:
            continue
        _sweep(base)
        folder = base / name
        try:
            folder.mkdir(exist_ok=folder in made.folders)
        except OSError:
            continue
        files = {"pids": ["pids.max"],
                 "memory": ["memory.max", "memory.limit_in_bytes", "memory.swap.max"]}
        written = False
        for file in files[controller]:
            if (folder / file).exists():
                try:
                    (folder / file).write_text("0" if file == "memory.swap.max" else str(limit))
                    written = written or file != "memory.swap.max"
                except OSError:
                    pass
        if not written:
            try:
                folder.rmdir()
            except OSError:
                pass
            continue
        if folder not in made.folders:
            made.folders.append(folder)
        setattr(made, controller, folder)
    return made


def process_tree(root: int) -> list[int]:
    """``root`` and its descendants now (``/proc/PID/task/TID/children``)."""
    found: list[int] = []
    todo = [root]
    while todo and len(found) < 100_000:
        pid = todo.pop()
        found.append(pid)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                todo += [int(c) for c in
                         Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
            except (OSError, ValueError):
                pass
    return found
