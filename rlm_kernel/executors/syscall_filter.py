"""The isolated worker's system call filter (seccomp), in the spirit of Flatpak's.

bubblewrap loads it (``bwrap --seccomp FD``) as the last step before it runs the worker,
so the worker, every process model code starts (``subprocess``, ``fork``,
``multiprocessing``, the working folder's ``bash``) and nothing of the host's is under
it.  A filtered call fails with an error number (``EPERM``, ``ENOSYS`` where Flatpak
returns it so that C libraries fall back, ``EAFNOSUPPORT`` for socket families): model
code sees an :class:`OSError`, never a killed process.

The rules (:data:`RULES`) follow ``setup_seccomp`` of Flatpak's ``common/flatpak-run.c``
(its block list, the ``clone`` flag masks, ``clone3`` and the new mount API answered
with ``ENOSYS``, ``ioctl`` ``TIOCSTI``/``TIOCLINUX``, ``personality`` other than
``PER_LINUX``, the socket family allow list, the extra architectures) with, on top:
``io_uring``, ``bpf``, ``userfaultfd``, ``process_vm_readv``/``writev`` and every
``CLONE_NEW*`` flag (as the Linux sandbox of OpenAI's Codex CLI and Docker's default
profile deny them), and the calls Docker's default profile keeps for capabilities the
sandbox never has (``kexec``, modules, ``reboot``, ``swapon``, the clock, port I/O).

The filter is built with libseccomp (the system's ``libseccomp.so.2``, through
`pyseccomp <https://pypi.org/project/pyseccomp/>`_, a ctypes binding with the API of
libseccomp's own Python bindings), once per host process (:func:`filter_bpf`); each
sandbox gets it in a sealed ``memfd`` (:func:`filter_fd`).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket
import termios
import threading
from dataclasses import dataclass

__all__ = ["Rule", "RULES", "FilterUnavailable", "filter_bpf", "filter_fd", "unknown_calls",
           "denied_summary", "ALLOWED_SOCKET_FAMILIES"]

log = logging.getLogger(__name__)


class FilterUnavailable(RuntimeError):
    """libseccomp (or its Python binding) is missing or refused the filter; the message
    says what to install."""


@dataclass(frozen=True)
class Rule:
    """One rule of the filter.

    Attributes:
        syscall: the system call's name (libseccomp's, translated for each architecture).
        errno: the error number the call returns instead of running.
        family: what the rule keeps from model code, in words (for ``executor.limits``
            and ``docs/security.md``).
        arg: ``None`` (every call), or ``(index, op, a, b)``: the rule applies when the
            argument at ``index`` compares true (libseccomp's ``SCMP_CMP_*`` ``op``;
            for ``MASKED_EQ`` ``a`` is the mask and ``b`` the value).
    """

    syscall: str
    errno: int
    family: str
    arg: tuple[int, int, int, int] | None = None


# libseccomp's comparison operators (enum scmp_compare)
_NE, _EQ, _GE, _MASKED_EQ = 1, 4, 5, 7

_CLONE_NEW = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000,
              "CLONE_NEWUTS": 0x04000000, "CLONE_NEWIPC": 0x08000000,
              "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
              "CLONE_NEWNET": 0x40000000}
"""The namespace flags ``clone`` may carry (linux/sched.h; ``CLONE_NEWTIME`` is
``clone3``'s and ``unshare``'s only: in ``clone`` its bit is the exit signal's)."""

ALLOWED_SOCKET_FAMILIES = (socket.AF_UNSPEC, socket.AF_UNIX, socket.AF_INET, socket.AF_INET6,
                           socket.AF_NETLINK)
"""Socket families model code may open (Flatpak's allow list): every other one
(``AF_VSOCK``, which reaches the host of a VM whatever the network namespace,
``AF_PACKET``, ``AF_ALG`` ...) fails with ``EAFNOSUPPORT``."""

_PER_LINUX = 0
_CLONE_FLAGS_ARG = 1 if os.uname().machine.startswith("s390") else 0  # CLONE_BACKWARDS2


def _rules() -> tuple[Rule, ...]:
    """:data:`RULES` (see the module docstring for the sources)."""
    EPERM, ENOSYS = errno.EPERM, errno.ENOSYS  # noqa: N806 - the C names
    groups: list[tuple[str, int, tuple[str, ...]]] = [
        ("kernel keyrings", EPERM,
         ("keyctl", "add_key", "request_key")),
        ("io_uring", EPERM, ("io_uring_setup", "io_uring_enter", "io_uring_register")),
        ("perf_event_open, bpf", EPERM, ("perf_event_open", "bpf")),
        ("userfaultfd", EPERM, ("userfaultfd",)),
        # memory the host's watch cannot count without a cgroup: a System V segment no
        # process maps, a memfd in flight in a socket (ENOSYS: callers fall back to a file)
        ("System V shared memory", EPERM, ("shmget",)),
        ("memfd_create", ENOSYS, ("memfd_create", "memfd_secret")),
        ("ptrace, other processes' memory", EPERM,
         ("ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp",
          "pidfd_getfd")),
        ("new namespaces", EPERM, ("unshare", "setns")),
        ("mounts", EPERM, ("mount", "umount", "umount2", "pivot_root", "chroot")),
        ("mounts", ENOSYS, ("open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
                            "fspick", "mount_setattr")),
        ("new namespaces", ENOSYS, ("clone3",)),
        ("kexec, kernel modules", EPERM,
         ("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module")),
        ("files by handle", EPERM, ("name_to_handle_at", "open_by_handle_at")),
        ("syslog, acct, quotactl", EPERM,
         ("syslog", "uselib", "acct", "quotactl", "quotactl_fd")),
        ("NUMA memory policy", EPERM,
         ("move_pages", "mbind", "get_mempolicy", "set_mempolicy", "set_mempolicy_home_node",
          "migrate_pages")),
        ("modify_ldt, vm86", EPERM, ("modify_ldt", "vm86", "vm86old")),
        ("reboot, swap, clock, port I/O", EPERM,
         ("reboot", "swapon", "swapoff", "settimeofday", "clock_settime", "stime",
          "iopl", "ioperm", "vhangup", "lookup_dcookie")),
    ]
    rules = [Rule(name, number, family) for family, number, names in groups for name in names]
    rules += [Rule("clone", EPERM, "new namespaces", (_CLONE_FLAGS_ARG, _MASKED_EQ, flag, flag))
              for flag in _CLONE_NEW.values()]
    rules += [Rule("ioctl", EPERM, "ioctl TIOCSTI, TIOCLINUX",
                   (1, _MASKED_EQ, 0xFFFFFFFF, request))
              for request in (termios.TIOCSTI, getattr(termios, "TIOCLINUX", 0x541C))]
    rules.append(Rule("personality", EPERM, "personality but PER_LINUX", (0, _NE, _PER_LINUX, 0)))
    allowed = sorted(ALLOWED_SOCKET_FAMILIES)
    for call in ("socket", "socketpair"):
        last = -1
        for family in allowed:
            rules += [Rule(call, errno.EAFNOSUPPORT, "socket families but UNIX, IP, netlink",
                           (0, _EQ, refused, 0)) for refused in range(last + 1, family)]
            last = family
        rules.append(Rule(call, errno.EAFNOSUPPORT, "socket families but UNIX, IP, netlink",
                          (0, _GE, last + 1, 0)))
    return tuple(rules)


RULES: tuple[Rule, ...] = _rules()
"""Every rule of the filter; any call no rule matches is allowed."""

_lock = threading.Lock()
_built: tuple[bytes, tuple[str, ...]] | None = None


def _extra_arches(sc) -> list[int]:
    """The other ABIs this machine's kernel runs next to the native one (Flatpak's
    multiarch list, plus x32): their calls meet the same rules, not a killed process."""
    native = sc.system_arch()
    return {sc.Arch.X86_64: [sc.Arch.X86, sc.Arch.X32],
            sc.Arch.AARCH64: [sc.Arch.ARM]}.get(native, [])


def _build() -> tuple[bytes, tuple[str, ...]]:
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError, OSError) as exc:
        raise FilterUnavailable(
            f"the isolated executor filters the worker's system calls with libseccomp, "
            f"which cannot be loaded ({exc}): install libseccomp ('apt-get install "
            f"libseccomp2', 'dnf install libseccomp', 'pacman -S libseccomp', 'apk add "
            f"libseccomp') and the Python package pyseccomp (a dependency of rlm-kernel)"
        ) from exc
    flt = sc.SyscallFilter(sc.ALLOW)
    for arch in _extra_arches(sc):
        try:
            flt.add_arch(arch)
        except OSError as exc:  # EEXIST: already there
            if exc.errno != errno.EEXIST:
                log.debug("seccomp: architecture %#x not added: %s", arch, exc)
    unknown: list[str] = []
    for rule in RULES:
        number = sc.resolve_syscall(sc.Arch.NATIVE, rule.syscall)
        if number == -1:  # __NR_SCMP_ERROR: this libseccomp does not know the name
            unknown.append(rule.syscall)
            continue
        args = [sc.Arg(*rule.arg)] if rule.arg else []
        try:
            flt.add_rule(sc.ERRNO(rule.errno), number, *args)
        except OSError as exc:
            # EFAULT/EDOM: a call no architecture of the filter has (Flatpak logs these)
            if exc.errno not in (errno.EFAULT, errno.EDOM):
                raise FilterUnavailable(f"libseccomp refused the rule for {rule.syscall}: "
                                        f"{exc}") from exc
            log.debug("seccomp: %s not filtered here: %s", rule.syscall, exc)
    with os.fdopen(os.memfd_create("rlm-seccomp-export", os.MFD_CLOEXEC), "w+b") as out:
        flt.export_bpf(out)
        data = os.pread(out.fileno(), 1 << 20, 0)
    if not data or len(data) % 8:
        raise FilterUnavailable(f"libseccomp exported {len(data)} bytes of BPF")
    if unknown:
        log.warning("the worker's seccomp filter leaves these calls unfiltered: this "
                    "libseccomp does not know them: %s", ", ".join(sorted(set(unknown))))
    return data, tuple(sorted(set(unknown)))


def filter_bpf() -> bytes:
    """The filter as classic BPF (``struct sock_filter`` records, 8 bytes each), built
    on first use and kept for the life of the process.

    Raises:
        FilterUnavailable: libseccomp or pyseccomp is missing (the message names the
            packages), or libseccomp refused a rule.
    """
    global _built
    with _lock:
        if _built is None:
            _built = _build()
        return _built[0]


def unknown_calls() -> tuple[str, ...]:
    """Names of :data:`RULES` this machine's libseccomp does not know (left
    unfiltered, and logged once); empty with libseccomp 2.5.4 or newer."""
    filter_bpf()
    assert _built is not None
    return _built[1]


def filter_fd() -> int:
    """A new sealed ``memfd`` holding :func:`filter_bpf`, read from its start, for
    ``bwrap --seccomp FD`` (bubblewrap reads it whole and closes it).  The caller closes
    its own copy after starting bubblewrap.

    Raises:
        FilterUnavailable: as :func:`filter_bpf`.
    """
    data = filter_bpf()
    fd = os.memfd_create("rlm-seccomp", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK
                    | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def denied_summary() -> str:
    """What the filter denies, in one line (``executor.limits['syscalls']``)."""
    families: list[str] = []
    for rule in RULES:
        if rule.family not in families:
            families.append(rule.family)
    return "seccomp filter denies: " + "; ".join(families)
