"""The isolated worker's seccomp filter (``executors/syscall_filter.py``): what it holds,
how it reaches bubblewrap, and that Python and its libraries keep working under it."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
import subprocess
import sys

import pytest

from rlm_kernel.executors import syscall_filter
from rlm_kernel.executors.isolated import IsolatedExecutor
from rlm_kernel.executors.sandbox import SandboxUnavailable, bwrap_command
from rlm_kernel.executors.syscall_filter import RULES, filter_bpf, filter_fd

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux's")


def test_the_filter_is_classic_bpf_built_once_and_handed_over_sealed():
    data = filter_bpf()
    assert data and len(data) % 8 == 0  # struct sock_filter records
    assert filter_bpf() is data  # built once per process
    fd = filter_fd()
    try:
        assert os.read(fd, len(data) + 8) == data  # read from its start, whole
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        assert seals & fcntl.F_SEAL_WRITE and seals & fcntl.F_SEAL_SEAL
        with pytest.raises(PermissionError):
            os.pwrite(fd, b"\0" * 8, 0)
        assert not os.get_inheritable(fd)  # only bubblewrap gets it (pass_fds)
    finally:
        os.close(fd)
    assert syscall_filter.unknown_calls() == (), "this libseccomp leaves calls unfiltered"


def _denied(call: str, *args: int, rules=RULES) -> int | None:
    """The errno :data:`RULES` answer ``call`` with for these argument values (the first
    rule whose comparisons all hold, as libseccomp orders same-action rules), or None
    (allowed)."""
    def holds(index: int, op: int, a: int, b: int) -> bool:
        value = args[index] if index < len(args) else 0  # an argument not given: 0
        return (op == 1 and value != a) or (op == 4 and value == a) \
            or (op == 5 and value >= a) or (op == 7 and value & a == b)

    for rule in rules:
        if rule.syscall == call and all(holds(*arg) for arg in rule.args):
            return rule.errno
    return None


def test_the_rules_deny_what_the_issue_names_and_no_more_than_python_needs():
    EPERM, ENOSYS = errno.EPERM, errno.ENOSYS  # noqa: N806
    for call in ("keyctl", "add_key", "request_key", "io_uring_setup", "io_uring_enter",
                 "io_uring_register", "perf_event_open", "bpf", "userfaultfd", "ptrace",
                 "process_vm_readv", "process_vm_writev", "unshare", "setns", "mount",
                 "umount2", "pivot_root", "chroot", "kexec_load", "kexec_file_load",
                 "init_module", "finit_module", "delete_module", "syslog", "uselib", "acct",
                 "quotactl", "name_to_handle_at", "open_by_handle_at", "shmget"):
        assert _denied(call, 0, 0) == EPERM, call
    for call in ("clone3", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
                 "fspick", "mount_setattr", "memfd_create"):
        assert _denied(call, 0, 0) == ENOSYS, call  # as Flatpak: C libraries fall back
    sigchld = 17
    assert _denied("clone", sigchld | 0x01000000 | 0x00200000, 0) is None  # fork()
    assert _denied("clone", 0x003D0F00, 0) is None  # pthread_create's flags
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                 0x40000000):  # CLONE_NEWNS ... CLONE_NEWNET
        assert _denied("clone", flag | sigchld, 0) == EPERM, hex(flag)
    assert _denied("ioctl", 0, 0x5412) == EPERM and _denied("ioctl", 0, 0x541C) == EPERM
    assert _denied("ioctl", 0, 0x5401) is None  # TCGETS: isatty
    assert _denied("personality", 0) is None and _denied("personality", 8) == EPERM
    for family in (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK):
        assert _denied("socket", family) is None and _denied("socketpair", family) is None
    for family in (3, 9, 17, 38, 40, 44, 45):  # AX25 ... PACKET, ALG, VSOCK, XDP, MCTP
        assert _denied("socket", family) == errno.EAFNOSUPPORT, family
    for call in ("read", "write", "openat", "mmap", "futex", "wait4", "execve", "getrandom",
                 "ftruncate", "sched_setaffinity", "prctl", "socket"):
        assert _denied(call, socket.AF_UNIX, 0) is None, call


def test_with_the_network_on_no_unix_socket_is_made_but_stream_pairs_are():
    """With the host's network (its abstract UNIX sockets in reach) the rules add what
    Anthropic's sandbox-runtime denies: ``socket(AF_UNIX, ...)`` of any type, and
    datagram pairs (``connect(AF_UNSPEC)`` retargets them); stream pairs (the worker's
    channel, ``multiprocessing``, asyncio) and IP sockets pass.  Without the network
    nothing of that is denied, and each setting has its own filter."""
    on = syscall_filter.rules_for(True)
    cloexec = socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET | cloexec):
        assert _denied("socket", socket.AF_UNIX, kind, rules=on) == errno.EAFNOSUPPORT, kind
        assert _denied("socket", socket.AF_UNIX, kind) is None, kind
    assert _denied("socket", 1 | 1 << 32, 1, rules=on) is not None  # high bits: still AF_UNIX
    for kind in (socket.SOCK_DGRAM, socket.SOCK_RAW, socket.SOCK_DGRAM | cloexec):
        assert _denied("socketpair", socket.AF_UNIX, kind, rules=on) == errno.EAFNOSUPPORT, \
            kind
    for kind in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET, socket.SOCK_STREAM | cloexec):
        assert _denied("socketpair", socket.AF_UNIX, kind, rules=on) is None, kind
    for family in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK):
        assert _denied("socket", family, socket.SOCK_STREAM, rules=on) is None, family
    assert syscall_filter.filter_bpf(True) != syscall_filter.filter_bpf(False)
    assert syscall_filter.filter_bpf(True) is syscall_filter.filter_bpf(True)
    assert "UNIX sockets" in syscall_filter.denied_summary(True)
    assert "UNIX sockets" not in syscall_filter.denied_summary(False)


def test_the_rules_deny_setuid_and_setgid_files_and_nothing_tools_do():
    """No mode with ``S_ISUID`` or ``S_ISGID`` set or created (as Nix's build sandbox);
    ``chmod +x``, a sticky folder, plain files and every open that creates nothing pass
    (the mode argument of an open without ``O_CREAT`` is whatever the register held)."""
    EPERM = errno.EPERM  # noqa: N806
    for mode in (0o4755, 0o2755, 0o6755, 0o4000, 0o2000, 0o7777, 0xFFFF_FFFF_0000_4755):
        assert _denied("chmod", 0, mode) == EPERM, oct(mode)
        assert _denied("fchmod", 3, mode) == EPERM, oct(mode)
        assert _denied("fchmodat", -100, 0, mode) == EPERM, oct(mode)
        assert _denied("fchmodat2", -100, 0, mode, 0) == EPERM, oct(mode)
        assert _denied("creat", 0, mode) == EPERM, oct(mode)
        assert _denied("mknod", 0, stat.S_IFREG | mode, 0) == EPERM, oct(mode)
        assert _denied("mknodat", -100, 0, stat.S_IFREG | mode, 0) == EPERM, oct(mode)
        for flags in (os.O_CREAT | os.O_WRONLY, os.O_TMPFILE | os.O_RDWR):
            assert _denied("open", 0, flags, mode) == EPERM, (oct(flags), oct(mode))
            assert _denied("openat", -100, 0, flags, mode) == EPERM, (oct(flags), oct(mode))
        assert _denied("open", 0, os.O_RDONLY, mode) is None  # creates nothing
        assert _denied("openat", -100, 0, os.O_RDWR | os.O_APPEND, mode) is None
    for mode in (0o755, 0o644, 0o1777, 0o777, 0):
        for call, args in (("chmod", (0, mode)), ("fchmod", (3, mode)),
                           ("fchmodat", (-100, 0, mode)), ("creat", (0, mode)),
                           ("open", (0, os.O_CREAT, mode)),
                           ("openat", (-100, 0, os.O_CREAT | os.O_EXCL, mode)),
                           ("mknodat", (-100, 0, stat.S_IFIFO | mode, 0))):
            assert _denied(call, *args) is None, (call, oct(mode))
    assert _denied("openat2", -100, 0, 0, 24) == errno.ENOSYS  # its mode is out of reach
    assert _denied("mkdir", 0, 0o2755) is None  # the kernel keeps neither bit of it


def test_a_call_this_libseccomp_does_not_know_is_filtered_by_its_number(tmp_path):
    """A rule whose name libseccomp lacks (``fchmodat2`` for libseccomp 2.5.4 without
    Linux 6.6's table) is added by its number to the native ABI (libseccomp refuses a
    number for every ABI of a filter once one cannot translate it): loaded in a
    process, the call it names fails with the rule's error."""
    import pyseccomp

    getppid = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, "getppid")
    data, unknown = syscall_filter._build((syscall_filter.Rule(
        "rlm_no_such_call", errno.EPERM, "a call newer than libseccomp", number=getppid),))
    assert "rlm_no_such_call" not in unknown  # the native ABI has it
    bpf = tmp_path / "filter.bpf"
    bpf.write_bytes(data)
    load = (
        "import ctypes, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "data = open(sys.argv[1], 'rb').read()\n"
        "buf = ctypes.create_string_buffer(data, len(data))\n"
        "class Prog(ctypes.Structure):\n"
        "    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_void_p)]\n"
        "prog = Prog(len(data) // 8, ctypes.addressof(buf))\n"
        "assert libc.prctl(38, 1, 0, 0, 0) == 0\n"  # PR_SET_NO_NEW_PRIVS
        "assert libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0\n"  # SECCOMP_MODE_FILTER
        f"print(libc.syscall({getppid}), ctypes.get_errno())\n")
    run = subprocess.run([sys.executable, "-c", load, str(bpf)], capture_output=True,
                         text=True, timeout=30)
    assert run.stdout.split() == ["-1", str(errno.EPERM)], (run.stdout, run.stderr)


def test_bubblewrap_gets_the_filter_and_the_proc_knobs_read_only(tmp_path):
    fd = filter_fd()
    try:
        cmd = bwrap_command([sys.executable, "-c", "pass"], bwrap="bwrap",
                            python=sys.executable, network=False, workdir=None,
                            cwd=str(tmp_path), tmp_bytes=None, seccomp_fd=fd)
        assert cmd[cmd.index("--seccomp") + 1] == str(fd) and os.get_inheritable(fd)
    finally:
        os.close(fd)
    text = " ".join(cmd)
    proc = text.index("--proc /proc")
    for knob in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"):
        if os.path.exists(knob):
            assert text.index(f"--ro-bind {knob} {knob}") > proc, knob
    assert "--ro-bind /dev/null /proc/keys" in text
    assert cmd.index("--seccomp") < cmd.index("--")


LIBRARIES = r'''
import asyncio, json, multiprocessing, os, socket, subprocess, threading

def done(name, value):  # each result as it comes: a hang shows where it happened
    print(json.dumps([name, value]), flush=True)

t = threading.Thread(target=lambda: done('thread', True))
t.start(); t.join()
done('subprocess', subprocess.run(['sh', '-c', 'echo ok'], capture_output=True,
                                  text=True).stdout.strip())
pid = os.fork()
if pid == 0:
    os._exit(3)
done('fork', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
with multiprocessing.get_context('fork').Pool(2) as pool:
    done('pool', pool.map(abs, range(-4, 1)))
with multiprocessing.get_context('spawn').Pool(1) as pool:
    done('spawn', pool.map(len, ['a', 'bb']))
import numpy, pandas  # after the pools: OpenBLAS starts threads, which fork copies no better
done('numpy', float(numpy.linalg.inv(numpy.eye(3) * 2).sum()))
done('pandas', int(pandas.DataFrame({'a': range(10)}).a.sum()))
done('asyncio', asyncio.run(asyncio.sleep(0, result='ran')))
a, b = socket.socketpair()
a.sendall(b'x'); done('socketpair', b.recv(1).decode())
socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()
done('seccomp', [l.split()[1] for l in open('/proc/self/status') if l.startswith('Seccomp:')])
done('child_seccomp', subprocess.run(['grep', '^Seccomp:', '/proc/self/status'],
                                     capture_output=True, text=True).stdout.split())
'''


def test_python_and_its_libraries_work_under_the_filter():
    """Threads (glibc's pthread_create falls back from clone3 to clone), subprocess,
    fork, multiprocessing (fork and spawn), numpy, pandas, asyncio and UNIX and IP
    sockets work in the worker; the worker and what it starts run under the filter
    (``Seccomp: 2``, filter mode)."""
    import json

    with IsolatedExecutor(max_processes=32) as ex:
        res = ex.execute(LIBRARIES, timeout=60)
    got = dict(json.loads(line) for line in res.stdout.splitlines())
    assert res.success, (got, res.stderr)
    assert got == {
        "thread": True, "subprocess": "ok", "fork": 3, "pool": [4, 3, 2, 1, 0],
        "spawn": [1, 2], "numpy": 1.5, "pandas": 45, "asyncio": "ran", "socketpair": "x",
        "seccomp": ["2"], "child_seccomp": ["Seccomp:", "2"]}


def test_the_working_folders_bash_runs_under_the_filter(tmp_path):
    from rlm_kernel.executors.workfolder import WorkFolder

    helpers = WorkFolder(tmp_path, bash_timeout=20).functions()
    with IsolatedExecutor(helpers, workdir=tmp_path, max_processes=16) as ex:
        res = ex.execute("print(bash('grep ^Seccomp: /proc/self/status; python3 -c "
                         "\"import socket; socket.socket(40, socket.SOCK_STREAM)\" 2>&1 "
                         "| tail -1'))")
    assert res.success, res.stderr
    assert "Seccomp:\t2" in res.stdout, res.stdout
    assert "Address family not supported" in res.stdout, res.stdout  # AF_VSOCK


def test_without_libseccomp_the_isolated_executor_refuses_with_what_to_install(monkeypatch):
    monkeypatch.setattr(syscall_filter, "_built", {})
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # import fails as if missing
    with pytest.raises(SandboxUnavailable, match="apt-get install libseccomp2"):
        IsolatedExecutor()
