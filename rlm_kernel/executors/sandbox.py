"""The isolated executor's wall: the worker's command line under bubblewrap, and its cgroup.

`bubblewrap <https://github.com/containers/bubblewrap>`_ (``bwrap``; Debian's and
Ubuntu's package ``bubblewrap``, also in Fedora, Arch and Alpine) is the sandbox of
Flatpak and of Linux agent sandboxes.  :func:`bwrap_command` asks it for:

* a new user namespace whose only uid is unprivileged (:data:`SANDBOX_UID` when the
  caller is root, else the caller's own), with every capability dropped
  (``--cap-drop ALL``) and no further user namespaces (``--disable-userns``), whatever
  the caller's uid: root in a container is the common case;
* new PID, IPC, UTS, cgroup and (unless the network is asked for) network namespaces,
  with a fresh ``/proc`` of its own PID namespace: model code sees no process of the
  host, and bwrap is PID 1 there (it reaps orphans; when it dies, the kernel kills
  everything left in the namespace);
* ``--die-with-parent`` (the sandbox ends with the host) and ``--new-session`` (no
  ``TIOCSTI`` on the host's terminal);
* the whole file system read-only, with private empty ``tmpfs`` mounts on ``/tmp``,
  ``/var/tmp``, ``/dev/shm`` and ``/run`` (so no path-named socket of the host is
  reachable there), the users' homes (``/root``, ``/home`` and ``$HOME``) hidden, and
  then bound back read-only: the Python installation, every folder of ``sys.path``
  and this package, wherever they live (a venv under ``/tmp`` too), and the working
  folder of the host when it holds no home; the folders of :data:`HIDDEN_IN_HOME`
  stay hidden wherever they fall;
* the working folder (``workdir``), when given, bound read-write: the only place
  model code may write that outlives it.

Processes and memory: where the host may make cgroups (root with a writable cgroup
file system), :func:`make_cgroups` makes a ``pids`` and a ``memory`` cgroup and the
worker starts inside them (the cgroup file system is read-only in the sandbox, and the
worker has no capability, so it cannot lift them).  Elsewhere the worker's
``RLIMIT_NPROC`` and ``RLIMIT_AS`` hold (an unprivileged process cannot raise a hard
limit), and the host watches the sandbox's memory (see
:class:`~rlm_kernel.executors.isolated.IsolatedExecutor`).
"""

from __future__ import annotations

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

__all__ = ["WorkerError", "SandboxUnavailable", "bwrap_command", "find_bwrap", "Cgroups", "make_cgroups",
           "HIDDEN_IN_HOME", "SANDBOX_UID", "PACKAGE_ROOT", "process_tree"]

log = logging.getLogger(__name__)

SANDBOX_UID = 65534
"""The uid (and gid) model code runs as when the host is root: ``nobody``."""
HIDDEN_IN_HOME = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config/gcloud",
                  ".password-store", ".netrc", ".git-credentials", ".pypirc")
"""Files and folders of a home that hold keys and credentials: hidden in the sandbox
even where a folder around them is bound back."""
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
"""The folder holding the ``rlm_kernel`` package (bound read-only in the sandbox)."""
_PRIVATE = ("/tmp", "/var/tmp", "/dev/shm", "/run")
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


def _read_only_folders(python: str, cwd: str | None) -> list[str]:
    """Folders bound back read-only after the homes and /tmp are hidden: the Python
    installation, ``sys.path``, this package, the worker's working folder."""
    wanted = [PACKAGE_ROOT, sys.prefix, sys.base_prefix, sys.exec_prefix,
              os.path.dirname(python), os.path.dirname(os.path.realpath(python)),
              os.path.dirname(os.path.dirname(os.path.realpath(python)))]
    wanted += [p for p in sys.path if p]
    homes = _homes()
    if cwd and not any(_inside(h, os.path.realpath(cwd)) for h in homes + list(_PRIVATE)):
        wanted.append(cwd)  # not a home, a private folder, nor a folder that holds one
    found: list[str] = []
    for path in wanted:
        real = os.path.realpath(path)
        if real in ("/", "") or not os.path.exists(real):
            continue
        if os.path.isfile(real):  # a zip on sys.path
            real = os.path.dirname(real)
        hidden = _PRIVATE + tuple(homes)
        if any(_inside(h, real) for h in _PRIVATE + ("/root", "/home")):
            continue  # a private folder or the homes' own (a script's folder in /tmp ...)
        if real in homes:
            continue
        if any(_inside(real, p) for p in hidden):
            found.append(real)  # a home inside it is hidden again (bwrap_command)
    found.sort(key=len)
    kept: list[str] = []
    for path in found:  # a folder inside one already bound needs no bind of its own
        if not any(_inside(path, k) for k in kept):
            kept.append(path)
    return kept


def bwrap_command(argv: list[str], *, bwrap: str, python: str, network: bool,
                  workdir: str | None, cwd: str | None, tmp_bytes: int | None,
                  keep_fds: tuple[int, ...] = ()) -> list[str]:
    """The command line that runs ``argv`` in the sandbox described in the module
    docstring.

    Args:
        argv: the worker's command (``[python, "-m", ...]``).
        bwrap: the path of ``bwrap`` (:func:`find_bwrap`).
        python: the interpreter in ``argv`` (its installation is bound read-only).
        network: keep the host's network (no new network namespace).
        workdir: the folder bound read-write (absolute, symbolic links resolved), or None.
        cwd: the folder the worker starts in (bound read-only when it holds no home).
        tmp_bytes: size of each private ``tmpfs`` in bytes (None: bwrap's default, half
            the memory).
        keep_fds: descriptors the worker inherits (bwrap passes them through).
    """
    uid = SANDBOX_UID if os.getuid() == 0 else os.getuid()
    gid = SANDBOX_UID if os.getuid() == 0 else os.getgid()
    cmd = [bwrap, "--unshare-all", "--unshare-user", "--uid", str(uid), "--gid", str(gid),
           "--disable-userns", "--cap-drop", "ALL", "--die-with-parent", "--new-session",
           "--hostname", "rlm-sandbox"]
    if network:
        cmd.append("--share-net")
    cmd += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    for folder in _PRIVATE:
        if os.path.isdir(folder) and not os.path.islink(folder):
            if tmp_bytes:
                cmd += ["--size", str(int(tmp_bytes))]
            cmd += ["--perms", "1777", "--tmpfs", folder]
    homes = _homes()
    for home in homes:
        cmd += ["--tmpfs", home]
    for folder in _read_only_folders(python, cwd):
        cmd += ["--ro-bind", folder, folder]
    if workdir is not None:
        cmd += ["--bind", workdir, workdir]
    bound = _read_only_folders(python, cwd) + ([workdir] if workdir else [])
    rehidden = [h for h in homes  # a home inside a folder bound back (a test's $HOME)
                if any(_inside(h, b) and h != b for b in bound)]
    for home in rehidden:
        cmd += ["--tmpfs", home]
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
    return [*cmd, "--", *argv]


def _start_folder(cwd: str | None, homes: list[str]) -> str:
    if cwd and os.path.isdir(cwd):
        real = os.path.realpath(cwd)
        if not any(_inside(h, real) for h in homes + list(_PRIVATE)) or real in _PRIVATE:
            return real
    return "/tmp"


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
    found, todo = [], [root]
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
