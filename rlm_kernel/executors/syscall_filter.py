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
sandbox never has (``kexec``, modules, ``reboot``, ``swapon``, the clock, port I/O);
no setuid or setgid file (``chmod``, ``fchmod``, ``fchmodat``, ``fchmodat2`` with
``S_ISUID`` or ``S_ISGID``, as Nix's build sandbox denies them in ``setupSeccomp``, and
the calls that create a file with such a mode: ``open``/``openat`` with ``O_CREAT`` or
``O_TMPFILE``, ``creat``, ``mknod``/``mknodat``; ``openat2``, whose mode seccomp cannot
read, answered ``ENOSYS``): as root the working folder is written as its owner, root.

The filter is built with libseccomp (the system's ``libseccomp.so.2``, through
`pyseccomp <https://pypi.org/project/pyseccomp/>`_, a ctypes binding with the API of
libseccomp's own Python bindings), once per host process and network setting
(:func:`filter_bpf`): with the host's network, :data:`NETWORK_RULES` too (no new
``AF_UNIX`` socket, as Anthropic's sandbox-runtime denies them); each sandbox gets it in
a sealed ``memfd`` (:func:`filter_fd`).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket
import stat
import termios
import threading
from dataclasses import dataclass

__all__ = ["Rule", "RULES", "NETWORK_RULES", "rules_for", "FilterUnavailable", "filter_bpf",
           "filter_fd", "unknown_calls", "denied_summary", "ALLOWED_SOCKET_FAMILIES",
           "SETUID_BITS"]

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
        args: comparisons that must all hold for the rule to apply (none: every
            call), each ``(index, op, a, b)``: the argument at ``index`` compares true
            (libseccomp's ``SCMP_CMP_*`` ``op``; for ``MASKED_EQ`` ``a`` is the mask and
            ``b`` the value).
        number: the call's number on the native architecture, used when this
            libseccomp does not know ``syscall`` (a call newer than its table), or None.
    """

    syscall: str
    errno: int
    family: str
    args: tuple[tuple[int, int, int, int], ...] = ()
    number: int | None = None


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


SETUID_BITS = (stat.S_ISUID, stat.S_ISGID)
"""The mode bits no file model code makes or changes may carry (a setuid or setgid
program runs as its owner: as root, the working folder's files are root's on disk)."""
_O_TMPFILE_BIT = os.O_TMPFILE & ~os.O_DIRECTORY  # __O_TMPFILE: O_TMPFILE adds O_DIRECTORY
_FCHMODAT2 = 452
"""``fchmodat2``'s number (Linux 6.6) in the unified table every architecture shares
from 424 on, bar alpha and MIPS (include/uapi/asm-generic/unistd.h)."""


def _setuid_rules() -> list[Rule]:
    """No setuid or setgid file: ``chmod``, ``fchmod``, ``fchmodat`` and ``fchmodat2``
    with either bit (Nix's ``setupSeccomp``), and the calls that create a file with a
    mode: ``open``/``openat`` with ``O_CREAT`` or ``O_TMPFILE``, ``creat``, ``mknod`` and
    ``mknodat`` (a regular file, or a fifo, with either bit); ``openat2`` takes its mode
    in a structure seccomp cannot read: ``ENOSYS``, so C libraries fall back to
    ``openat`` (``mkdir`` keeps neither bit of its mode)."""
    EPERM = errno.EPERM  # noqa: N806 - the C name
    family = "setuid and setgid files"
    machine = os.uname().machine
    fchmodat2 = None if machine.startswith(("mips", "alpha")) else _FCHMODAT2
    # (call, index of the mode, index of the flags or None, number when libseccomp lacks it)
    calls = [("chmod", 1, None, None), ("fchmod", 1, None, None),
             ("fchmodat", 2, None, None), ("fchmodat2", 2, None, fchmodat2),
             ("creat", 1, None, None), ("mknod", 1, None, None), ("mknodat", 2, None, None),
             ("open", 2, 1, None), ("openat", 3, 2, None)]
    rules: list[Rule] = []
    for call, mode, flags, number in calls:
        for bit in SETUID_BITS:
            has_bit = (mode, _MASKED_EQ, bit, bit)
            if flags is None:
                rules.append(Rule(call, EPERM, family, (has_bit,), number))
                continue
            for creating in (os.O_CREAT, _O_TMPFILE_BIT):
                rules.append(Rule(call, EPERM, family,
                                  ((flags, _MASKED_EQ, creating, creating), has_bit), number))
    rules.append(Rule("openat2", errno.ENOSYS, family))
    return rules


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
    rules += [Rule("clone", EPERM, "new namespaces", ((_CLONE_FLAGS_ARG, _MASKED_EQ, flag, flag),))
              for flag in _CLONE_NEW.values()]
    rules += [Rule("ioctl", EPERM, "ioctl TIOCSTI, TIOCLINUX",
                   ((1, _MASKED_EQ, 0xFFFFFFFF, request),))
              for request in (termios.TIOCSTI, getattr(termios, "TIOCLINUX", 0x541C))]
    rules.append(Rule("personality", EPERM, "personality but PER_LINUX",
                      ((0, _NE, _PER_LINUX, 0),)))
    rules += _setuid_rules()
    allowed = sorted(ALLOWED_SOCKET_FAMILIES)
    for call in ("socket", "socketpair"):
        last = -1
        for family in allowed:
            rules += [Rule(call, errno.EAFNOSUPPORT, "socket families but UNIX, IP, netlink",
                           ((0, _EQ, refused, 0),)) for refused in range(last + 1, family)]
            last = family
        rules.append(Rule(call, errno.EAFNOSUPPORT, "socket families but UNIX, IP, netlink",
                          ((0, _GE, last + 1, 0),)))
    return tuple(rules)


RULES: tuple[Rule, ...] = _rules()
"""Every rule of the filter; any call no rule matches is allowed."""

_UNIX = "UNIX sockets (the network on)"
NETWORK_RULES: tuple[Rule, ...] = (
    Rule("socket", errno.EAFNOSUPPORT, _UNIX, ((0, _MASKED_EQ, 0xFFFFFFFF, socket.AF_UNIX),)),
    *(Rule("socketpair", errno.EAFNOSUPPORT, _UNIX,
           ((0, _MASKED_EQ, 0xFFFFFFFF, socket.AF_UNIX), (1, _MASKED_EQ, 0xF, kind)))
      for kind in (socket.SOCK_DGRAM, socket.SOCK_RAW)),
)
"""The rules added when the sandbox shares the host's network namespace
(``network=True``), whose abstract UNIX sockets (D-Bus, X11, agents) are then in
reach whatever the file system shows: no new ``AF_UNIX`` socket, and no datagram
pair, which ``connect(AF_UNSPEC)`` turns into a socket that can send to any of
them; stream pairs stay (the worker's channel, ``multiprocessing``'s pipes, asyncio).
As Anthropic's sandbox-runtime (``vendor/seccomp-src/seccomp-unix-block.c``): the
family compared on its low 32 bits, the only ones the kernel reads; the type on its
``SOCK_TYPE_MASK`` bits, past ``SOCK_CLOEXEC``/``SOCK_NONBLOCK``; answered
``EAFNOSUPPORT`` as the families the filter always refuses (sandbox-runtime answers
``EPERM``; one error for both keeps i386's ``socketcall``, which the two share and
seccomp cannot look into, refused whole)."""


def rules_for(network: bool) -> tuple[Rule, ...]:
    """The rules of the filter for a sandbox with (``network``) or without the host's
    network: :data:`RULES`, and :data:`NETWORK_RULES` with it."""
    return RULES + NETWORK_RULES if network else RULES


_lock = threading.Lock()
_built: dict[bool, tuple[bytes, tuple[str, ...]]] = {}


def _extra_arches(sc) -> list[int]:
    """The other ABIs this machine's kernel runs next to the native one (Flatpak's
    multiarch list, plus x32): their calls meet the same rules, not a killed process."""
    native = sc.system_arch()
    return {sc.Arch.X86_64: [sc.Arch.X86, sc.Arch.X32],
            sc.Arch.AARCH64: [sc.Arch.ARM]}.get(native, [])


def _add_rules(sc, flt, rules: tuple[Rule, ...], *, native: bool) -> list[str]:
    """Add ``rules`` to ``flt`` (the native architecture alone, or only the others);
    the names of those left out (unknown to this libseccomp, with no number to use
    here)."""
    unknown: list[str] = []
    for rule in rules:
        number = sc.resolve_syscall(sc.Arch.NATIVE, rule.syscall)
        if number == -1:  # __NR_SCMP_ERROR: this libseccomp does not know the name
            if rule.number is None or not native:
                unknown.append(rule.syscall)
                continue
            number = rule.number  # the native filter takes it untranslated
        args = [sc.Arg(*arg) for arg in rule.args]
        try:
            flt.add_rule(sc.ERRNO(rule.errno), number, *args)
        except OSError as exc:
            # EFAULT/EDOM: a call no architecture of the filter has (Flatpak logs these)
            if exc.errno not in (errno.EFAULT, errno.EDOM):
                raise FilterUnavailable(f"libseccomp refused the rule for {rule.syscall}: "
                                        f"{exc}") from exc
            log.debug("seccomp: %s not filtered here: %s", rule.syscall, exc)
    return unknown


def _build(rules: tuple[Rule, ...] = RULES) -> tuple[bytes, tuple[str, ...]]:
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError, OSError) as exc:
        raise FilterUnavailable(
            f"the isolated executor filters the worker's system calls with libseccomp, "
            f"which cannot be loaded ({exc}): install libseccomp ('apt-get install "
            f"libseccomp2', 'dnf install libseccomp', 'pacman -S libseccomp', 'apk add "
            f"libseccomp') and the Python package pyseccomp (a dependency of rlm-kernel)"
        ) from exc
    # one filter for the native ABI and one for the others, merged: a rule given by
    # number (a call this libseccomp does not know) is refused by libseccomp for every
    # architecture of a filter once one of them cannot translate it, native included
    flt = sc.SyscallFilter(sc.ALLOW)
    unknown = _add_rules(sc, flt, rules, native=True)
    extras = [arch for arch in _extra_arches(sc) if arch != sc.system_arch()]
    if extras:
        others = sc.SyscallFilter(sc.ALLOW)
        for arch in extras:
            try:
                others.add_arch(arch)
            except OSError as exc:  # EEXIST: already there
                if exc.errno != errno.EEXIST:
                    log.debug("seccomp: architecture %#x not added: %s", arch, exc)
        others.remove_arch(sc.system_arch())
        unknown += [name if name in unknown else f"{name} (other ABIs)"
                    for name in _add_rules(sc, others, rules, native=False)]
        flt.merge(others)
    with os.fdopen(os.memfd_create("rlm-seccomp-export", os.MFD_CLOEXEC), "w+b") as out:
        flt.export_bpf(out)
        data = os.pread(out.fileno(), 1 << 20, 0)
    if not data or len(data) % 8:
        raise FilterUnavailable(f"libseccomp exported {len(data)} bytes of BPF")
    if unknown:
        log.warning("the worker's seccomp filter leaves these calls unfiltered: this "
                    "libseccomp does not know them: %s", ", ".join(sorted(set(unknown))))
    return data, tuple(sorted(set(unknown)))


def filter_bpf(network: bool = False) -> bytes:
    """The filter (:func:`rules_for` ``network``) as classic BPF (``struct sock_filter``
    records, 8 bytes each), built on first use and kept for the life of the process, one
    for each ``network``.

    Raises:
        FilterUnavailable: libseccomp or pyseccomp is missing (the message names the
            packages), or libseccomp refused a rule.
    """
    with _lock:
        if network not in _built:
            _built[network] = _build(rules_for(network))
        return _built[network][0]


def unknown_calls(network: bool = False) -> tuple[str, ...]:
    """Names of the filter's rules this machine's libseccomp does not know and no number
    stands in for (left unfiltered, and logged once); empty with libseccomp 2.5.4 or
    newer."""
    filter_bpf(network)
    return _built[network][1]


def filter_fd(network: bool = False) -> int:
    """A new sealed ``memfd`` holding :func:`filter_bpf` (for a sandbox with the host's
    network, or without), read from its start, for ``bwrap --seccomp FD`` (bubblewrap
    reads it whole and closes it).  The caller closes its own copy after starting
    bubblewrap.

    Raises:
        FilterUnavailable: as :func:`filter_bpf`.
    """
    data = filter_bpf(network)
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


def denied_summary(network: bool = False) -> str:
    """What the filter (:func:`rules_for` ``network``) denies, in one line
    (``executor.limits['syscalls']``)."""
    families: list[str] = []
    for rule in rules_for(network):
        if rule.family not in families:
            families.append(rule.family)
    return "seccomp filter denies: " + "; ".join(families)
