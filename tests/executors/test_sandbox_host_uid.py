"""The host uid of a root caller's sandbox (``executors/sandbox.py``: ``host_uid``,
``wall_command``) and the launcher that puts bubblewrap on it (``executors/launcher.py``).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rlm_kernel.executors import launcher, sandbox
from rlm_kernel.executors.isolated import IsolatedExecutor
from rlm_kernel.executors.sandbox import (
    HOST_UID_VARIABLE,
    Cgroups,
    SandboxUnavailable,
    host_uid,
    wall_command,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux's")


@pytest.fixture()
def fresh_uid(monkeypatch):
    """:func:`host_uid` choosing again, with ``RLM_SANDBOX_UID`` unset."""
    monkeypatch.setattr(sandbox, "_picked", {})
    monkeypatch.delenv(HOST_UID_VARIABLE, raising=False)
    return monkeypatch


def _mapped(number: int, kind: str) -> bool:
    for line in Path(f"/proc/self/{kind}_map").read_text().splitlines():
        first, _, count = (int(x) for x in line.split())
        if first <= number < first + count:
            return True
    return False


def test_the_default_host_uid_is_unprivileged_mapped_and_nobodys(fresh_uid):
    uid = host_uid()
    overflow = int(Path("/proc/sys/kernel/overflowuid").read_text())
    assert uid not in (0, overflow, 65534, os.getuid())
    assert _mapped(uid, "uid") and _mapped(uid, "gid")
    with pytest.raises(KeyError):
        pwd.getpwuid(uid)
    with pytest.raises(KeyError):
        grp.getgrgid(uid)
    assert host_uid() == uid  # chosen once


@pytest.mark.parametrize("value", ["0", "65534", "nobody", "-5", str(1 << 32)])
def test_rlm_sandbox_uid_is_refused_when_it_would_not_hold(fresh_uid, value):
    fresh_uid.setenv(HOST_UID_VARIABLE, value)
    with pytest.raises(SandboxUnavailable, match=HOST_UID_VARIABLE) as caught:
        host_uid()
    assert "mapped in /proc/self/uid_map" in str(caught.value)


def test_rlm_sandbox_uid_names_the_host_uid(fresh_uid):
    fresh_uid.setenv(HOST_UID_VARIABLE, " 2000000123 ")
    assert host_uid() == 2000000123


def test_the_command_starts_through_the_launcher_for_root_only(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    cmd = wall_command([sys.executable, "-c", "pass"], bwrap="/usr/bin/bwrap",
                       python=sys.executable, network=False, workdir=str(work),
                       cwd=str(work), tmp_bytes=None, keep_fds=(), seccomp_fd=None,
                       cgroups=Cgroups())
    bwrap_at = cmd.index("/usr/bin/bwrap")
    if os.getuid() != 0:
        assert bwrap_at == 0  # an ordinary user runs bubblewrap itself
        return
    assert cmd[:4] == [sys.executable, "-I", "-S", sandbox.LAUNCHER]
    assert cmd[5] == "--" and bwrap_at == 6
    config = json.loads(cmd[4])
    assert config["uid"] == config["gid"] == host_uid() != 0
    assert config["workdir"] == str(work)
    assert config["owner"] == [work.stat().st_uid, work.stat().st_gid]
    for needed in (sys.prefix, sys.base_prefix, sandbox.PACKAGE_DIR):
        assert any(needed == r or needed.startswith(r + "/") for r in config["reach"]), \
            (needed, config["reach"])
    # only what the worker runs: not the checkout around the package, not the caller's
    # folder (the working folder is the launcher's own ``workdir``)
    for around in (sandbox.PACKAGE_ROOT, str(work)):
        if not around.endswith(("site-packages", "dist-packages")):
            assert not any(around == r or around.startswith(r + "/")
                           for r in config["reach"]), (around, config["reach"])


def test_a_folder_the_host_uid_cannot_traverse_is_found(tmp_path):
    uid = gid = 2000000123
    base = Path(tempfile.mkdtemp(dir="/var/tmp"))  # its parents are searchable by all
    outer = base / "outer"
    inner = outer / "inner" / "deep"
    inner.mkdir(parents=True)
    base.chmod(0o755)
    outer.chmod(0o700)
    assert launcher.blocking_folder(str(inner), uid, gid) == str(outer)
    outer.chmod(0o711)  # searchable, not listable
    assert launcher.blocking_folder(str(inner), uid, gid) is None
    assert launcher.allowed(str(outer), uid, gid) and \
        not launcher.allowed(str(outer), uid, gid, read=True)
    assert launcher.blocking_folder("/usr/bin", uid, gid) is None
    shutil.rmtree(base)


def _launch(config: dict, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "-S", sandbox.LAUNCHER, json.dumps(config),
                           "--", *argv], capture_output=True, text=True, timeout=30)


def test_the_launcher_never_runs_anything_as_root(tmp_path):
    """Given uid 0 (root), or run by an ordinary user, the launcher stops with one line
    that says why, and runs nothing."""
    marker = tmp_path / "ran"
    run = _launch({"uid": 0, "gid": 0, "reach": [], "workdir": None},
                  "/bin/sh", "-c", f"touch {marker}")
    expected = ("refusing to run the sandbox as host uid 0" if os.getuid() == 0
                else "the launcher is for a root caller only")
    assert (run.returncode, run.stderr) == (launcher.EXIT_FAILED,
                                            f"{launcher.MARK}{expected}\n")
    assert not marker.exists()


@pytest.mark.skipif(os.getuid() != 0, reason="the launcher is root's")
def test_the_launcher_drops_every_privilege_and_changes_no_host_mount(tmp_path):
    """As root: the launched command runs as the host uid, with no group, no capability,
    ``no_new_privs`` set, in a mount namespace of its own: the host's mounts are as
    they were."""
    before = Path("/proc/self/mountinfo").read_text()
    work = tmp_path / "work"
    work.mkdir()
    run = _launch({"uid": 2000000123, "gid": 2000000123, "reach": [sys.prefix],
                   "workdir": str(work), "owner": [0, 0]},
                  "/bin/sh", "-c", "grep -E '^(Uid|Gid|Groups|CapEff|CapPrm|NoNewPrivs):' "
                  f"/proc/self/status; touch {work}/made")
    assert run.returncode == 0, run.stderr
    fields = {line.split(":")[0]: line.split(":", 1)[1].split() for line in
              run.stdout.splitlines()}
    assert fields["Uid"] == fields["Gid"] == ["2000000123"] * 4
    assert fields["Groups"] == [] and fields["NoNewPrivs"] == ["1"]
    assert fields["CapEff"] == fields["CapPrm"] == ["0000000000000000"]
    assert (work / "made").stat().st_uid == 0  # written through the idmapped mount
    assert Path("/proc/self/mountinfo").read_text() == before


def test_executor_limits_say_which_host_uid_holds():
    with IsolatedExecutor(max_processes=8) as ex:
        limits = dict(ex.limits)
    expected = host_uid() if os.getuid() == 0 else os.getuid()
    assert limits["user"].startswith(f"host uid {expected} ")
    assert "never root" in limits["user"] or os.getuid() != 0
    assert limits["syscalls"].startswith("seccomp filter denies: kernel keyrings; io_uring")
    assert "/proc/sys" in limits["proc"] and "read-only" in limits["proc"]


def test_the_wall_starts_from_a_venv_in_a_folder_only_its_owner_may_open():
    """The worker's Python is a venv inside a 0700 folder outside the homes and
    ``/tmp`` (``/var/tmp``).  Claim: the sandbox starts from it and imports from it, as
    root (the launcher covers the folder and binds the venv back) and as its owner."""
    import sysconfig

    base = Path(tempfile.mkdtemp(prefix="rlm-wall-", dir="/var/tmp"))
    try:
        base.chmod(0o700)
        venv = base / "private" / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                       check=True, timeout=120)
        purelib = Path(sysconfig.get_path("purelib", vars={"base": str(venv)}))
        (purelib / "project.pth").write_text(  # what this Python imports from
            "".join(f"{p}\n" for p in sys.path if p.endswith("site-packages")))
        (purelib / "only_here.py").write_text("WHERE = __file__\n")
        with IsolatedExecutor(python=str(venv / "bin" / "python"), max_processes=8) as ex:
            res = ex.execute("import sys, only_here\nprint(sys.prefix)\n"
                             "print(only_here.WHERE)")
        assert res.success, res.stderr
        assert res.stdout.splitlines() == [str(venv), str(purelib / "only_here.py")]
    finally:
        shutil.rmtree(base, ignore_errors=True)
