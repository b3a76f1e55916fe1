"""The sandbox's launcher for a root caller: it puts bubblewrap on an unprivileged host uid.

Run by the host (root) as ``python -I -S launcher.py CONFIG -- BWRAP ARGS...`` (standard
library only; it imports nothing of rlm_kernel and runs no ``site``), it:

1. makes a private mount namespace (propagation ``private``: nothing it mounts reaches
   the host);
2. over each folder the sandbox's host uid cannot traverse that holds something the
   sandbox needs (``/root`` holding the Python installation, a ``0700`` checkout ...),
   mounts an empty ``tmpfs`` (mode 0755) and binds back, read-only as they are, only
   the trees the sandbox needs, at their own paths;
3. binds the working folder back *idmapped* (``mount_setattr(MOUNT_ATTR_IDMAP)``,
   Linux 5.12+): its owner's files appear owned by the host uid, and what that uid
   writes there lands on disk owned by the folder's owner, as podman's ``:idmap``
   volumes do; a read-only folder whose own mode shuts the host uid out (the caller's
   working folder in a ``0700`` temporary folder) is bound idmapped and read-only the
   same way, so the sandbox reads it as its owner would; every tree it binds is
   ``nosuid`` and ``nodev`` in this namespace (a setuid file on disk is the seccomp
   filter's to prevent: :mod:`.syscall_filter`);
4. moves itself into the worker's cgroups;
5. drops to the host uid: ``setgroups([])``, ``setresgid``, ``setresuid``,
   ``PR_SET_NO_NEW_PRIVS``;
6. executes bubblewrap, which then runs unprivileged, as it does for an ordinary user:
   its user namespace maps the sandbox's uid onto the host uid, never onto root.

CONFIG is one JSON object: ``uid``, ``gid`` (the host uid and gid), ``reach`` (folders
the sandbox binds read-only), ``workdir`` (or null) with ``owner`` (``[uid, gid]`` of
its owner on disk), ``cgroups`` (folders whose ``cgroup.procs`` it joins).

Any failure ends it with status :data:`EXIT_FAILED` and one line on stderr that says
what to do (a file system that refuses idmapped mounts, a folder the host uid cannot
read); it never runs bubblewrap as root.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import stat
import struct
import sys

EXIT_FAILED = 73
"""Exit status of a launcher that could not set the sandbox up (message on stderr)."""
MARK = "rlm sandbox launcher: "
"""How each line the launcher writes on stderr begins."""

_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000
_OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC, _AT_RECURSIVE, _AT_EMPTY_PATH = 1, 0o2000000, 0x8000, 0x1000
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4
_MOUNT_ATTR_IDMAP = 0x00100000
_MOVE_MOUNT_F_EMPTY_PATH, _AT_FDCWD = 0x4, -100
_PR_SET_NO_NEW_PRIVS = 38
# open_tree, move_mount and mount_setattr have one number on every architecture
# (the unified table from 424 on, include/uapi/asm-generic/unistd.h)
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class Failed(Exception):
    """The sandbox cannot be set up; the message says what to do."""


def _check(result: int, what: str) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise Failed(f"{what}: {os.strerror(number)} (errno {number})")
    return result


def allowed(path: str, uid: int, gid: int, read: bool = False) -> bool:
    """Whether ``uid`` (group ``gid``, no other groups) may search folder ``path`` (and,
    with ``read``, list it) by its mode bits (ACLs are not read: a folder they open is
    covered all the same)."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    if info.st_uid == uid:
        bits = stat.S_IXUSR | (stat.S_IRUSR if read else 0)
    elif info.st_gid == gid:
        bits = stat.S_IXGRP | (stat.S_IRGRP if read else 0)
    else:
        bits = stat.S_IXOTH | (stat.S_IROTH if read else 0)
    return info.st_mode & bits == bits


def blocking_folder(path: str, uid: int, gid: int) -> str | None:
    """The outermost folder above ``path`` (``path`` excluded) that ``uid`` cannot
    traverse, or None."""
    parts = [p for p in path.split("/") if p]
    current = "/"
    for part in parts[:-1]:
        current = os.path.join(current, part)
        if not allowed(current, uid, gid):
            return current
    return None


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _user_namespace(owner: tuple[int, int], uid: int, gid: int) -> int:
    """An fd of a new user namespace whose maps send ``owner`` to ``uid``/``gid`` (the
    idmapped mount's mapping); its only process is gone when this returns."""
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(ready_r)
            os.close(hold_w)
            ok = _libc.unshare(_CLONE_NEWUSER) == 0
            os.write(ready_w, b"1" if ok else b"0")
            os.read(hold_r, 1)
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(hold_r)
    try:
        if os.read(ready_r, 1) != b"1":
            raise Failed("cannot make a user namespace for the working folder's idmapped "
                         "mount (unshare(CLONE_NEWUSER) refused)")
        with open(f"/proc/{pid}/uid_map", "w") as f:
            f.write(f"{owner[0]} {uid} 1\n")
        with open(f"/proc/{pid}/gid_map", "w") as f:
            f.write(f"{owner[1]} {gid} 1\n")
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(ready_r)
        os.close(hold_w)
        os.waitpid(pid, 0)


def _clone_tree(path: str) -> int:
    """A detached copy of the mount tree at ``path`` (``open_tree(OPEN_TREE_CLONE)``)."""
    return _check(_libc.syscall(_SYS_OPEN_TREE, _AT_FDCWD, path.encode(),
                                _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC | _AT_RECURSIVE),
                  f"cannot copy the mount of {path}")


def _set_attributes(tree: int, flags: int, userns: int = 0) -> int:
    """``mount_setattr`` on the detached tree ``tree`` (every mount in it): 0, or the
    error number."""
    attr = struct.pack("QQQQ", flags, 0, 0, userns)
    buf = ctypes.create_string_buffer(attr, len(attr))
    if _libc.syscall(_SYS_MOUNT_SETATTR, tree, b"", _AT_EMPTY_PATH | _AT_RECURSIVE, buf,
                     ctypes.c_size_t(len(attr))) < 0:
        return ctypes.get_errno()
    return 0


def _harden(tree: int) -> None:
    """``nosuid`` and ``nodev`` on a tree bound for the sandbox (bubblewrap's own binds
    are so too); a kernel before 5.12 (no ``mount_setattr``) leaves it to bubblewrap."""
    number = _set_attributes(tree, _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV)
    if number not in (0, errno.ENOSYS):
        raise Failed(f"cannot make a bound folder nosuid: {os.strerror(number)}")


def _idmap(tree: int, userns: int, path: str, read_only: bool) -> None:
    flags = _MOUNT_ATTR_IDMAP | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV | (
        _MOUNT_ATTR_RDONLY if read_only else 0)
    number = _set_attributes(tree, flags, userns)
    if number:
        what = "the folder" if read_only else "the working folder"
        if number == errno.EPERM:
            raise Failed(
                f"this root may not make idmapped mounts (the root of a user namespace, as "
                f"in a rootless container, is not root of the machine), and as root model "
                f"code reaches {what} {path} through one: run rlm as an ordinary user")
        raise Failed(
            f"{what} {path} is on a file system that refuses idmapped mounts "
            f"({os.strerror(number)}); as root, model code runs as an unprivileged host "
            f"uid and reaches {what} through an idmapped mount (Linux 5.12 or "
            f"newer; ext4, xfs, btrfs, tmpfs from Linux 6.3 ...).  Use a folder on "
            f"such a file system, or run rlm as an ordinary user")


def _move(tree: int, path: str) -> None:
    _check(_libc.syscall(_SYS_MOVE_MOUNT, tree, b"", _AT_FDCWD, path.encode(),
                         _MOVE_MOUNT_F_EMPTY_PATH), f"cannot mount {path}")


def prepare(config: dict) -> None:
    """Steps 1-5 of the module docstring, in this process (root, single-threaded).

    Raises:
        Failed: a step failed (the message says what to do).
    """
    uid, gid = int(config["uid"]), int(config["gid"])
    if uid == 0 or gid == 0:
        raise Failed("refusing to run the sandbox as host uid 0")
    workdir = config.get("workdir")
    reach = [str(p) for p in config.get("reach", []) if os.path.isdir(str(p))]
    _check(_libc.unshare(_CLONE_NEWNS), "cannot make a mount namespace")
    _check(_libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None),
           "cannot make the mounts private")
    targets = sorted({*reach, *([workdir] if workdir else [])}, key=len)
    # the working folder, and each read-only folder the host uid cannot list, idmapped
    idmapped: dict[str, tuple[int, int]] = {}
    for target in targets:
        if target == workdir:
            idmapped[target] = (int(config["owner"][0]), int(config["owner"][1]))
        elif not allowed(target, uid, gid, read=True):
            info = os.stat(target)
            idmapped[target] = (info.st_uid, info.st_gid)
    # a folder inside an idmapped one is reached through it
    served = {t for t in targets if t not in idmapped and any(_inside(t, r) for r in idmapped)}
    blocked = {t: blocking_folder(t, uid, gid) for t in targets if t not in served}
    covers = sorted({b for b in blocked.values() if b}, key=len)
    covers = [c for i, c in enumerate(covers) if not any(_inside(c, o) for o in covers[:i])]
    trees: dict[str, int] = {}
    userns: dict[tuple[int, int], int] = {}
    try:
        for target, owner in idmapped.items():
            if owner not in userns:
                userns[owner] = _user_namespace(owner, uid, gid)
            trees[target] = _clone_tree(target)
            _idmap(trees[target], userns[owner], target, read_only=target != workdir)
        for target in targets:  # outermost first: a tree holds the ones inside it
            if target not in trees and blocked.get(target) and not any(
                    _inside(target, t) for t in trees if t not in idmapped):
                trees[target] = _clone_tree(target)
                _harden(trees[target])
        for cover in covers:
            _check(_libc.mount(b"tmpfs", cover.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                               b"mode=0755,size=1m,nr_inodes=4096"),
                   f"cannot cover {cover}")
        for target in sorted(trees, key=len):
            os.makedirs(target, 0o755, exist_ok=True)
            _move(trees[target], target)
    finally:
        for fd in [*trees.values(), *userns.values()]:
            os.close(fd)
    for folder in config.get("cgroups", []):
        try:
            with open(os.path.join(folder, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError as exc:
            raise Failed(f"cannot join the cgroup {folder}: {exc}") from exc
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "cannot set no_new_privs")
    for target in targets:
        mode = os.R_OK | os.X_OK | (os.W_OK if target == workdir else 0)
        if not os.access(target, mode):
            what = "write" if target == workdir else "read"
            raise Failed(f"the sandbox's host uid {uid} cannot {what} {target}: give others "
                         f"that right (chmod o+rx), choose another uid with RLM_SANDBOX_UID, "
                         f"or run rlm as an ordinary user")


def main(argv: list[str]) -> None:
    """``launcher.py CONFIG -- BWRAP ARGS...``: prepare, then execute bubblewrap."""
    try:
        if len(argv) < 4 or argv[2] != "--":
            raise Failed("usage: launcher.py CONFIG -- BWRAP ARGS...")
        if os.geteuid() != 0:
            raise Failed("the launcher is for a root caller only")
        prepare(json.loads(argv[1]))
        os.execv(argv[3], argv[3:])
    except (Failed, OSError, ValueError, KeyError, TypeError) as exc:
        sys.stderr.write(f"{MARK}{exc}\n")
        sys.stderr.flush()
        os._exit(EXIT_FAILED)


if __name__ == "__main__":
    main(sys.argv)
