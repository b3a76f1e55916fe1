"""Fault cases of ``../shared/fault-cases-t4/`` against the wall around model code: what
the worker can see, reach, signal, write and start (DESIGN.md, "Isolation: the wall and
its channel": bubblewrap, a fresh ``/proc`` of a new PID namespace, no network, the
system read-only, a private ``/tmp``, the working folder the only writable place, no
secrets).

The cases x08-x11 fail only where the worker runs as root (CI, containers); here each
attack runs whatever the user, and the test asserts the claim, which holds for any
uid: a run as an ordinary user checks the same thing (a root-only step of an attack is
simply refused there).  Hosts that must hold a secret in their initial environment or
a marker in their memory run as child hosts (:func:`.t4_support.host_child`).  Every
attack finds "the host" as model code would: by a marker in a process's command line.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from .t4_support import (
    ROOT,
    SECRET,
    cli_command,
    host_child,
    kill_all,
    leftover,
    report,
    run_isolated,
    summary,
)

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="Linux namespaces"),
              pytest.mark.timeout(180)]

HERE = __name__
HOST_MARK = "T4-HOST-CMDLINE-MARKER"
"""The child hosts' command lines hold this (the attacks look for it in /proc)."""
NEEDLE = b"T4-HOST-MARKER--" + b"0" * 16
"""Bytes a child host holds in a bytearray; an attack that can write the host's memory
overwrites them."""
SECRETS = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.I)

FIND_HOSTS = r'''
import os
MARK = bytes.fromhex('MARK_HEX')
def marked():
    """The processes model code can see whose command line holds MARK."""
    found = []
    for name in os.listdir('/proc'):
        if name.isdigit() and int(name) != os.getpid():
            try:
                if MARK in open('/proc/%s/cmdline' % name, 'rb').read():
                    found.append(int(name))
            except OSError:
                pass
    return found
'''.replace("MARK_HEX", HOST_MARK.encode().hex())
"""Model code (a prelude): ``marked()``, the pids of the child hosts it can see."""

PATCH_MEMORY = r'''
def patch_memory(p):
    """Overwrite NEEDLE in every writable mapping of process p (through /proc/p/mem)."""
    needle, hits = bytes.fromhex('NEEDLE_HEX'), 0
    with open('/proc/%d/mem' % p, 'r+b', buffering=0) as mem:
        for line in open('/proc/%d/maps' % p):
            span, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in span.split('-'))
            if 'rw' not in perms or hi - lo > 256 << 20:
                continue
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except OSError:
                continue
            start = data.find(needle)
            while start >= 0:
                mem.seek(lo + start)
                mem.write(needle[:16] + b'WORKER-WROTE-IT!')
                hits += 1
                start = data.find(needle, start + 1)
    return hits
'''.replace("NEEDLE_HEX", NEEDLE.hex())
"""Model code (a prelude): ``patch_memory(pid)``."""


def _child(func: str) -> str:
    return f"{HERE}:{func}"


def _host_env() -> dict[str, str]:
    """A child host's environment: this one's without anything named like a secret,
    and a fake ``OPENAI_API_KEY`` (an attack that leaks it leaks nothing real)."""
    return {"OPENAI_API_KEY": SECRET}


def _host_child(func: str, timeout: float = 90, env: dict[str, str] | None = None):
    drop = tuple(k for k in os.environ if SECRETS.search(k))
    return host_child(_child(func), timeout, env={**_host_env(), **(env or {})},
                      argv=(HOST_MARK,), drop_env=drop)


def _marker() -> bytearray:
    """In a child host: the bytes an attack on its memory looks for (built at run time,
    so that no constant of the code holds them)."""
    return bytearray(NEEDLE[:16]) + bytearray(b"0") * 16


def _intact(mark: bytearray) -> bool:
    """The marker of :func:`_marker` is as it was made (compared with bytes made now:
    an attack that writes the host's memory rewrites :data:`NEEDLE` too)."""
    return bytes(mark[16:]) == bytes(16 * [0x30])


class _TcpServer:
    """A TCP server on 127.0.0.1 that keeps what it receives."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.got: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(2)
            try:
                self.got.append(conn.recv(100))
            except OSError:
                self.got.append(b"<connected>")
            conn.close()

    def close(self) -> None:
        self.sock.close()


class _UnixServer(_TcpServer):
    """A UNIX-domain stream server (a path, or an abstract name starting with NUL)."""

    def __init__(self, address: str) -> None:  # noqa: D107 - see the class
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(address)
        self.sock.listen(16)
        self.address = address
        self.got = []
        threading.Thread(target=self._serve, daemon=True).start()


@pytest.fixture()
def outside_tmp():
    """A folder the host can write outside ``/tmp`` (so a private ``/tmp`` in the wall
    does not hide it): under ``/var/tmp``, else the home folder, else the project."""
    for parent in ("/var/tmp", str(Path.home()), str(ROOT)):
        try:
            folder = tempfile.mkdtemp(prefix="rlm-t4-", dir=parent)
            break
        except OSError:
            continue
    else:
        pytest.fail("no writable folder outside /tmp for the test")
    yield Path(folder)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture()
def short_tmp():
    """A folder under /tmp with a short path (UNIX socket paths are short)."""
    folder = tempfile.mkdtemp(prefix="t4-")
    yield Path(folder)
    shutil.rmtree(folder, ignore_errors=True)


def _sleeper(*argv: str) -> subprocess.Popen:
    """A process of the user's (sleeps 120 s) with ``argv`` in its command line."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *argv],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()


# -- x08: a secret in the host's environment --------------------------------------------------
X08_ATTACK = FIND_HOSTS + r'''
import base64
seen, keys = marked(), []
for p in seen:
    try:
        env = open('/proc/%d/environ' % p, 'rb').read().split(b'\0')
    except OSError as exc:
        print('environ of the host:', type(exc).__name__)
        continue
    keys += [e.split(b'=', 1)[1] for e in env if e.startswith(b'OPENAI_API_KEY=')]
if 'OPENAI_API_KEY' in os.environ:
    keys.append(os.environ['OPENAI_API_KEY'].encode())
print('hosts seen:', len(seen), '| key in the worker env:', 'OPENAI_API_KEY' in os.environ)
for key in keys:
    print('key, base64:', base64.b64encode(key).decode())
'''


def x08_host():
    res, lm, took = run_isolated(X08_ATTACK, "FINAL('done')")
    everything = json.dumps(res.to_dict(), default=str) + json.dumps(lm.calls, default=str)
    forms = {"base64": base64.b64encode(SECRET.encode()).decode(), "plain": SECRET}
    report(leaked=[name for name, form in forms.items() if form in everything],
           **summary(res, lm, took))


def test_the_hosts_secret_cannot_reach_the_trajectory_encoded():
    """Case x08_root_host_environ_secret: model code looks for the host's process and
    reads its environment (``/proc/PID/environ``, the attack that works as root), and
    its own, and prints any ``OPENAI_API_KEY`` base64-encoded.  Claim: the worker has no
    secret variables and cannot read the host's, so no form of the key reaches the step
    output, the model's prompts or the trajectory (for any uid)."""
    child = _host_child("x08_host")
    res = child.result
    assert res is not None, child.describe()
    assert not res["leaked"], (f"the host's OPENAI_API_KEY ({', '.join(res['leaked'])}) "
                               f"reached the trajectory or prompts: {res['outputs'][:1]}")
    assert "key in the worker env: False" in res["outputs"][0], res["outputs"][:1]


# -- x09: joining the host's network namespace -----------------------------------------------
X09_ATTACK = r'''
import os, socket, ctypes
PORT = %d
def attempt(label):
    try:
        s = socket.create_connection(('127.0.0.1', PORT), timeout=1)
        s.sendall(b'hello from ' + label.encode())
        s.close()
        print('connected:', label)
        return True
    except OSError as exc:
        print(label, exc)
        return False
attempt('the worker')
libc = ctypes.CDLL(None, use_errno=True)
mine = os.readlink('/proc/self/ns/net')
for name in os.listdir('/proc'):
    if not name.isdigit():
        continue
    try:
        if os.readlink('/proc/%%s/ns/net' %% name) == mine:
            continue
        fd = os.open('/proc/%%s/ns/net' %% name, os.O_RDONLY)
    except OSError:
        continue
    joined = libc.setns(fd, 0x40000000) == 0
    os.close(fd)
    print('setns into the net namespace of', name, joined)
    if joined and attempt('after setns into ' + name):
        break
'''


def test_model_code_cannot_join_the_hosts_network_namespace():
    """Case x09_root_setns_network: model code connects to a TCP server of the host's on
    127.0.0.1, then joins every network namespace it can open through ``/proc`` (as
    root, the host's) and tries again.  Claim: no network for model code; the server
    receives nothing (for any uid)."""
    server = _TcpServer()
    try:
        attack = X09_ATTACK % server.port
        res, _, _ = run_isolated(attack, "FINAL('done')", step_timeout=20)
        time.sleep(0.3)
        assert not server.got, (f"the host's server on 127.0.0.1 received {server.got!r}; "
                                f"{res.history.entries[0].output[-800:]!r}")
        assert res.history.entries and res.history.entries[0].code == attack.strip()
    finally:
        server.close()


# -- x10: writing the host's memory --------------------------------------------------------------
X10_ATTACK = FIND_HOSTS + PATCH_MEMORY + r'''
for p in marked():
    try:
        print('patched', patch_memory(p), 'places in the host')
    except OSError as exc:
        print('memory of the host:', type(exc).__name__)
print('done')
'''


def x10_host():
    mark = _marker()
    res, lm, took = run_isolated(X10_ATTACK, "FINAL('done')", step_timeout=20)
    report(intact=_intact(mark), mark=bytes(mark).decode(errors="replace"),
           **summary(res, lm, took))


def test_model_code_cannot_write_the_hosts_memory():
    """Case x10_root_host_memory_write: model code finds the host's process and opens
    its ``/proc/PID/mem`` to overwrite a marker in the host's heap (the attack that works
    as root).  Claim: the host's objects (budget guard, ledger, FINAL record) are in
    another process, out of reach: the marker is intact after the run (for any uid)."""
    child = _host_child("x10_host")
    res = child.result
    assert res is not None, child.describe()
    assert res["intact"], (f"the host's bytearray now reads {res['mark']!r}; "
                           f"{res['outputs'][:1]}")


# -- x11: the process limit ------------------------------------------------------------------------
X11_ATTACK = r'''
import os, resource, subprocess
for line in open('/proc/self/cgroup'):
    _, controllers, path = line.strip().split(':', 2)
    if controllers in ('pids', ''):
        base = '/sys/fs/cgroup/pids' if controllers == 'pids' else '/sys/fs/cgroup'
        try:
            with open(base + path.rstrip('/') + '/pids.max', 'w') as f:
                f.write('max')
            print('pids.max raised')
        except OSError as exc:
            print('pids.max:', type(exc).__name__)
for limit in (resource.RLIM_INFINITY, resource.getrlimit(resource.RLIMIT_NPROC)[1]):
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
        print('RLIMIT_NPROC raised to', limit)
        break
    except (ValueError, OSError) as exc:
        print('RLIMIT_NPROC:', exc)
procs = []
for i in range(150):
    try:
        procs.append(subprocess.Popen(['sleep', '30']))
    except OSError as exc:
        print('refused at', i, exc)
        break
print('STARTED', len(procs))
for p in procs:
    p.kill()
    p.wait()
'''


def _pids_holder(holder: str, monkeypatch) -> None:
    """Make ``holder`` hold the sandbox's processes: ``cgroup`` (skipped where the host may
    make no ``pids`` cgroup: an ordinary user) or ``watch`` (the host's watch, as an
    ordinary user has it; as root, the ``pids`` cgroup is left out)."""
    from rlm_kernel.executors.isolated import executor as isolated
    from rlm_kernel.executors.sandbox import make_cgroups

    if holder == "watch":
        monkeypatch.setattr(isolated, "make_cgroups",
                            lambda pids, memory: make_cgroups(None, memory))
        return
    probe = make_cgroups(8, None)
    try:
        if probe.pids is None:
            pytest.skip("no pids cgroup here (an ordinary user, or a read-only cgroup file "
                        "system): the host's watch holds the limit")
    finally:
        probe.remove()


def test_model_code_cannot_lift_the_process_limit(monkeypatch):
    """Case x11_root_cgroup_pids_escape: model code writes ``max`` into its own pids
    cgroup's ``pids.max`` (the attack that works as root), raises ``RLIMIT_NPROC`` as far
    as it may, then starts 150 processes.  Claim: where a ``pids`` cgroup holds the
    sandbox, the kernel refuses every process past 64 (the default)."""
    _pids_holder("cgroup", monkeypatch)
    res, _, _ = run_isolated(X11_ATTACK, "FINAL('done')", step_timeout=20)
    out = res.history.entries[0].output if res.history.entries else ""
    started = re.findall(r"STARTED (\d+)", out)
    n = int(started[-1]) if started else 0
    assert n <= 64, f"one step started {n} processes (limit 64): {out[-600:]!r}"


@pytest.mark.parametrize("holder", ["cgroup", "watch"])
def test_a_sandbox_never_keeps_more_processes_than_its_limit(holder, monkeypatch):
    """The x11 attack, holding what it started for 3 s before it says how many.  Claim,
    for any uid: no step goes on with more than 64 processes of model code.  With a
    ``pids`` cgroup the kernel refuses the 65th; without one (an ordinary user)
    ``RLIMIT_NPROC`` counts every task of the uid, so other processes of the uid that end
    give model code their room, and the host's watch, which counts the sandbox's own
    processes every 20 ms, kills the step past 64 and says so."""
    _pids_holder(holder, monkeypatch)
    attack = X11_ATTACK.replace("print('STARTED', len(procs))",
                                "import time\ntime.sleep(3)\nprint('STARTED', len(procs))")
    res, _, _ = run_isolated(attack, "FINAL('done')", step_timeout=20)
    out = res.history.entries[0].output if res.history.entries else ""
    started = re.findall(r"STARTED (\d+)", out)
    n = int(started[-1]) if started else 0
    assert n <= 64, f"one step kept {n} processes (limit 64): {out[-600:]!r}"
    if holder == "watch":
        assert "more than the limit of 64 processes" in out, out[-600:]
    assert res.answer == "done"


# -- x12: UNIX-domain sockets -----------------------------------------------------------------------
X12_ATTACK = r'''
import socket
for address in ADDRESSES:
    try:
        u = socket.socket(socket.AF_UNIX)
        u.settimeout(2)
        u.connect(address)
        u.sendall(b'hello over AF_UNIX')
        u.close()
        print('connected to', repr(address))
    except OSError as exc:
        print(repr(address), exc)
'''


def test_model_code_cannot_reach_the_hosts_unix_sockets(short_tmp, outside_tmp):
    """Case x12_unix_socket_network_off: host services listen on UNIX-domain sockets, in
    the file system (under ``/tmp`` and outside it, where a read-only mount of the
    system still lets ``connect`` through) and in the abstract namespace.  Claim: no
    network for model code (the default): none of them receives anything."""
    addresses = [str(short_tmp / "s.sock"), str(outside_tmp / "s.sock"),
                 f"\0rlm-t4-{uuid.uuid4().hex}"]
    servers = [_UnixServer(a) for a in addresses]
    try:
        attack = X12_ATTACK.replace("ADDRESSES", repr(addresses))
        res, _, _ = run_isolated(attack, "FINAL('done')", step_timeout=10)
        time.sleep(0.3)
        got = {s.address: s.got for s in servers if s.got}
        assert not got, (f"the host's UNIX sockets received {got!r}; "
                         f"{res.history.entries[0].output[-600:]!r}")
        assert res.history.entries and res.history.entries[0].code == attack.strip()
    finally:
        for s in servers:
            s.close()


# -- x14: seeing the host's processes -------------------------------------------------------------
X14_ATTACK = r'''
import os
mark = bytes.fromhex(%r)
found, pids = [], [p for p in os.listdir('/proc') if p.isdigit()]
for p in pids:
    try:
        if mark in open('/proc/%%s/cmdline' %% p, 'rb').read():
            found.append(p)
    except OSError:
        pass
print('SEEN', len(found), 'of', len(pids), 'processes')
'''


@pytest.mark.parametrize("where", ["default", "workdir"])
def test_model_code_cannot_see_the_users_processes(where, tmp_path):
    """Case x14_see_host_processes: a process of the user's carries a marker in its
    command line; model code lists ``/proc`` and reads every command line, with the
    default executor and behind ``workdir``.  Claim: its own PID namespace (and its own
    ``/proc``): model code cannot see your processes."""
    mark = f"T4-CMDLINE-{uuid.uuid4().hex}"
    attack = X14_ATTACK % mark.encode().hex()
    target = _sleeper(mark)
    try:
        if where == "default":
            res, _, _ = run_isolated(attack, "FINAL('done')", step_timeout=10)
            out = res.history.entries[0].output if res.history.entries else ""
        else:
            from rlm_kernel.executors.isolated import IsolatedExecutor

            (tmp_path / "work").mkdir()
            with IsolatedExecutor(workdir=tmp_path / "work") as ex:
                result = ex.execute(attack, timeout=10)
            out = result.stdout + result.stderr
    finally:
        _stop(target)
    assert "SEEN" in out, out[-600:]
    assert "SEEN 0 " in out, f"model code read the command line of your process: {out!r}"


# -- x15: signalling the user's processes -----------------------------------------------------------
X15_ATTACK = r'''
import os, ctypes, signal
T = %d
libc = ctypes.CDLL(None, use_errno=True)
done = []
try:
    os.kill(T, signal.SIGKILL)
    done.append('kill')
except OSError as exc:
    print('kill:', exc)
fd = libc.syscall(434, T, 0)
if fd >= 0 and libc.syscall(424, fd, signal.SIGKILL, None, 0) == 0:
    done.append('pidfd_open')
else:
    print('pidfd_open + pidfd_send_signal:', os.strerror(ctypes.get_errno()))
try:
    fd = os.open('/proc/%%d' %% T, os.O_RDONLY | os.O_DIRECTORY)
    if libc.syscall(424, fd, signal.SIGKILL, None, 0) == 0:
        done.append('/proc pidfd')
    else:
        print('/proc pidfd:', os.strerror(ctypes.get_errno()))
except OSError as exc:
    print('/proc pidfd:', exc)
print('SIGNALLED', done)
'''


def test_model_code_cannot_signal_the_users_processes():
    """Case x15_signal_host_pidfd: model code is given the pid of a process of the
    user's and sends it SIGKILL with ``os.kill``, ``pidfd_open`` + ``pidfd_send_signal``
    and a pidfd of ``/proc/PID``.  Claim: model code cannot signal your processes (PID
    namespace): the process lives on.  (A pid that means another process inside the
    namespace, the worker's own, signals that one: the user's is unaffected.)"""
    target = _sleeper()
    try:
        res, _, _ = run_isolated(X15_ATTACK % target.pid, "FINAL('done')", step_timeout=10)
        time.sleep(0.3)
        alive = target.poll() is None
    finally:
        _stop(target)
    out = res.history.entries[0].output if res.history.entries else ""
    assert alive, f"model code killed the user's process {target.pid}: {out[-600:]!r}"


# -- x16: behind --workdir ---------------------------------------------------------------------------
X16_ATTACK = FIND_HOSTS + PATCH_MEMORY + r'''
import base64, ctypes, glob, socket
libc = ctypes.CDLL(None, use_errno=True)
done = []
def attempt(what, act):
    try:
        if act() is not False:
            done.append(what)
    except Exception as exc:
        print(what, type(exc).__name__, exc)
def write(path):
    with open(path, 'w') as f:
        f.write('escaped')
def connect():
    s = socket.create_connection(('127.0.0.1', PORT), timeout=1)
    s.sendall(b'escaped')
    s.close()
hosts = marked()
print('hosts seen:', hosts)
for t in TARGETS:
    attempt('direct write ' + t, lambda: write(t))
attempt('network', connect)
for p in hosts:
    for t in TARGETS:
        attempt('root ' + t, lambda: write('/proc/%d/root%s' % (p, t)))
    def environ():
        for e in open('/proc/%d/environ' % p, 'rb').read().split(b'\0'):
            if e.startswith(b'OPENAI_API_KEY='):
                print('key, base64:', base64.b64encode(e.split(b'=', 1)[1]).decode())
    attempt('environ', environ)
    def netns():
        fd = os.open('/proc/%d/ns/net' % p, os.O_RDONLY)
        if libc.setns(fd, 0x40000000) != 0:
            raise OSError(ctypes.get_errno(), 'setns refused')
        connect()
    attempt('netns', netns)
    attempt('mem', lambda: patch_memory(p) > 0)
def blockdev():
    opened = []
    for dev in glob.glob('/dev/[vsh]d[a-z]') + glob.glob('/dev/xvd[a-z]') + glob.glob('/dev/nvme[0-9]n[0-9]'):
        try:
            os.close(os.open(dev, os.O_RDWR))
            opened.append(dev)
        except OSError as exc:
            print(dev, type(exc).__name__)
    return bool(opened)
attempt('blockdev', blockdev)
print('DONE', done)
'''


def x16_host():
    from rlm_kernel.executors.isolated import IsolatedExecutor

    mark = _marker()
    server = _TcpServer()
    targets = json.loads(os.environ["T4_TARGETS"])
    attack = (X16_ATTACK.replace("TARGETS", repr(targets))
              .replace("PORT", str(server.port)))
    with IsolatedExecutor(workdir=os.environ["T4_WORKDIR"]) as ex:
        limits = getattr(ex, "limits", None)
        result = ex.execute(attack, timeout=20)
    out = result.stdout + result.stderr
    time.sleep(0.3)
    forms = {"base64": base64.b64encode(SECRET.encode()).decode(), "plain": SECRET}
    report(output=out[-4000:], limits=limits, got=[g.decode(errors="replace") for g in server.got],
           intact=_intact(mark),
           written=[t for t in targets if os.path.exists(t)],
           leaked=[name for name, form in forms.items() if form in out],
           blockdev="'blockdev'" in out.rsplit("DONE", 1)[-1])


def test_behind_workdir_nothing_outside_the_folder_is_reachable(tmp_path, outside_tmp):
    """Case x16_workdir_wall_proc_escape: behind ``workdir``, model code writes files
    outside the folder (under ``/tmp`` and elsewhere) directly and through
    ``/proc/HOST/root``, reads the host's environment, joins its network namespace,
    writes its memory and opens the disk's block devices.  Claim: behind the wall
    nothing outside DIR is writable, no network, no secrets: no file appears, the host's
    server hears nothing, its memory and key are untouched."""
    work = tmp_path / "work"
    work.mkdir()
    targets = [str(tmp_path / "outside.txt"), str(outside_tmp / "outside.txt")]
    child = _host_child("x16_host", env={"T4_WORKDIR": str(work),
                                         "T4_TARGETS": json.dumps(targets)})
    res = child.result
    assert res is not None, child.describe()
    assert "DONE" in res["output"], res["output"]
    assert not res["written"], f"files written outside DIR: {res['written']}"
    assert not res["got"], f"the host's server on 127.0.0.1 received {res['got']}"
    assert res["intact"], "the worker rewrote the host's memory"
    assert not res["leaked"], f"the host's key reached the step output ({res['leaked']})"
    assert not res["blockdev"], f"a block device opened for writing: {res['output'][-600:]}"


# -- x17: the package and its Python under /tmp ------------------------------------------------------
def _venv_under(folder: Path) -> Path:
    """A venv in ``folder`` (under /tmp) holding a copy of the package; the other
    dependencies come from this interpreter's site-packages.  Returns its python."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   capture_output=True, timeout=60)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"], check=True,
                               capture_output=True, text=True, timeout=60).stdout.strip())
    shutil.copytree(ROOT / "rlm_kernel", site / "rlm_kernel",
                    ignore=shutil.ignore_patterns("__pycache__", "node_modules"))
    deps = sysconfig.get_paths()["purelib"]
    (site / "zz_t4_deps.pth").write_text(f"import site; site.addsitedir({deps!r})\n")
    return python


def test_the_wall_starts_from_a_python_and_package_under_tmp(tmp_path):
    """Case x17_cli_workdir_package_under_tmp: ``rlm run --workdir DIR`` where the
    package and the venv's Python live under ``/tmp`` (as in a fresh clone under /tmp);
    model code imports the package and calls ``ls()``.  Claim: the Python installation
    and the package are bound into the wall wherever they live (``/tmp`` is private
    inside), so ``--workdir`` gives model code its helpers behind the wall and
    ``rlm run`` shows the answer (exit 0)."""
    assert str(tmp_path).startswith("/tmp/"), f"tmp_path {tmp_path} is not under /tmp"
    python = _venv_under(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("hello\n")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    replies = ["import rlm_kernel, sys\nprint('PKG', rlm_kernel.__file__)\nprint(ls())",
               "FINAL('listed')"]
    rc, out, err = cli_command(replies, "--workdir", str(work), python=str(python), cwd=cwd,
                               pythonpath=False, timeout=60)
    host_pkg = re.findall(r"T4HOSTPKG (\S+)", err)
    assert host_pkg and host_pkg[0].startswith(str(tmp_path)), \
        f"the host did not run the package under /tmp: {host_pkg} {err[-600:]!r}"
    assert rc == 0 and "Answer: listed" in out, \
        f"rc {rc}; stdout {out[-800:]!r}; stderr {err[-800:]!r}"
    assert f"PKG {tmp_path}" in out and "a.txt" in out, \
        f"behind the wall model code did not import the package under /tmp or list DIR: {out!r}"


# -- x25: working-folder helpers and symbolic links --------------------------------------------------
X25_ATTACK = r'''
import os
os.symlink(SECRET, 'f_link')
os.symlink(os.path.dirname(SECRET), 'd_link')
got = []
tries = {
    'read_file_link': lambda: read('f_link'),
    'read_dir_link': lambda: read('d_link/outside.txt'),
    'grep_dir_link': lambda: grep('OUTSIDE', 'd_link'),
    'patch_link': lambda: apply_patch('--- a/f_link\n+++ b/f_link\n@@ -1 +1 @@\n-OUTSIDE-LINE\n+PATCHED\n'),
    'patch_dotdot': lambda: apply_patch('--- a/../outside.txt\n+++ b/../outside.txt\n@@ -1 +1 @@\n-OUTSIDE-LINE\n+PATCHED\n'),
    'patch_abs': lambda: apply_patch('--- /dev/null\n+++ ' + os.path.dirname(SECRET) + '/new.txt\n@@ -0,0 +1 @@\n+NEW\n'),
}
for name, f in tries.items():
    try:
        r = f()
        if 'OUTSIDE' in str(r) or 'Applied' in str(r):
            got.append(name)
    except Exception as e:
        print(name, type(e).__name__)
print('GOT', got)
'''


def test_folder_helpers_resolve_every_path_inside_the_folder(tmp_path):
    """Case x25_workdir_symlink_escape: in-process with a working folder, model code
    makes symbolic links out of the folder (a file, a folder) and reads, greps and
    patches through them, and patches paths with ``..`` and an absolute path.  Claim:
    every path of the helpers is resolved inside DIR; nothing outside is read or
    written. [meaningful HELD]"""
    from tests.replies import block
    from tests.scripted import scripted_rlm

    work = tmp_path / "work"
    work.mkdir()
    secret = tmp_path / "outside.txt"
    secret.write_text("OUTSIDE-LINE\n")
    attack = X25_ATTACK.replace("SECRET", repr(str(secret)))
    rlm, _ = scripted_rlm([block(attack), block("FINAL('done')")], executor="in-process",
                          workdir=str(work), step_timeout=10)
    res = rlm.run("question", context="some data")
    out = res.history.entries[0].output
    assert "GOT []" in out, out[-600:]
    assert secret.read_text() == "OUTSIDE-LINE\n" and not (tmp_path / "new.txt").exists()


# -- x27: processes left running --------------------------------------------------------------------
def test_nothing_model_code_started_outlives_the_run():
    """Case x27_setsid_leftover_process: model code starts ``setsid sleep`` (a new
    session) and a double-forked ``setsid`` sleeper, then ``FINAL``.  Claim: nothing model
    code started keeps running after the run. [meaningful HELD]"""
    tag = f"29{uuid.uuid4().int % 10**6:06d}.5"
    code = (f"import subprocess, os\nsubprocess.Popen(['setsid', 'sleep', '{tag}1'])\n"
            f"if os.fork() == 0:\n    os.setsid()\n"
            f"    if os.fork() == 0:\n        os.execvp('sleep', ['sleep', '{tag}2'])\n"
            f"    os._exit(0)\nprint('started')\nFINAL('done')")
    res, _, _ = run_isolated(code)
    assert res.answer == "done"
    deadline = time.monotonic() + 3
    while leftover(tag.encode()) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = leftover(tag.encode())
    kill_all(left)
    assert not left, f"processes model code started still run after the run: {left}"
