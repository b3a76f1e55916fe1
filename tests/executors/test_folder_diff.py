"""The host's diff of a working folder (``FolderBaseline``): the run's own change, from a
private repository, whatever the folder holds (its own git configuration, attributes,
links, FIFOs)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from rlm_kernel.executors.folder_diff import FolderBaseline, FolderDiffError


def _git(folder: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    return subprocess.run(["git", "-c", "user.email=t@example.org", "-c", "user.name=t",
                           *args], cwd=folder, env=env, check=True, capture_output=True,
                          text=True).stdout


def _checkout(root: Path) -> Path:
    root.mkdir()
    (root / "lib.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "notes.txt").write_text("keep\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "start")
    return root


def test_the_diff_is_the_runs_own_change_in_a_checkout(tmp_path: Path) -> None:
    folder = _checkout(tmp_path / "work")
    (folder / "notes.txt").write_text("changed before the run\n")  # not the run's change
    index_before = (folder / ".git" / "index").read_bytes()
    with FolderBaseline.take(folder) as baseline:
        assert baseline.error is None and baseline.diff() == ""
        (folder / "lib.py").write_text("def add(a, b):\n    return a - b\n")
        (folder / "new.py").write_text("x = 1\n")
        (folder / "__pycache__").mkdir()
        (folder / "__pycache__" / "lib.cpython-311.pyc").write_bytes(b"\0\1")
        diff = baseline.diff()
    assert "--- a/lib.py\n+++ b/lib.py" in diff and "-    return a + b\n+    return a - b" in diff
    assert "new file mode 100644" in diff and "+++ b/new.py" in diff
    assert "notes.txt" not in diff and "__pycache__" not in diff
    # the folder's own repository is not touched: its index, its status
    assert (folder / ".git" / "index").read_bytes() == index_before
    assert _git(folder, "status", "--short").split() == ["M", "lib.py", "M", "notes.txt",
                                                         "??", "__pycache__/", "??", "new.py"]


def test_a_folder_that_is_no_checkout_and_a_deleted_file(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "a.txt").write_text("one\n")
    baseline = FolderBaseline.take(folder)
    (folder / "a.txt").unlink()
    diff = baseline.diff()
    baseline.close()
    assert "deleted file mode 100644" in diff and "-one" in diff
    with pytest.raises(FolderDiffError, match="no baseline"):
        baseline.diff()  # closed


def test_nothing_in_the_folder_steers_the_hosts_git(tmp_path: Path) -> None:
    folder = _checkout(tmp_path / "work")
    marker = tmp_path / "ran"
    # what model code could write: a fsmonitor and hooks in the folder's own config,
    # a filter and a diff driver named by attributes, a link to a secret, a FIFO
    with open(folder / ".git" / "config", "a") as f:
        f.write(f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = hooks\n"
                f"[filter \"evil\"]\n\tclean = touch {marker}\n"
                f"[diff \"evil\"]\n\ttextconv = touch {marker}\n\tcommand = touch {marker}\n")
    (folder / ".gitattributes").write_text("* filter=evil diff=evil\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret\n")
    baseline = FolderBaseline.take(folder)
    (folder / "lib.py").write_text("changed\n")
    (folder / "link").symlink_to(secret)
    os.mkfifo(folder / "fifo")
    diff = baseline.diff()
    baseline.close()
    assert not marker.exists()
    assert "+changed" in diff
    assert f"+{secret}" in diff and "the host's secret" not in diff  # the link, not the file
    assert "fifo" not in diff


def test_git_missing_or_slow_is_one_readable_error(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    baseline = FolderBaseline.take(folder)
    assert baseline.error == "git is not installed: the folder's change cannot be computed"
    with pytest.raises(FolderDiffError, match="git is not installed"):
        baseline.diff()


def test_a_long_diff_is_cut_in_the_middle(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    baseline = FolderBaseline.take(folder, max_chars=2000)
    (folder / "big.txt").write_text("".join(f"line {i}\n" for i in range(5000)))
    diff = baseline.diff()
    baseline.close()
    assert len(diff) < 2200 and diff.startswith("diff --git a/big.txt b/big.txt")
    assert diff.rstrip().endswith("+line 4999")
