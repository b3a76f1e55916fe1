"""Fault cases of ``../shared/fault-cases-t5/`` against the wall (y01, y15, y16, y18) and
their siblings: model code never holds host root, and a seccomp filter stands between it
and the kernel, whatever the caller's uid (``docs/security.md``, "Isolation").

Each attack runs through the real isolated executor (a scripted run, or the executor
itself where the host must look at the sandbox's processes), and each test asserts the
claim, which holds for any uid: as root the sandbox runs as an unprivileged host uid
(``rlm_kernel/executors/launcher.py``), as an ordinary user as that user; a step of an
attack that only root can set up (a planted root file) is left out for a user, and
what it would show is then shown by the files that exist.  Calls the filter denies are
also made on the host, outside the wall (a control): a call the kernel allows there and
refuses in the sandbox is refused by the wall.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import pytest

from rlm_kernel.executors.isolated import IsolatedExecutor
from rlm_kernel.executors.sandbox import PACKAGE_DIR, host_uid, process_tree

from .t4_support import host_child, report, run_isolated, summary

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="Linux namespaces"),
              pytest.mark.timeout(180)]

ROOT_CALLER = os.getuid() == 0


def _outputs(res) -> str:
    return "\n".join(e.output for e in res.history.entries)


def _json_line(out: str, tag: str):
    """The JSON value printed after ``tag`` on a line of ``out``."""
    for line in out.splitlines():
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1:])
    raise AssertionError(f"no {tag} line in the step's output: {out[-1500:]!r}")


# -- y01 and siblings: files only their owner may read ------------------------------------
READ_FILES = r'''
import json, os
found = {}
for p in PATHS:
    try:
        with open(p, 'rb') as f:
            found[p] = 'READ %d bytes' % len(f.read(64))
    except OSError as exc:
        found[p] = exc.strerror
print('FILES', json.dumps(found))
'''


def _owner_only_files(limit: int = 40) -> list[str]:
    """Up to ``limit`` regular files of the system that only root may read (root-owned,
    no read bit for others), found in /etc, /var and /usr/local now."""
    found: list[str] = []
    for top in ("/etc", "/var/lib", "/var/log", "/var/cache", "/usr/local", "/opt"):
        for folder, dirs, files in os.walk(top, onerror=lambda e: None):
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
            for name in files:
                path = os.path.join(folder, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode) and info.st_uid == 0 \
                        and not info.st_mode & stat.S_IROTH:
                    found.append(path)
                    if len(found) >= limit:
                        return found
    return found


@pytest.fixture()
def planted_root_files():
    """As root: a 0600 key in a 0755 folder and one in a 0700 folder under /var/lib
    (outside the homes, as y01 plants); as a user: none (only root can make them)."""
    if not ROOT_CALLER:
        yield []
        return
    base = Path(tempfile.mkdtemp(prefix="rlm-t5-wall-", dir="/var/lib"))
    base.chmod(0o755)
    private = base / "private"
    private.mkdir(mode=0o700)
    files = [base / "service.key", private / "deep.key"]
    for f in files:
        f.write_text("-----BEGIN KEY----- t5-wall-root-only -----END KEY-----\n")
        f.chmod(0o600)
    yield [str(f) for f in files]
    shutil.rmtree(base, ignore_errors=True)


def test_y01_model_code_reads_no_file_only_root_may_read(planted_root_files):
    """Case y01_root_owned_secret_files: model code opens ``/etc/shadow``,
    ``/etc/gshadow``, every file of the system only root may read (as found now) and, as
    root, keys planted outside the homes.  Claim: whatever the caller's uid the worker
    runs as an unprivileged uid with no capabilities: it reads none of them."""
    paths = ["/etc/shadow", "/etc/gshadow", *_owner_only_files(), *planted_root_files]
    paths = [p for p in dict.fromkeys(paths) if os.path.exists(p)]
    assert paths, "no owner-only root file exists on this system to try"
    res, _, _ = run_isolated(f"PATHS = {paths!r}\n" + READ_FILES, "FINAL('done')",
                             step_timeout=20)
    found = _json_line(_outputs(res), "FILES")
    read = {p: r for p, r in found.items() if r.startswith("READ")}
    assert not read, f"model code read files only root may read: {read}"
    assert set(found) == set(paths) and res.answer == "done"


# -- the host uid of the sandbox -----------------------------------------------------------
def _ids(pid: int) -> tuple[list[int], list[int]]:
    """The (real, effective, saved, fs) uids and gids of host process ``pid``."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.split()
    return [int(x) for x in fields["Uid"]], [int(x) for x in fields["Gid"]]


def test_every_process_of_the_sandbox_runs_as_an_unprivileged_host_uid():
    """Model code starts a child process; the host reads the ids of every process of
    the sandbox (bubblewrap, its init, the worker, the child) in its own ``/proc``.
    Claim: as root they run as the sandbox's host uid, neither 0 nor the caller's; as a
    user, as that user; never with a supplementary group."""
    expected = host_uid() if ROOT_CALLER else os.getuid()
    assert expected != 0
    with IsolatedExecutor(max_processes=16) as ex:
        res = ex.execute("import subprocess\nchild = subprocess.Popen(['sleep', '30'])\n"
                         "print('started')")
        assert res.stdout.strip() == "started", res.stderr
        pids = process_tree(ex._child.proc.pid)
        seen = {pid: _ids(pid) for pid in pids}
        groups = {pid: Path(f"/proc/{pid}/status").read_text().split("Groups:")[1]
                  .splitlines()[0].split() for pid in pids}
        limits = dict(ex.limits)
    assert len(seen) >= 4, seen  # bubblewrap, its init, the worker, sleep
    for pid, (uids, gids) in seen.items():
        assert set(uids) == {expected}, (pid, uids)
        assert set(gids) == {expected if ROOT_CALLER else os.getgid()}, (pid, gids)
    if ROOT_CALLER:
        assert all(g == [] for g in groups.values()), groups
    assert f"host uid {expected}" in limits["user"]


def test_rlm_sandbox_uid_chooses_the_host_uid(monkeypatch):
    """``RLM_SANDBOX_UID`` names the host uid a root caller's sandbox runs as (an
    ordinary user's sandbox is that user's whatever it says); 0 is refused with a
    message naming the variable."""
    from rlm_kernel.executors import sandbox

    wanted = host_uid() + 1
    monkeypatch.setenv("RLM_SANDBOX_UID", str(wanted))
    with IsolatedExecutor(max_processes=8) as ex:
        uids, _ = _ids(ex._child.pid)
    assert set(uids) == {wanted if ROOT_CALLER else os.getuid()}
    monkeypatch.setenv("RLM_SANDBOX_UID", "0")
    sandbox._picked.clear()
    with pytest.raises(sandbox.SandboxUnavailable, match="RLM_SANDBOX_UID='0'"):
        sandbox.host_uid()


# -- y16: what model code can write -------------------------------------------------------------
WRITE_EVERYWHERE = r'''
import json, os
mps = sorted({l.split()[4] for l in open('/proc/self/mountinfo')})
extra = ['/', '/etc', '/var/lib', '/usr/local', '/opt', '/srv', '/sys/fs/cgroup',
         '/proc/sys/kernel', '/proc/sys/vm', '/proc/irq', '/proc/bus', '/proc/fs', '/root',
         '/home', os.path.dirname(os.getcwd()), os.getcwd()]
ok = []
for d in mps + extra:
    p = os.path.join(d, '.t5-wall-probe')
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        os.unlink(p)
        ok.append(d)
    except OSError:
        pass
print('WRITABLE', json.dumps(sorted(set(ok))))
'''
PRIVATE = {"/tmp", "/var/tmp", "/dev/shm", "/run", "/dev"}


@pytest.mark.parametrize("with_workdir", [False, True], ids=["no-workdir", "workdir"])
def test_y16_nothing_but_the_private_mounts_and_the_workdir_is_writable(tmp_path,
                                                                         with_workdir):
    """Case y16_writable_mounts: model code creates a file on every mount point it sees
    and in the system's folders.  Claim: the file system is read-only but the sandbox's
    private tmpfs mounts, its ``/dev``, and the working folder when there is one."""
    work = tmp_path / "work"
    work.mkdir()
    cfg = {"workdir": str(work)} if with_workdir else {}
    res, _, _ = run_isolated(WRITE_EVERYWHERE, "FINAL('done')", step_timeout=30, **cfg)
    writable = set(_json_line(_outputs(res), "WRITABLE"))
    expected = PRIVATE | ({os.path.realpath(work)} if with_workdir else set())
    beyond = {w for w in writable if not any(w == e or w.startswith(e.rstrip("/") + "/")
                                             for e in expected)}
    assert beyond == set(), f"writable beyond {sorted(expected)}: {sorted(writable)}"
    if with_workdir:
        assert os.path.realpath(work) in writable


# -- y18 and siblings: the kernel's global settings in /proc ------------------------------------
PROC_KNOBS = r'''
import json, os
opened = []
tried = 0
for top in ('/proc/sys', '/proc/irq', '/proc/bus', '/proc/fs'):
    for folder, dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            try:
                if not os.stat(path).st_mode & 0o222:
                    continue
            except OSError:
                continue
            tried += 1
            try:
                os.close(os.open(path, os.O_WRONLY))   # opened, never written
                opened.append(path)
            except OSError:
                pass
for path in ('/proc/sysrq-trigger', '/proc/sys/kernel/core_pattern'):
    try:
        os.close(os.open(path, os.O_WRONLY))
        opened.append(path)
    except OSError:
        pass
try:
    with open(BURST, 'w') as f:
        f.write(NEW)
    print('burst written')
except OSError as exc:
    print('burst:', exc.strerror)
print('KNOBS', json.dumps({'tried': tried, 'opened': opened}))
'''


def test_y18_model_code_changes_no_global_kernel_setting():
    """Case y18_root_global_sysctl_write: model code writes the global
    ``kernel.printk_ratelimit_burst`` through the sandbox's ``/proc/sys`` (the host puts
    the old value back), and opens for writing ``kernel.core_pattern`` (whose ``|prog``
    runs a program as root), ``/proc/sysrq-trigger`` and every file of ``/proc/sys``,
    ``/proc/irq``, ``/proc/bus`` and ``/proc/fs`` that has a write bit (opened, never
    written).  Claim: model code cannot change the host: none opens for writing, the
    setting keeps its value (for any uid)."""
    burst = "/proc/sys/kernel/printk_ratelimit_burst"
    old = Path(burst).read_text().strip()
    code = f"BURST, NEW = {burst!r}, {str(int(old) + 7) + chr(10)!r}\n" + PROC_KNOBS
    try:
        res, _, _ = run_isolated(code, "FINAL('done')", step_timeout=60)
        after = Path(burst).read_text().strip()
    finally:
        if Path(burst).read_text().strip() != old and ROOT_CALLER:
            Path(burst).write_text(old + "\n")
    knobs = _json_line(_outputs(res), "KNOBS")
    assert after == old, f"model code changed {burst}: {old} -> {after}"
    assert knobs["tried"] > 50, knobs  # /proc/sys has hundreds of writable settings
    assert knobs["opened"] == [], f"opened for writing: {knobs['opened'][:20]}"


# -- y15 and the seccomp filter ------------------------------------------------------------------
SYSCALLS = r'''
import ctypes, errno, json, os, socket, struct, subprocess, termios
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = NUMBERS

def call(name, *args):
    ctypes.set_errno(0)
    ret = libc.syscall(NR[name], *args)
    return [int(ret), ctypes.get_errno() if ret < 0 else 0]

def probe():
    """CONTROL (on the host, outside the wall): only the calls that change nothing
    outside the process, and clone3 with a size the kernel refuses (EINVAL)."""
    out = {}
    buf = ctypes.create_string_buffer(512)
    out['keyctl'] = call('keyctl', 0, ctypes.c_long(-3), 0)         # KEYCTL_GET_KEYRING_ID @s
    if not CONTROL:
        out['add_key'] = call('add_key', b'user', b't5-wall', b'v', 1, ctypes.c_long(-3))
        out['request_key'] = call('request_key', b'user', b't5-wall', None, 0)
    out['io_uring_setup'] = call('io_uring_setup', 4, buf)
    if out['io_uring_setup'][0] >= 0:
        os.close(out['io_uring_setup'][0])
    out['io_uring_enter'] = call('io_uring_enter', 1000, 0, 0, 0, None, 0)
    out['io_uring_register'] = call('io_uring_register', 1000, 0, None, 0)
    attr = ctypes.create_string_buffer(struct.pack('IIQ', 1, 128, 0) + bytes(112))  # software, cpu clock
    out['perf_event_open'] = call('perf_event_open', attr, 0, -1, -1, 0)
    if out['perf_event_open'][0] >= 0:
        os.close(out['perf_event_open'][0])
    bpf_attr = ctypes.create_string_buffer(struct.pack('IIII', 2, 4, 4, 1) + bytes(112))  # array map
    out['bpf'] = call('bpf', 0, bpf_attr, 128)
    if out['bpf'][0] >= 0:
        os.close(out['bpf'][0])
    out['userfaultfd'] = call('userfaultfd', 1)                      # UFFD_USER_MODE_ONLY
    if out['userfaultfd'][0] >= 0:
        os.close(out['userfaultfd'][0])
    out['shmget'] = call('shmget', 0, 4096, 0o1600)                 # IPC_PRIVATE, IPC_CREAT
    if out['shmget'][0] >= 0:
        call('shmctl', out['shmget'][0], 0, None)                    # IPC_RMID
    out['memfd_create'] = call('memfd_create', b't5wall', 0)
    if out['memfd_create'][0] >= 0:
        os.close(out['memfd_create'][0])
    args = ctypes.create_string_buffer(struct.pack('QQQQQQQQ', 0, 0, 0, 0, 17, 0, 0, 0))
    if CONTROL:
        out['clone3'] = call('clone3', args, 8)                       # too small: EINVAL
        out.update(others())
        return out
    out['unshare(CLONE_NEWUSER)'] = call('unshare', 0x10000000)
    out['unshare(CLONE_NEWNS)'] = call('unshare', 0x00020000)
    # a raw clone's child shares nothing of glibc's bookkeeping: it leaves at once
    r = call('clone', 0x10000000 | 17, 0, 0, 0, 0)                   # CLONE_NEWUSER | SIGCHLD
    if r[0] == 0:
        os._exit(0)
    if r[0] > 0:
        os.waitpid(r[0], 0)
    out['clone(CLONE_NEWUSER)'] = r
    r = call('clone', 0x40000000 | 17, 0, 0, 0, 0)                   # CLONE_NEWNET | SIGCHLD
    if r[0] == 0:
        os._exit(0)
    if r[0] > 0:
        os.waitpid(r[0], 0)
    out['clone(CLONE_NEWNET)'] = r
    r = call('clone3', args, 64)
    if r[0] == 0:
        os._exit(0)
    if r[0] > 0:
        os.waitpid(r[0], 0)
    out['clone3'] = r
    netns = os.open('/proc/self/ns/net', os.O_RDONLY)
    out['setns'] = call('setns', netns, 0)
    os.close(netns)
    out['mount'] = call('mount', b'none', b'/tmp', b'tmpfs', 0, None)
    out['umount2'] = call('umount2', b'/tmp', 0)
    out['chroot'] = call('chroot', b'/')
    out['pivot_root'] = call('pivot_root', b'/tmp', b'/tmp')
    r = call('open_tree', -100, b'/tmp', 0)
    if r[0] >= 0:
        os.close(r[0])
    out['open_tree'] = r
    r = call('fsopen', b'tmpfs', 0)
    if r[0] >= 0:
        os.close(r[0])
    out['fsopen'] = r
    out['mount_setattr'] = call('mount_setattr', -100, b'/tmp', 0, buf, 32)
    out['init_module'] = call('init_module', None, 0, b'')
    out['finit_module'] = call('finit_module', -1, b'', 0)
    out['delete_module'] = call('delete_module', b't5wall', 0)
    out['kexec_load'] = call('kexec_load', 0, 0, None, 0)
    out.update(others())
    return out

def others():
    out = {}
    buf = ctypes.create_string_buffer(512)
    child = subprocess.Popen(['sleep', '30'], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        out['ptrace(ATTACH child)'] = call('ptrace', 16, child.pid, 0, 0)   # PTRACE_ATTACH
        local = ctypes.create_string_buffer(8)
        iov_local = struct.pack('QQ', ctypes.addressof(local), 8)
        iov_remote = struct.pack('QQ', 0x400000, 8)
        out['process_vm_readv(child)'] = call('process_vm_readv', child.pid, iov_local, 1,
                                              iov_remote, 1, 0)
        out['kcmp'] = call('kcmp', os.getpid(), child.pid, 0, 0, 0)   # KCMP_FILE
    finally:  # not Popen.kill: a ptrace stop reads to Popen as the child's end
        os.kill(child.pid, 9)
        while not os.WIFSIGNALED(os.waitpid(child.pid, 0)[1]):
            pass
    out['name_to_handle_at'] = call('name_to_handle_at', -100, b'/', buf, buf, 0)
    out['open_by_handle_at'] = call('open_by_handle_at', -100, buf, 0)
    out['personality(PER_LINUX32)'] = call('personality', 8)
    call('personality', 0)
    for name, family in (('AF_VSOCK', 40), ('AF_PACKET', 17), ('AF_ALG', 38)):
        try:
            s = socket.socket(family, socket.SOCK_DGRAM if family != 38 else socket.SOCK_SEQPACKET)
            s.close()
            out['socket(%s)' % name] = [0, 0]
        except OSError as exc:
            out['socket(%s)' % name] = [-1, exc.errno]
    master, slave = os.openpty()
    ch = ctypes.c_char(b'x')
    ctypes.set_errno(0)
    r = libc.ioctl(slave, termios.TIOCSTI, ctypes.byref(ch))
    out['ioctl(TIOCSTI)'] = [r, ctypes.get_errno() if r < 0 else 0]
    os.close(master)
    os.close(slave)
    return out

print('CALLS', json.dumps(probe()))
'''
EPERM, ENOSYS, EAFNOSUPPORT = 1, 38, 97
DENIED = {
    "keyctl": EPERM, "add_key": EPERM, "request_key": EPERM, "io_uring_setup": EPERM,
    "io_uring_enter": EPERM, "io_uring_register": EPERM, "perf_event_open": EPERM,
    "bpf": EPERM, "userfaultfd": EPERM, "shmget": EPERM, "memfd_create": ENOSYS, "unshare(CLONE_NEWUSER)": EPERM,
    "unshare(CLONE_NEWNS)": EPERM, "clone(CLONE_NEWUSER)": EPERM,
    "clone(CLONE_NEWNET)": EPERM, "clone3": ENOSYS, "setns": EPERM, "mount": EPERM,
    "umount2": EPERM, "chroot": EPERM, "pivot_root": EPERM, "open_tree": ENOSYS,
    "fsopen": ENOSYS, "mount_setattr": ENOSYS, "init_module": EPERM, "finit_module": EPERM,
    "delete_module": EPERM, "kexec_load": EPERM, "ptrace(ATTACH child)": EPERM,
    "process_vm_readv(child)": EPERM, "kcmp": EPERM, "name_to_handle_at": EPERM,
    "open_by_handle_at": EPERM, "personality(PER_LINUX32)": EPERM,
    "socket(AF_VSOCK)": EAFNOSUPPORT, "socket(AF_PACKET)": EAFNOSUPPORT,
    "socket(AF_ALG)": EAFNOSUPPORT, "ioctl(TIOCSTI)": EPERM}
"""Each call of :data:`SYSCALLS` and the error the filter answers it with."""


def _syscall_numbers() -> dict[str, int]:
    """This machine's numbers of the calls :data:`SYSCALLS` makes (libseccomp's table)."""
    import pyseccomp

    names = {re.sub(r"\(.*", "", n) for n in DENIED} - {"socket", "ioctl"} | {"clone", "shmctl"}
    numbers = {n: pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, n) for n in names}
    missing = [n for n, nr in numbers.items() if nr < 0]
    assert not missing, f"libseccomp knows no number for {missing} here"
    return numbers


def _probe_code() -> str:
    return SYSCALLS.replace("NUMBERS", repr(_syscall_numbers()))


def _control_code() -> str:
    """The probe for the host, which dumps its stack and ends if it is still running
    after 40 s (a hang then says where it hung)."""
    return ("import faulthandler\nfaulthandler.dump_traceback_later(40, exit=True)\n"
            + _probe_code().replace("NR = ", "CONTROL = True\nNR = ", 1))


def test_each_denied_call_is_an_oserror_in_model_code_and_the_run_goes_on():
    """Model code calls each family the filter denies through ``ctypes`` (keyrings,
    io_uring, perf_event_open, bpf, userfaultfd, new namespaces by unshare, clone and
    clone3, setns, the old and the new mount API, modules and kexec, ptrace and
    process_vm_readv of its own child, kcmp, files by handle, personality, AF_VSOCK,
    AF_PACKET and AF_ALG sockets, TIOCSTI); a second step answers.  Claim: each call
    fails with the filter's error number (EPERM; ENOSYS for clone3 and the new mount
    API, as Flatpak answers; EAFNOSUPPORT for the socket families), the worker lives on
    and the run answers."""
    code = "CONTROL = False\n" + _probe_code()
    res, _, _ = run_isolated(code, "FINAL('done')", step_timeout=30)
    calls = _json_line(_outputs(res), "CALLS")
    wrong = {n: (calls.get(n), e) for n, e in DENIED.items()
             if calls.get(n) != [-1, e]}
    assert not wrong, f"calls not denied as expected ((ret, errno), wanted errno): {wrong}"
    assert res.answer == "done" and res.steps == 2


def test_the_filter_is_what_denies_them():
    """The calls of the test above that change nothing outside their process, on the
    host, outside the wall, in a process of the same uid (a control).  Claim: what the
    kernel allows there (keyrings, io_uring, kcmp, ptrace of one's child, another
    personality; clone3 answers EINVAL to a bad size, not ENOSYS) is refused in the
    sandbox by the filter, not by chance."""
    script = Path(tempfile.mkdtemp(prefix="t5-wall-")) / "probe.py"
    try:
        script.write_text(_control_code())
        run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(script.parent, ignore_errors=True)
    assert run.returncode == 0, (run.stdout[-1000:], run.stderr[-3000:])
    outside = _json_line(run.stdout, "CALLS")
    allowed = sorted(n for n, (ret, _) in outside.items() if ret >= 0)
    for name in ("keyctl", "io_uring_setup", "kcmp", "ptrace(ATTACH child)",
                 "personality(PER_LINUX32)", "shmget", "memfd_create"):
        assert name in allowed, f"{name} is refused on the host too: {outside[name]}"
    assert outside["clone3"] == [-1, 22], outside["clone3"]  # EINVAL: the kernel's answer


KEYRING_SECRET = "t5-wall-krb5-ticket-host-only-secret"
Y15_ATTACK = r'''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
k = libc.syscall(KEYCTL, 10, ctypes.c_long(-3), b"user", b"t5-wall-y15", 0)   # KEYCTL_SEARCH
print('search', k, ctypes.get_errno())
for serial in range(1, 50) if k < 0 else [k]:
    buf = ctypes.create_string_buffer(200)
    n = libc.syscall(KEYCTL, 11, ctypes.c_long(serial), buf, 200)       # KEYCTL_READ
    if n > 0:
        print('READ', buf.raw[:n])
try:
    print('PROC_KEYS', repr(open('/proc/keys').read()))
except OSError as exc:
    print('PROC_KEYS', exc.strerror)
'''


def y15_host():
    """In a child host: a fresh session keyring holding a secret, then the attack."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    numbers = _syscall_numbers()
    libc.syscall(numbers["keyctl"], 1, None)  # KEYCTL_JOIN_SESSION_KEYRING, anonymous
    secret = KEYRING_SECRET.encode()
    serial = libc.syscall(numbers["add_key"], b"user", b"t5-wall-y15", secret, len(secret),
                          ctypes.c_long(-3))
    code = Y15_ATTACK.replace("KEYCTL", str(numbers["keyctl"]))
    res, lm, took = run_isolated(code, "FINAL('done')", step_timeout=20)
    report(serial=serial, errno=ctypes.get_errno(), **summary(res, lm, took))


def test_y15_model_code_cannot_read_the_hosts_session_keyring():
    """Case y15_session_keyring_secret: the host keeps a secret in its kernel session
    keyring (as Kerberos' KEYRING credential caches do); model code searches its session
    keyring, reads every key serial it can, and reads ``/proc/keys``.  Claim: model code
    cannot read the user's secrets: keyctl is denied (EPERM), ``/proc/keys`` cannot be
    read, and neither the secret nor its name appears anywhere (for any uid)."""
    child = host_child(f"{__name__}:y15_host", 120)
    res = child.result
    assert res is not None, child.describe()
    assert res["serial"] > 0, f"the host could not add its key (errno {res['errno']})"
    out = "\n".join(res["outputs"])
    assert KEYRING_SECRET not in out and "READ" not in out, out[-1200:]
    assert re.search(r"^search -1 1$", out, re.M), out[-1200:]  # EPERM
    assert "PROC_KEYS Permission denied" in out, out[-1200:]
    assert "t5-wall-y15" not in out, out[-1200:]
    assert res["answer"] == "done"


INT80 = r'''
import ctypes, mmap, os, struct, sys
def int80(nr, a=0, b=0, c=0):
    """The i386 system call ``nr`` through ``int 0x80`` from this 64-bit process."""
    code = (b"\x53\xb8" + struct.pack("<I", nr) + b"\xbb" + struct.pack("<I", a & 0xffffffff)
            + b"\xb9" + struct.pack("<I", b & 0xffffffff) + b"\xba" + struct.pack("<I", c & 0xffffffff)
            + b"\xcd\x80\x5b\xc3")
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    return ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
print('getpid', int80(20) == os.getpid())
print('keyctl', int80(288, 0, -3, 0))      # i386 keyctl(KEYCTL_GET_KEYRING_ID, @s)
'''


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the i386 ABI of x86_64 kernels")
def test_the_32_bit_abi_meets_the_same_filter():
    """Model code makes system calls through the i386 ABI (``int 0x80``, which a 64-bit
    x86 process may use when the kernel has IA32 emulation), in a child process.  Claim:
    the filter covers that ABI too (Flatpak adds it): keyctl answers -EPERM there, where
    on the host, outside the wall, it answers the keyring's serial."""
    outside = subprocess.run([sys.executable, "-c", INT80], capture_output=True, text=True,
                             timeout=30)
    if "getpid True" not in outside.stdout:
        pytest.skip(f"this kernel runs no i386 code (no IA32 emulation): {outside}")
    assert int(re.search(r"keyctl (-?\d+)", outside.stdout)[1]) > 0, outside.stdout
    attack = ("import subprocess, sys\n"
              f"r = subprocess.run([sys.executable, '-c', {INT80!r}], capture_output=True, "
              "text=True)\nprint(r.stdout, r.returncode)")
    res, _, _ = run_isolated(attack, "FINAL('done')", step_timeout=30)
    out = _outputs(res)
    assert "getpid True" in out and "keyctl -1\n" in out, out[-800:]


# -- working folders as root: idmapped ------------------------------------------------------------
WRITE_WORKDIR = r'''
import os, subprocess
open('by-python.txt', 'w').write('x')
with open('existing.txt', 'a') as f:
    f.write(' and more')
os.mkdir('made')
subprocess.run(['sh', '-c', 'echo y > made/by-shell.txt'], check=True)
print('WROTE', sorted(os.listdir('.')))
'''


@pytest.mark.parametrize("owner", ["caller", "another uid"])
def test_the_working_folder_is_written_as_its_owner(tmp_path, owner):
    """Model code writes the working folder (a new file, an existing one, a folder and
    a file from a shell).  Claim: the folder stays writable to model code, and what it
    writes belongs on the host to the folder's owner, never to the sandbox's host uid:
    as root through an idmapped mount (a folder of root's under ``/root``'s 0700 tree
    included), as a user because the folder is the user's."""
    if owner == "another uid" and not ROOT_CALLER:
        pytest.skip("only root can give a folder to another uid")
    parent = Path(tempfile.mkdtemp(prefix="t5-wall-", dir=str(Path.home()) if ROOT_CALLER
                                   and owner == "caller" else None))
    try:
        work = parent / "work"
        work.mkdir()
        (work / "existing.txt").write_text("old")
        uid, gid = (os.getuid(), os.getgid()) if owner == "caller" else (1000, 1000)
        if owner != "caller":
            for p in (work, work / "existing.txt"):
                os.chown(p, uid, gid)
        res, _, _ = run_isolated(WRITE_WORKDIR, "FINAL('done')", step_timeout=20,
                                 workdir=str(work))
        assert "WROTE" in _outputs(res), _outputs(res)[-800:]
        made = [work / "by-python.txt", work / "existing.txt", work / "made",
                work / "made" / "by-shell.txt"]
        owners = {str(p.relative_to(work)): (p.stat().st_uid, p.stat().st_gid) for p in made}
        assert set(owners.values()) == {(uid, gid)}, owners
        assert (work / "existing.txt").read_text() == "old and more"
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_a_working_folder_that_refuses_idmapped_mounts_gets_one_readable_error(tmp_path):
    """As root, a working folder on a file system that refuses idmapped mounts (ramfs):
    the executor refuses to start with one message saying what to do, never a sandbox
    that writes it as root."""
    if not ROOT_CALLER:
        pytest.skip("an ordinary user's working folder is its own: no idmapped mount")
    from rlm_kernel.executors.sandbox import SandboxUnavailable

    folder = tmp_path / "ramfs"
    folder.mkdir()
    subprocess.run(["mount", "-t", "ramfs", "none", str(folder)], check=True)
    try:
        with pytest.raises(SandboxUnavailable, match="refuses idmapped mounts") as caught:
            IsolatedExecutor(workdir=folder)
        assert "run rlm as an ordinary user" in str(caught.value)
        assert not list(folder.iterdir())
    finally:
        subprocess.run(["umount", str(folder)], check=True)


READ_BESIDE = r'''
import json, os
found = {'cwd': os.getcwd()}
for p in PATHS:
    try:
        with open(p) as f:
            found[p] = 'READ ' + f.read(40)
    except OSError as exc:
        found[p] = exc.strerror
try:
    open('t5-written', 'w')
    found['write'] = 'wrote'
except OSError as exc:
    found['write'] = exc.strerror
print('BESIDE', json.dumps(found))
'''
_KEY = "sk-t5-wall-0123456789abcdef-owner-only"


def _project(parent: Path) -> Path:
    """``parent`` (made, mode 0700) holding ``project/`` (0700) with a 0600 ``.env`` and
    a 0644 ``data.txt``: a project folder as users keep them."""
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    parent.chmod(0o700)
    project = parent / "project"
    project.mkdir(mode=0o700)
    (project / ".env").write_text(f"OPENAI_API_KEY={_KEY}\n")
    (project / ".env").chmod(0o600)
    (project / "data.txt").write_text("the caller's data\n")
    return project


def _places(tmp_path: Path) -> dict[str, Path]:
    """Where a caller's project may be: in the home, under ``/tmp``, and (as root, who
    alone can make one) in a 0700 folder outside the homes and the private folders."""
    places = {"home": Path.home() / f".rlm-t5-{uuid.uuid4().hex[:8]}",
              "tmp": tmp_path / "tree"}
    if ROOT_CALLER:
        places["0700 outside the homes"] = Path(tempfile.mkdtemp(prefix="rlm-t5-",
                                                                 dir="/var/lib"))
    return places


def test_z22_the_callers_owner_only_files_are_out_of_reach_wherever_it_started(tmp_path):
    """Case z22_cwd_0700_owner_only: the caller starts the executor from a project
    folder holding a 0600 ``.env``, in a 0700 folder (``cd /srv/proj && rlm run``): in
    the home, under ``/tmp``, and as root outside the homes.  The folder was bound back
    (as root idmapped, so root's owner-only files read as the sandbox's own).  Claim:
    nothing of the caller's folder is bound; the worker starts in its own ``/tmp``, and
    the files are unreadable by their paths."""
    places = _places(tmp_path)
    try:
        for where, parent in places.items():
            project = _project(parent)
            paths = [str(project / ".env"), str(project / "data.txt")]
            with IsolatedExecutor(cwd=project, max_processes=8) as ex:
                res = ex.execute(f"PATHS = {paths!r}\n" + READ_BESIDE)
            found = _json_line(res.stdout, "BESIDE")
            assert found["cwd"] == "/tmp", (where, found)
            read = {p: r for p, r in found.items() if r.startswith("READ")}
            assert read == {}, (where, read)
            assert _KEY not in res.stdout + res.stderr
    finally:
        for parent in places.values():
            shutil.rmtree(parent, ignore_errors=True)


def test_the_worker_starts_in_the_callers_folder_when_the_sandbox_may_read_it():
    """The caller's folder is one the sandbox's uid can read through the read-only
    ``/`` as any other path (``/etc``).  Claim: the worker starts there, reads it, and
    writes nothing there."""
    with IsolatedExecutor(cwd="/etc", max_processes=8) as ex:
        res = ex.execute("PATHS = ['passwd']\n" + READ_BESIDE)
    found = _json_line(res.stdout, "BESIDE")
    assert found["cwd"] == "/etc" and found["passwd"].startswith("READ root:"), found
    assert found["write"] == "Read-only file system", found


APP = r'''
import json, os, sys
from rlm_kernel.executors import sandbox
from rlm_kernel.executors.isolated import IsolatedExecutor
paths = json.loads(sys.argv[1])
with IsolatedExecutor(max_processes=8) as ex:
    res = ex.execute("PATHS = %r\n" % paths + sys.argv[2])
print(json.dumps({"package_root": sandbox.PACKAGE_ROOT, "stdout": res.stdout,
                  "stderr": res.stderr[-2000:]}))
'''


def test_z02_the_programs_folder_and_the_checkout_stay_hidden(tmp_path):
    """Case z02_script_folder_dotenv: the user's program lives in a project folder with a
    0600 ``.env`` beside it (``python ~/proj/app.py``, which puts the folder first on
    ``sys.path``), and runs this package from a checkout (``PYTHONPATH``, as an
    editable install does) that holds a ``.env`` too; both in a 0700 folder: in the
    home, under ``/tmp``, and as root outside the homes.  Every folder of ``sys.path``
    and the whole checkout were bound back (as root idmapped: root's owner-only files
    read as the sandbox's own).  Claim: the program's folder and the checkout are not
    bound: both ``.env`` files are unreadable, while the package folder itself (what the
    worker runs) is there."""
    places = _places(tmp_path)
    try:
        for where, parent in places.items():
            project = _project(parent)
            checkout = parent / "checkout"
            shutil.copytree(PACKAGE_DIR, checkout / "rlm_kernel",
                            ignore=shutil.ignore_patterns("__pycache__"))
            (checkout / ".env").write_text(f"OPENAI_API_KEY={_KEY}\n")
            (checkout / ".env").chmod(0o600)
            checkout.chmod(0o700)
            (project / "app.py").write_text(APP)
            paths = [str(project / ".env"), str(project / "data.txt"), str(checkout / ".env"),
                     str(checkout / "rlm_kernel" / "__init__.py")]
            env = {**os.environ, "PYTHONPATH": str(checkout)}
            run = subprocess.run([sys.executable, str(project / "app.py"), json.dumps(paths),
                                  READ_BESIDE], capture_output=True, text=True, timeout=120,
                                 cwd=project, env=env)
            assert run.returncode == 0, (where, run.stdout[-1500:], run.stderr[-3000:])
            told = json.loads(run.stdout.splitlines()[-1])
            assert told["package_root"] == str(checkout), (where, told)
            found = _json_line(told["stdout"], "BESIDE")
            read = sorted(p for p, r in found.items() if r.startswith("READ"))
            assert read == [paths[3]], (where, found, told["stderr"])
            assert _KEY not in run.stdout
    finally:
        for parent in places.values():
            shutil.rmtree(parent, ignore_errors=True)


SHADOW = r'''
import os
os.makedirs('rlm_kernel/executors', exist_ok=True)
for name in ('rlm_kernel/__init__.py', 'rlm_kernel/executors/__init__.py'):
    open(name, 'w').close()
with open('rlm_kernel/executors/worker.py', 'w') as f:
    f.write("import resource\n"
            "resource.setrlimit(resource.RLIMIT_AS, (-1, -1))\n"
            "open('/proc/self/cwd/SHADOW-RAN', 'w').write('x')\n"
            "raise SystemExit(0)\n")
os._exit(3)
'''
LIMITS = r'''
import resource
print('LIMITS', resource.getrlimit(resource.RLIMIT_AS), resource.getrlimit(resource.RLIMIT_CORE))
for pid in (1, 'self'):
    line = [l for l in open('/proc/%s/limits' % pid) if l.startswith('Max address space')]
    print('PROC', pid, line[0].split()[3:5])
import os
print('RAN', os.path.exists('SHADOW-RAN'))
'''


def test_a_worker_module_written_in_the_working_folder_never_starts(tmp_path):
    """Model code writes ``rlm_kernel/executors/worker.py`` into the working folder (the
    worker's own folder, first on ``sys.path`` of ``python -m``) and kills the worker, so
    that the restart would run it: it lifts ``RLIMIT_AS`` and leaves a mark.  Claim: the
    restarted worker is the package's own (the mark is never made), and every process of
    the sandbox, bubblewrap's init included, holds the memory limit set before the
    sandbox started."""
    work = tmp_path / "work"
    work.mkdir()
    limit = 1 << 30
    res, _, _ = run_isolated(SHADOW, LIMITS, "FINAL('done')", step_timeout=20,
                             workdir=str(work), memory_limit=limit)
    out = _outputs(res)
    assert not (work / "SHADOW-RAN").exists() and "RAN False" in out, out[-1500:]
    assert f"LIMITS ({limit}, {limit}) (0, 0)" in out, out[-1500:]
    assert f"PROC 1 ['{limit}', '{limit}']" in out, out[-1500:]
    assert res.answer == "done"


def test_dev_holds_no_file_of_model_code():
    """Model code writes a file into ``/dev`` (bubblewrap's own tmpfs, half the machine's
    memory, counted by no size of ours).  Claim: ``/dev`` is read-only, its device nodes
    still work, ``/dev/shm`` stays the private, sized tmpfs."""
    code = ("import os\ntry:\n    open('/dev/rlm-t5', 'w').write('x' * 100)\n"
            "    print('DEV wrote')\nexcept OSError as exc:\n    print('DEV', exc.errno)\n"
            "open('/dev/null', 'w').write('x')\nprint('ZERO', len(open('/dev/zero', 'rb').read(4)))\n"
            "open('/dev/shm/x', 'w').write('x')\nprint('SHM ok')")
    res, _, _ = run_isolated(code, "FINAL('done')")
    out = _outputs(res)
    assert "DEV 30" in out and "ZERO 4" in out and "SHM ok" in out, out[-1000:]


# -- z01 and siblings: setuid and setgid files in the working folder ------------------------------
SETUID = r'''
import ctypes, errno, json, os, shutil, stat
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
shutil.copy('/usr/bin/id', 'idcopy')
found = {}

def attempt(name, call):
    try:
        result = call()
        if isinstance(result, int) and result >= 0 and name.startswith(('open', 'tmpfile')):
            os.close(result)
        found[name] = 0 if not isinstance(result, int) or result >= 0 else ctypes.get_errno()
    except OSError as exc:
        found[name] = exc.errno

def raw(number, *args):
    ctypes.set_errno(0)
    return libc.syscall(number, *args)

fd = os.open('idcopy', os.O_RDONLY)
AT_FDCWD = -100
how = ctypes.create_string_buffer(24)  # struct open_how: flags, mode, resolve
ctypes.memmove(how, (ctypes.c_uint64 * 3)(os.O_CREAT | os.O_WRONLY, 0o4755, 0), 24)
for mode in (0o6755, 0o4755, 0o2755, 0o4000):
    attempt(f'chmod {mode:o}', lambda: os.chmod('idcopy', mode))
attempt('fchmod 4755', lambda: os.fchmod(fd, 0o4755))
attempt('fchmodat nofollow 2755', lambda: os.chmod('idcopy', 0o2755, follow_symlinks=False))
attempt('fchmodat2 4755', lambda: raw(452, AT_FDCWD, b'idcopy', 0o4755, 0))
attempt('open creat 4755', lambda: os.open('made-open', os.O_CREAT | os.O_WRONLY, 0o4755))
attempt('openat creat 2755', lambda: os.open('made-openat', os.O_CREAT | os.O_WRONLY, 0o2755,
                                             dir_fd=os.open('.', os.O_RDONLY)))
attempt('tmpfile 6755', lambda: os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o6755))
attempt('creat 4755', lambda: libc.creat(b'made-creat', 0o4755))
attempt('mknod regular 4755', lambda: os.mknod('made-mknod', stat.S_IFREG | 0o4755))
attempt('mknod fifo 2755', lambda: os.mknod('made-fifo', stat.S_IFIFO | 0o2755))
attempt('openat2 4755', lambda: raw(437, AT_FDCWD, b'made-openat2', how, 24))
# what tools do keeps working: +x, a plain new file, a sticky folder, a fifo
attempt('chmod 755', lambda: os.chmod('idcopy', 0o755))
attempt('open creat 644', lambda: os.open('plain', os.O_CREAT | os.O_WRONLY, 0o644))
os.mkdir('shared')
attempt('chmod 1777', lambda: os.chmod('shared', 0o1777))
attempt('mknod fifo 644', lambda: os.mknod('fifo', stat.S_IFIFO | 0o644))
print('SETUID', json.dumps(found))
'''
SETUID_DENIED = ("chmod 6755", "chmod 4755", "chmod 2755", "chmod 4000", "fchmod 4755",
                 "fchmodat nofollow 2755", "fchmodat2 4755", "open creat 4755",
                 "openat creat 2755", "tmpfile 6755", "creat 4755", "mknod regular 4755",
                 "mknod fifo 2755")
SETUID_ALLOWED = ("chmod 755", "open creat 644", "chmod 1777", "mknod fifo 644")


def test_z01_model_code_makes_no_setuid_or_setgid_file_in_the_working_folder():
    """Case z01_setuid_root_in_workdir: model code copies ``/usr/bin/id`` into the
    working folder and sets its setuid and setgid bits (``chmod 6755``), and tries every
    other call that makes or creates a file with either bit: ``fchmod``, ``fchmodat``,
    ``fchmodat2``, ``open``/``openat`` with ``O_CREAT`` or ``O_TMPFILE``, ``creat``,
    ``mknod``, ``openat2``.  As root the folder is written as its owner, root, so a
    setuid copy would be a setuid-root program on the host's disk (run by uid 1000
    there it printed ``euid=0``); as a user, a program that runs as that user for
    whoever may reach the folder.  Claim: each call is refused (``EPERM``; ``openat2``
    ``ENOSYS``), no file of the folder has either bit, and what tools do (``chmod +x``,
    new files, a sticky folder, a fifo) still works; on the host, outside the wall, the
    kernel lets the file's owner set the bits (a control: the filter is what denies)."""
    work = Path(tempfile.mkdtemp(prefix="rlm-t5-z01-", dir="/var/tmp"))
    try:
        work.chmod(0o755)
        res, _, _ = run_isolated(SETUID, "FINAL('done')", step_timeout=20, workdir=str(work))
        found = _json_line(_outputs(res), "SETUID")
        wanted = {**dict.fromkeys(SETUID_DENIED, errno.EPERM), "openat2 4755": errno.ENOSYS,
                  **dict.fromkeys(SETUID_ALLOWED, 0)}
        assert found == wanted, {k: (found.get(k), v) for k, v in wanted.items()
                                 if found.get(k) != v}
        marked = {str(p.relative_to(work)): oct(p.lstat().st_mode) for p in work.rglob("*")
                  if p.lstat().st_mode & (stat.S_ISUID | stat.S_ISGID)}
        assert marked == {}, marked
        assert stat.S_IMODE((work / "idcopy").stat().st_mode) == 0o755
        assert res.answer == "done"
        control = work / "control"
        shutil.copy("/usr/bin/id", control)  # the same call on the host, as the owner
        control.chmod(0o6755)
        assert control.stat().st_mode & (stat.S_ISUID | stat.S_ISGID)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- z27: a working folder inside a home that lies inside a folder bound back ---------------------
def _venv_with_this_projects_packages(folder: Path) -> Path:
    """A venv at ``folder`` whose ``site-packages`` holds a ``.pth`` to this Python's
    (what the worker imports from); its interpreter."""
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   timeout=120)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(folder)}))
    (purelib / "project.pth").write_text(
        "".join(f"{p}\n" for p in sys.path if p.endswith("site-packages")))
    return folder / "bin" / "python"


def test_z27_a_working_folder_in_a_home_inside_a_bound_folder_is_the_workers_folder(
        tmp_path, monkeypatch):
    """Case z27_workdir_in_home_under_tmp: ``HOME`` lies inside a folder the sandbox binds
    back (here the worker's venv; in the case, the program's folder under ``/tmp``, as
    CI runners and ``HOME=$(mktemp -d)`` make it), and the working folder inside that
    home.  The home was hidden again over the working folder, so bubblewrap could not
    enter it.  Claim: the worker starts in the working folder and writes there; the
    rest of that home stays hidden."""
    python = _venv_with_this_projects_packages(tmp_path / "venv")
    home = tmp_path / "venv" / "home"
    work = home / "proj"
    work.mkdir(parents=True)
    (home / "secret.txt").write_text("the home's own file")
    monkeypatch.setenv("HOME", str(home))
    with IsolatedExecutor(python=str(python), workdir=work, max_processes=8) as ex:
        res = ex.execute("import os\nprint(os.getcwd())\nopen('made.txt', 'w').write('x')\n"
                         f"print(os.path.exists({str(home / 'secret.txt')!r}))")
    assert res.stdout.splitlines() == [str(work), "False"], (res.stdout, res.stderr)
    assert (work / "made.txt").read_text() == "x"


# -- z16: what git runs from the working folder's repository ------------------------------------
GIT_WRITES = r'''
import json, os, subprocess
found = {}
def attempt(name, path, text, mode='a'):
    try:
        with open(path, mode) as f:
            f.write(text)
        found[name] = 'wrote'
    except OSError as exc:
        found[name] = exc.strerror
attempt('config', CONFIG, '[core]\n\tfsmonitor = "sh -c \'id > %s\'; false"\n' % MARK)
attempt('hook', os.path.join(GITDIR, 'hooks', 'pre-commit'), '#!/bin/sh\nid > %s\n' % MARK, 'w')
attempt('dot git file', '.git', 'gitdir: elsewhere\n') if os.path.isfile('.git') else None
attempt('work file', 'notes.txt', 'model code was here\n')
found['log'] = subprocess.run(['git', 'log', '--format=%s'], capture_output=True,
                              text=True).stdout.strip()
print('GIT', json.dumps(found))
'''


@pytest.mark.parametrize("layout", ["git folder", "gitdir file"])
def test_z16_model_code_cannot_write_what_git_runs_from_the_working_folder(tmp_path, layout):
    """Case z16_git_config_in_workdir: the working folder is a git checkout (a ``.git``
    folder, or a ``.git`` file naming its git folder inside the working folder, as
    ``git init --separate-git-dir`` and worktrees make); model code adds
    ``core.fsmonitor`` (a command git runs on ``git status``) to its config and a
    ``pre-commit`` hook, and rewrites the ``.git`` file; the user then runs
    ``git status`` there.  Claim: as Codex's Linux sandbox does, the repository's git
    folder (and a ``.git`` file) are read-only in the sandbox: every write fails with
    ``EROFS``, model code still reads the history and writes the rest of the folder,
    and the user's ``git status`` runs nothing of model code's."""
    git = shutil.which("git")
    assert git, "git is needed to try this case (Debian's git)"
    work = tmp_path / "work"
    work.mkdir()
    if layout == "git folder":
        subprocess.run([git, "init", "-q", str(work)], check=True)
        gitdir = work / ".git"
    else:
        gitdir = work / "store"
        subprocess.run([git, "init", "-q", f"--separate-git-dir={gitdir}", str(work)],
                       check=True)
        assert (work / ".git").is_file()
    (work / "data.txt").write_text("data\n")
    ident = ["-c", "user.name=t5", "-c", "user.email=t5@example.invalid"]
    subprocess.run([git, "-C", str(work), *ident, "add", "data.txt"], check=True)
    subprocess.run([git, "-C", str(work), *ident, "commit", "-qm", "first commit"], check=True)
    config_before = (gitdir / "config").read_text()
    mark = tmp_path / "ran-on-the-host"
    code = (f"CONFIG, GITDIR, MARK = {str(gitdir / 'config')!r}, {str(gitdir)!r}, "
            f"{str(mark)!r}\n" + GIT_WRITES)
    res, _, _ = run_isolated(code, "FINAL('done')", step_timeout=20, workdir=str(work))
    found = _json_line(_outputs(res), "GIT")
    wanted = {"config": "Read-only file system", "hook": "Read-only file system",
              "work file": "wrote", "log": "first commit"}
    if layout == "gitdir file":
        wanted["dot git file"] = "Read-only file system"
    assert found == wanted, found
    assert (gitdir / "config").read_text() == config_before
    assert not (gitdir / "hooks" / "pre-commit").exists()
    subprocess.run([git, "-C", str(work), "status", "--short"], capture_output=True,
                   timeout=30, check=True)
    assert not mark.exists(), mark.read_text()
    assert (work / "notes.txt").read_text() == "model code was here\n"


# -- z13: the host's abstract UNIX sockets with the network on -----------------------------------
UNIX_SOCKETS = r'''
import errno, json, multiprocessing, multiprocessing.connection, platform, re, socket, subprocess, sys
found = {}
def attempt(name, fn):
    try:
        found[name] = fn()
    except OSError as exc:
        found[name] = errno.errorcode.get(exc.errno, str(exc.errno))
def abstract():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(NAME)
    return s.recv(100).decode()
def stream_pair():
    a, b = socket.socketpair()
    a.sendall(b'x')
    return b.recv(1).decode()
attempt('abstract', abstract)
attempt('unix socket', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close() or 'made')
attempt('datagram pair', lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM) and 'made')
attempt('stream pair', stream_pair)
attempt('ip socket', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close() or 'made')
attempt('listener', lambda: multiprocessing.connection.Listener().close() or 'made')
with multiprocessing.get_context('fork').Pool(2) as pool:
    found['pool'] = pool.map(abs, [-1, -2])
if platform.machine() == 'x86_64':
    run = subprocess.run([sys.executable, '-c', INT80 + "print('unix32', int80(359, 1, 1, 0))"],
                         capture_output=True, text=True)
    got = re.search(r'unix32 (-?\d+)', run.stdout)
    found['i386 socket'] = int(got[1]) if got and 'getpid True' in run.stdout else 'no i386'
print('UNIX', json.dumps(found))
'''


def test_z13_with_the_network_on_model_code_reaches_no_abstract_unix_socket_of_the_host():
    """Case z13_abstract_socket_with_network: a host process listens on an abstract UNIX
    socket (as D-Bus, X11 and agents do); model code connects to it, with the network
    off and with ``network=True``, which shares the host's network namespace, where
    abstract sockets live (no file, no permission bits).  Claim: with the network off
    the socket is in another namespace (refused); with it on, the filter lets model code
    make no ``AF_UNIX`` socket and no datagram pair (``EAFNOSUPPORT``, as Anthropic's
    sandbox-runtime denies them), through the i386 ABI too; stream pairs, IP sockets
    and ``multiprocessing``'s pools still work, its ``Listener`` (an ``AF_UNIX`` path)
    does not.  The host's own connection (a control) reaches the socket."""
    name = f"\0rlm-t5-z13-{uuid.uuid4().hex[:8]}".encode()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(name)
    server.listen(8)
    accepted: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(1)
            conn.sendall(b"host-agent-secret")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    code = f"NAME = {name!r}\nINT80 = {INT80!r}\n" + UNIX_SOCKETS
    try:
        found = {}
        for network in (False, True):
            with IsolatedExecutor(network=network, max_processes=16) as ex:
                res = ex.execute(code, timeout=60)
            found[network] = _json_line(res.stdout, "UNIX")
        control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        control.connect(name)
        assert control.recv(100) == b"host-agent-secret"
        control.close()
    finally:
        server.close()
    assert accepted == [1], (accepted, found)  # the control's connection only
    off, on = found[False], found[True]
    assert off["abstract"] == "ECONNREFUSED" and off["unix socket"] == "made", off
    assert off["datagram pair"] == "made" and off["listener"] == "made", off
    refused = "EAFNOSUPPORT"
    assert on["abstract"] == on["unix socket"] == on["datagram pair"] == refused, on
    assert on["listener"] == refused, on
    for seen in (off, on):
        assert seen["stream pair"] == "x" and seen["ip socket"] == "made", seen
        assert seen["pool"] == [1, 2], seen
    if "i386 socket" in on and on["i386 socket"] != "no i386":
        assert on["i386 socket"] == -errno.EAFNOSUPPORT, on
        assert off["i386 socket"] >= 0, off


# -- z28: a working folder that holds the venv and the checkout ----------------------------------
INSTALL_WRITES = r'''
import json, sys
from rlm_kernel.executors.isolated import IsolatedExecutor
work, python, targets = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
code = ("import json\nfound = {}\nfor path in %r:\n"
        "    try:\n        open(path, 'a').write('# model code was here\\n')\n"
        "        found[path] = 'wrote'\n"
        "    except OSError as exc:\n        found[path] = exc.strerror\n"
        "print('WRITES', json.dumps(found))\n") % (targets,)
with IsolatedExecutor(workdir=work, python=python, max_processes=8) as ex:
    res = ex.execute(code)
print(json.dumps({"stdout": res.stdout, "stderr": res.stderr}))
'''


def test_z28_a_working_folder_holding_the_venv_and_the_checkout_keeps_them_read_only(tmp_path):
    """A project given whole as the working folder holds its ``.venv`` (the worker's
    interpreter) and the checkout this package runs from (``PYTHONPATH``, as an
    editable install).  Both were bound read-write with the folder, so model code could
    rewrite a module your process and your next programs import, or the venv's
    kernelspec and Jupyter settings (a command your next notebook runs).  Claim: they
    are bound read-only over the working folder, whose other files model code still
    writes."""
    work = tmp_path / "proj"
    work.mkdir()
    python = _venv_with_this_projects_packages(work / ".venv")
    shutil.copytree(PACKAGE_DIR, work / "rlm_kernel",
                    ignore=shutil.ignore_patterns("__pycache__"))
    site = next((work / ".venv").rglob("site-packages"))
    kernels = work / ".venv" / "share" / "jupyter" / "kernels" / "rlm"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text('{"argv": ["python", "-m", "rlm_kernel"]}\n')
    settings = work / ".venv" / "etc" / "jupyter"
    settings.mkdir(parents=True)
    targets = [str(work / ".venv" / "pyvenv.cfg"), str(site / "project.pth"),
               str(kernels / "kernel.json"), str(settings / "jupyter_server_config.py"),
               str(site / "json.py"), str(work / "rlm_kernel" / "executors" / "worker.py"),
               str(work / "rlm_kernel" / "evil.py"), str(work / "notes.txt")]
    before = {t: Path(t).read_bytes() for t in targets if Path(t).exists()}
    run = subprocess.run([sys.executable, "-c", INSTALL_WRITES, str(work), str(python),
                          json.dumps(targets)], capture_output=True, text=True, timeout=180,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(work)})
    assert run.returncode == 0, (run.stdout[-1500:], run.stderr[-3000:])
    told = json.loads(run.stdout.splitlines()[-1])
    found = _json_line(told["stdout"], "WRITES")
    assert found.pop(targets[-1]) == "wrote", (found, told["stderr"])
    assert set(found.values()) == {"Read-only file system"}, found
    assert {t: Path(t).read_bytes() for t in before} == before
    assert not (site / "json.py").exists() and not (work / "rlm_kernel" / "evil.py").exists()
    assert not (settings / "jupyter_server_config.py").exists()
    assert (work / "notes.txt").read_text() == "# model code was here\n"


def test_z28_a_working_folder_inside_the_installation_is_refused(tmp_path):
    """A working folder inside the venv's ``bin`` or ``lib``, a ``site-packages``
    folder or this package would hand model code what your programs run: refused with
    one error that names the folder, before anything starts."""
    python = _venv_with_this_projects_packages(tmp_path / "venv")
    inside_venv = tmp_path / "venv" / "lib" / "scratch"
    inside_venv.mkdir()
    with pytest.raises(ValueError, match="part of the Python installation"):
        IsolatedExecutor(workdir=python.parent, python=str(python))
    site = next(p for p in sys.path if p.endswith("site-packages"))
    for work, py in ((inside_venv, python), (site, sys.executable),
                     (Path(PACKAGE_DIR) / "executors", sys.executable)):
        with pytest.raises(ValueError, match="part of the Python installation"):
            IsolatedExecutor(workdir=work, python=str(py))


def test_the_wall_starts_from_a_venv_reached_through_a_link_under_tmp(tmp_path):
    """A checkout under ``/tmp`` whose ``.venv`` is a symbolic link to a venv elsewhere
    (a CI cache, a shared venv): the sandbox's ``/tmp`` is its own, so the link's path
    led nowhere there and every start failed (``bwrap: execvp ... No such file``).
    Claim: the worker starts from the venv the link leads to, as that venv (its
    ``sys.prefix``), and model code runs."""
    real = tmp_path / "venvs" / "shared"
    _venv_with_this_projects_packages(real)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".venv").symlink_to(real)
    with IsolatedExecutor(python=str(checkout / ".venv" / "bin" / "python"),
                          max_processes=8) as ex:
        res = ex.execute("import sys\nprint(sys.prefix)")
    assert res.success, res.stderr
    assert res.stdout.strip() == str(real.resolve()), res.stdout
