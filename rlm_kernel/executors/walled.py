"""One command run behind the isolated executor's wall, outside any REPL: what the host
runs on code model code wrote after its run has ended (a rollout's reward command,
:mod:`rlm_kernel.batch.rewards`).

The wall is :func:`~rlm_kernel.executors.sandbox.wall_command`'s, as for the isolated
worker that runs ``bash``: bubblewrap's namespaces (no network, a private ``/proc``, ``/tmp``
and homes), the whole file system read-only but the working folder, an unprivileged uid
(a root caller's command runs as :func:`~rlm_kernel.executors.sandbox.host_uid` through
the launcher), no capability, no core dump.  Unlike the worker, the command gets no
seccomp filter (its descriptor cannot pass :func:`~rlm_kernel.executors.commands.run_command`,
which closes every descriptor) and no cgroup: its time limit is the caller's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from .sandbox import (
    Cgroups,
    SandboxUnavailable,
    check_workdir,
    find_bwrap,
    host_uid,
    interpreter_path,
    limits_command,
    wall_command,
)

__all__ = ["walled_command", "SandboxUnavailable"]


def walled_command(argv: Sequence[str], *, workdir: str | os.PathLike[str],
                   writable: Sequence[str] = (), network: bool = False) -> list[str]:
    """The command line that runs ``argv`` behind the wall, ``workdir`` its only
    writable folder beside ``writable``.

    Args:
        argv: the command (its interpreter, if Python, should be this one: the
            installation bound read-only is this interpreter's).
        workdir: the folder bound read-write; the command starts there.
        writable: more folders bound read-write (a host report folder); for a root
            caller each is given to the sandbox's host uid (``chown``) so it can write
            there.
        network: keep the host's network.

    Raises:
        SandboxUnavailable: bubblewrap is not installed, or no host uid is usable (the
            message says what to do).
        ValueError: ``workdir`` lies inside the Python installation or this package.
    """
    bwrap = find_bwrap()
    python = interpreter_path(sys.executable)
    folder = os.path.realpath(os.fspath(workdir))
    check_workdir(folder, python)
    extra = tuple(os.path.realpath(p) for p in writable)
    if os.getuid() == 0:
        uid = host_uid()
        for path in extra:
            os.chown(path, uid, uid)
    return limits_command(None, None) + wall_command(
        list(argv), bwrap=bwrap, python=python, network=network, workdir=folder, cwd=folder,
        tmp_bytes=None, keep_fds=(), seccomp_fd=None, cgroups=Cgroups(), writable=extra)
