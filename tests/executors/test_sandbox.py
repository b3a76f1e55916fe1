"""The isolated executor's wall (``executors/sandbox.py``): bubblewrap or a clear error,
never a worker without its wall; what the sandbox binds and hides."""

from __future__ import annotations

import os
import sys

import pytest

from rlm_kernel.executors import sandbox
from rlm_kernel.executors.isolated import IsolatedExecutor
from rlm_kernel.executors.sandbox import SandboxUnavailable, WorkerError, bwrap_command

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux's")


def test_without_bubblewrap_the_error_names_the_package_and_nothing_runs(monkeypatch):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap") as caught:
        IsolatedExecutor()
    assert isinstance(caught.value, WorkerError)  # callers that catch WorkerError see it
    assert "in-process" in str(caught.value)  # and how to run without the wall


def test_the_command_hides_homes_and_tmp_and_binds_the_python_back(tmp_path):
    python = sys.executable
    cmd = bwrap_command([python, "-c", "pass"], bwrap="bwrap", python=python,
                        network=False, workdir=str(tmp_path), cwd=str(tmp_path),
                        tmp_bytes=1 << 20)
    text = " ".join(cmd)
    for flag in ("--unshare-all", "--cap-drop ALL", "--die-with-parent", "--new-session",
                 "--disable-userns", "--ro-bind / /", "--proc /proc"):
        assert flag in text
    assert "--share-net" not in cmd
    assert f"--bind {tmp_path} {tmp_path}" in text  # the only writable folder of the host's
    for private in ("/tmp", "/run"):
        assert cmd[cmd.index(private) - 1] == "--tmpfs"
    uid = cmd[cmd.index("--uid") + 1]
    assert uid != "0" and (os.getuid() != 0 or uid == str(sandbox.SANDBOX_UID))


def test_the_sandbox_runs_without_capabilities_as_an_unprivileged_uid():
    with IsolatedExecutor(max_processes=32) as ex:
        res = ex.execute("import os\nprint(os.getuid())\n"
                         "print([l.split()[1] for l in open('/proc/self/status') "
                         "if l.startswith(('CapEff', 'CapPrm', 'CapBnd'))])\n"
                         "print(sorted(p for p in os.listdir('/proc') if p.isdigit()))")
    uid, caps, pids = res.stdout.splitlines()
    assert uid != "0" and caps == str(["0000000000000000"] * 3)
    assert pids == "['1', '2']"  # bubblewrap's init and the worker: nothing of the host's


def test_the_working_folders_git_metadata_is_found_for_every_layout(tmp_path):
    """What ``git_metadata`` binds read-only: a ``.git`` folder; a ``.git`` file with the
    git folder it names and that one's ``commondir`` (a worktree's) when inside the
    working folder; nothing outside it (already read-only) and nothing without ``.git``."""
    from rlm_kernel.executors.sandbox import git_metadata

    work = tmp_path / "work"
    work.mkdir()
    assert git_metadata(str(work)) == []
    (work / ".git").mkdir()
    assert git_metadata(str(work)) == [str(work / ".git")]
    (work / ".git").rmdir()
    main = work / "main-git"
    (main / "worktrees" / "wt").mkdir(parents=True)
    (main / "worktrees" / "wt" / "commondir").write_text("../..\n")
    (work / ".git").write_text("gitdir: main-git/worktrees/wt\n")
    assert git_metadata(str(work)) == [str(work / ".git"), str(main / "worktrees" / "wt"),
                                       str(main)]
    outside = tmp_path / "elsewhere.git"
    outside.mkdir()
    (work / ".git").write_text(f"gitdir: {outside}\n")
    assert git_metadata(str(work)) == [str(work / ".git")]
    (work / ".git").unlink()
    (work / ".git").symlink_to(main)
    assert git_metadata(str(work)) == [str(main)]
