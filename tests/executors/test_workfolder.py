"""The working folder's file helpers (issue 19, item 5): each on a real temporary folder,
paths kept inside it, hard time limits that kill a whole process group, truncated output,
``apply_patch`` applied whole or not at all; bound into a plain namespace for a scripted
run, and into an isolated executor's (copied into the child, or served by the host)."""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

import pytest

from rlm_kernel import RLM
from rlm_kernel.executors import PlainExecutor
from rlm_kernel.executors.workfolder import HELPER_NAMES, WorkFolder, signal_name
from rlm_kernel.models.scripted import ScriptedModel
from rlm_kernel.text import cut_marker, middle_cut
from tests.replies import block

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux processes and /proc")


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """``tmp_path/work`` with a few files, a sub-folder, a link inside and links out;
    ``tmp_path/outside`` beside it holds a secret."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "pkg").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("needle outside\n")
    (work / "app.py").write_text("def total(xs):\n    return sum(xs) + 1\n\n"
                                 "print(total([1, 2, 3]))\n")
    (work / "pkg" / "notes.md").write_text("one\nneedle two\nthree\n")
    (work / "blob.bin").write_bytes(b"\x00\x01\x02needle")
    (work / "inner").symlink_to("pkg")
    (work / "out_dir").symlink_to(outside)
    (work / "out_file").symlink_to(outside / "secret.txt")
    return work


@pytest.fixture()
def wf(folder: Path) -> WorkFolder:
    return WorkFolder(folder, timeout=10, bash_timeout=10, max_output_chars=3000,
                      kill_grace=0.5)


def _processes_with(marker: str) -> list[int]:
    """Pids of live processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes() and \
                    "State:\tZ" not in (entry / "status").read_text():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


# -- each helper -------------------------------------------------------------------------
def test_ls_lists_folders_files_sizes_and_links(wf):
    outside = str(Path(wf.root).parent / "outside")
    assert wf.ls().splitlines() == ["app.py  (63 bytes)", "blob.bin  (9 bytes)",
                                    "inner -> pkg", f"out_dir -> {outside}",
                                    f"out_file -> {outside}/secret.txt", "pkg/"]
    assert wf.ls("pkg") == "notes.md  (21 bytes)"
    assert wf.ls("inner") == "notes.md  (21 bytes)"  # a link that stays inside is followed
    assert wf.ls("app.py") == "app.py  (63 bytes)"
    with pytest.raises(FileNotFoundError, match="no file or folder 'nope'"):
        wf.ls("nope")


def test_read_gives_text_or_a_range_of_lines(wf):
    assert wf.read("app.py").startswith("def total(xs):\n")
    assert wf.read("app.py", 2, 2) == "    return sum(xs) + 1\n"
    assert wf.read("app.py", start=4) == "print(total([1, 2, 3]))\n"
    assert wf.read("app.py", end=1) == "def total(xs):\n"
    assert wf.read("pkg/notes.md", 2, 99) == "needle two\nthree\n"
    assert wf.read(os.path.join(wf.root, "pkg", "notes.md"), 1, 1) == "one\n"  # absolute, inside
    with pytest.raises(IsADirectoryError, match="is a folder"):
        wf.read("pkg")
    with pytest.raises(FileNotFoundError, match="no file 'gone.txt'"):
        wf.read("gone.txt")
    with pytest.raises(ValueError, match="binary file"):
        wf.read("blob.bin")
    with pytest.raises(ValueError, match="line number from 1"):
        wf.read("app.py", 0)


def test_read_refuses_a_fifo_instead_of_blocking(wf, folder):
    os.mkfifo(folder / "pipe")
    start = time.monotonic()
    with pytest.raises(ValueError, match="not a regular file"):
        wf.read("pipe")
    assert time.monotonic() - start < 1


def test_grep_finds_lines_and_follows_no_link_out(wf):
    hits = wf.grep("needle").splitlines()
    assert hits == ["pkg/notes.md:2:needle two"]  # not blob.bin (binary), not out_dir/ (a link)
    assert wf.grep("^t[a-z]+e$", "pkg") == "pkg/notes.md:3:three"
    assert wf.grep("def (total|other)", "app.py") == "app.py:1:def total(xs):"
    assert wf.grep("-not-there") == "(no matches)"  # a pattern starting with '-'
    with pytest.raises(ValueError, match="grep failed for the pattern .*Unmatched"):
        wf.grep("(unclosed")
    with pytest.raises(FileNotFoundError):
        wf.grep("x", "missing")


# -- paths that leave the folder ------------------------------------------------------------
@pytest.mark.parametrize("path", ["../outside/secret.txt", "..", "/etc/passwd", "out_file",
                                  "out_dir/secret.txt", "pkg/../../outside/secret.txt"])
@pytest.mark.parametrize("helper", ["ls", "read", "grep"])
def test_a_path_that_leaves_the_folder_is_refused(wf, path, helper):
    call = {"ls": lambda: wf.ls(path), "read": lambda: wf.read(path),
            "grep": lambda: wf.grep("needle", path)}[helper]
    with pytest.raises(PermissionError, match="is outside the working folder") as caught:
        call()
    assert "needle" not in str(caught.value)


def test_a_path_with_a_nul_or_of_the_wrong_type_is_refused(wf):
    with pytest.raises(ValueError, match="NUL"):
        wf.read("app.py\x00")
    with pytest.raises(TypeError, match="a path is a str"):
        wf.read(3)  # type: ignore[arg-type]


def test_a_missing_folder_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError):
        WorkFolder(tmp_path / "none")
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotADirectoryError):
        WorkFolder(tmp_path / "f")
    with pytest.raises(ValueError, match="bash_timeout must be positive"):
        WorkFolder(tmp_path, bash_timeout=0)


# -- bash -------------------------------------------------------------------------------------
def test_bash_runs_in_the_folder_with_its_output_and_status(wf, monkeypatch):
    monkeypatch.setenv("RLM_TEST_API_KEY", "sk-not-for-commands")
    assert wf.bash("pwd; echo err >&2") == f"{wf.root}\nerr\n"
    assert wf.bash("ls pkg; exit 3") == "notes.md\n[exit status 3]"
    assert wf.bash("echo ${RLM_TEST_API_KEY:-none}") == "none\n"  # secrets not passed on
    assert wf.bash("kill -9 $$").endswith("[killed by SIGKILL]")
    assert signal_name(9) == "SIGKILL" and signal_name(200) == "signal 200"
    with pytest.raises(TypeError):
        wf.bash(["ls"])  # type: ignore[arg-type]


def test_bash_timeout_kills_the_whole_group_grandchildren_included(wf):
    marker = f"10{uuid.uuid4().int % 10**6}.5"  # a sleep length no other process has
    start = time.monotonic()
    out = wf.bash(f"echo started; sleep {marker} & sleep {marker}", timeout=1)
    took = time.monotonic() - start
    assert out.startswith("started\n")
    assert out.endswith("[stopped after 1 s: the command ran past its time limit and its "
                        "process group was killed]")
    assert 1 <= took < 1 + wf.kill_grace + 1
    assert _processes_with(marker) == []  # nothing left behind


def test_bash_that_ignores_sigterm_is_killed_after_the_grace(wf):
    marker = f"20{uuid.uuid4().int % 10**6}.5"
    start = time.monotonic()
    out = wf.bash(f"trap '' TERM; sleep {marker} & trap '' TERM; sleep {marker}", timeout=0.5)
    assert "stopped after 0.5 s" in out
    assert time.monotonic() - start < 0.5 + wf.kill_grace + 1
    assert _processes_with(marker) == []


def test_bash_leaves_no_background_process_running(wf):
    marker = f"30{uuid.uuid4().int % 10**6}.5"
    start = time.monotonic()
    out = wf.bash(f"echo bg; sleep {marker} &")
    assert out == "bg\n" and time.monotonic() - start < 3
    assert _processes_with(marker) == []


def test_bash_timeout_is_capped_by_the_folder(wf):
    short = WorkFolder(wf.root, bash_timeout=0.5, kill_grace=0.2)
    start = time.monotonic()
    assert "stopped after 0.5 s" in short.bash("sleep 30", timeout=100)
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("timeout", [float("nan"), 0, -5])
def test_bash_refuses_a_timeout_that_is_no_limit(wf, timeout):
    """min(nan, cap) is nan, and no deadline ever passes nan."""
    with pytest.raises(ValueError, match="more than 0"):
        wf.bash("sleep 30", timeout=timeout)


# -- truncation ---------------------------------------------------------------------------------
def test_long_output_keeps_head_and_tail_and_says_what_was_cut(wf):
    small = WorkFolder(wf.root, max_output_chars=300)
    out = small.bash("seq 1 200000")
    total = len("".join(f"{i}\n" for i in range(1, 200001)))
    assert out.startswith("1\n2\n3\n") and out.endswith("199999\n200000\n")
    cut = total - 300
    assert cut_marker(cut, "print less, or send the output to a file and grep it") in out
    assert len(out) < 300 + 200
    big = "\n".join(f"line {i}" for i in range(5000)) + "\n"
    Path(wf.root, "big.txt").write_text(big)
    text = small.read("big.txt")
    assert text.startswith("line 0\n") and text.endswith("line 4999\n")
    assert "read('big.txt', start, end) a smaller range of lines" in text
    assert small.read("big.txt", 10, 12) == "line 9\nline 10\nline 11\n"
    assert middle_cut("abcdef", 10) == "abcdef"


def test_a_flood_of_output_is_not_kept_in_memory(wf):
    out = WorkFolder(wf.root, max_output_chars=1000).bash(
        "head -c 200000000 /dev/zero | tr '\\0' x")
    assert "[... 199,999,000 characters cut: print less" in out


# -- apply_patch -------------------------------------------------------------------------------
def test_apply_patch_modifies_creates_and_deletes_files(wf, folder):
    (folder / "gone.txt").write_text("bye\n")
    patch = ("--- a/app.py\n+++ b/app.py\n@@ -1,3 +1,3 @@\n def total(xs):\n"
             "-    return sum(xs) + 1\n+    return sum(xs)\n \n"
             "--- /dev/null\n+++ b/new/module.py\n@@ -0,0 +1,2 @@\n+X = 1\n+Y = 2\n"
             "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n")
    assert wf.apply_patch(patch) == ("Applied: modified app.py (+1 -1); created "
                                     "new/module.py (+2); deleted gone.txt")
    assert (folder / "app.py").read_text() == ("def total(xs):\n    return sum(xs)\n\n"
                                               "print(total([1, 2, 3]))\n")
    assert (folder / "new" / "module.py").read_text() == "X = 1\nY = 2\n"
    assert not (folder / "gone.txt").exists()


def test_apply_patch_refuses_a_file_named_twice_and_writes_nothing(wf, folder):
    """Each entry is applied to the file as it is on disk: a second entry for one file
    would silently drop the first one's change."""
    before = (folder / "app.py").read_text()
    patch = ("--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n-def total(xs):\n"
             "+def total(values):\n     return sum(xs) + 1\n"
             "--- a/app.py\n+++ b/app.py\n@@ -1,3 +1,3 @@\n def total(xs):\n"
             "-    return sum(xs) + 1\n+    return sum(xs)\n \n")
    with pytest.raises(ValueError, match="names app.py more than once"):
        wf.apply_patch(patch)
    assert (folder / "app.py").read_text() == before


def test_apply_patch_tolerates_wrong_counts_and_git_headers(wf, folder):
    patch = ("diff --git a/app.py b/app.py\nindex 1234567..89abcde 100644\n"
             "--- a/app.py\n+++ b/app.py\n@@ -40,7 +40,9 @@ def total\n"
             " print(total([1, 2, 3]))\n+print('more')\n"
             "diff --git a/pkg/notes.md b/pkg/notes.md\n--- a/pkg/notes.md\n+++ b/pkg/notes.md\n"
             "@@ -1 +1 @@\n one\n-needle two\n+needle 2\n")
    assert wf.apply_patch(patch) == ("Applied: modified app.py (+1 -0); "
                                     "modified pkg/notes.md (+1 -1)")
    assert (folder / "app.py").read_text().endswith("print(total([1, 2, 3]))\nprint('more')\n")
    assert (folder / "pkg" / "notes.md").read_text() == "one\nneedle 2\nthree\n"


def test_apply_patch_keeps_line_endings_and_a_missing_last_newline(wf, folder):
    (folder / "dos.txt").write_bytes(b"a\r\nb\r\n")
    (folder / "tail.txt").write_bytes(b"x\ny")
    wf.apply_patch("--- a/dos.txt\n+++ b/dos.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
                   "--- a/tail.txt\n+++ b/tail.txt\n@@ -1,2 +1,2 @@\n x\n-y\n"
                   "\\ No newline at end of file\n+z\n\\ No newline at end of file\n")
    assert (folder / "dos.txt").read_bytes() == b"a\r\nc\r\n"
    assert (folder / "tail.txt").read_bytes() == b"x\nz"


@pytest.mark.parametrize("target", ["../outside/evil.txt", "out_dir/evil.txt",
                                    "/tmp/rlm-evil.txt", "out_file"])
def test_apply_patch_touching_a_file_outside_writes_nothing(wf, folder, target):
    before = (folder / "app.py").read_text()
    patch = ("--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-def total(xs):\n+def total(ys):\n"
             f"--- /dev/null\n+++ {target}\n@@ -0,0 +1 @@\n+pwned\n")
    with pytest.raises(PermissionError, match="outside the working folder"):
        wf.apply_patch(patch)
    assert (folder / "app.py").read_text() == before  # the patch applies whole or not at all
    assert not (folder.parent / "outside" / "evil.txt").exists()
    assert not Path("/tmp/rlm-evil.txt").exists()
    assert (folder.parent / "outside" / "secret.txt").read_text() == "needle outside\n"


def test_apply_patch_refuses_what_does_not_match(wf, folder):
    before = (folder / "app.py").read_text()
    with pytest.raises(ValueError, match="hunk 1 of the patch for 'app.py' does not match"):
        wf.apply_patch("--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-def other():\n+def x():\n")
    with pytest.raises(FileExistsError):
        wf.apply_patch("--- /dev/null\n+++ b/app.py\n@@ -0,0 +1 @@\n+x\n")
    with pytest.raises(FileNotFoundError):
        wf.apply_patch("--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n")
    with pytest.raises(ValueError, match="takes a unified diff"):
        wf.apply_patch("just some text")
    assert (folder / "app.py").read_text() == before


# -- the prompt -------------------------------------------------------------------------------
def test_the_prompt_names_every_helper_with_its_signature(wf):
    lines = wf.prompt_lines()
    assert [line.split("(")[0] for line in lines] == [f"- {n}" for n in HELPER_NAMES]
    assert lines[1].startswith("- read(path, start=None, end=None) -> str: The text of a file")
    assert lines[4].startswith("- bash(command, timeout=None) -> str: Run a shell command")
    section = wf.prompt_section()
    assert wf.root in section and "bash after 10 s" in section
    assert sorted(wf.functions()) == sorted(HELPER_NAMES)


# -- in a run -----------------------------------------------------------------------------------
def test_a_scripted_run_uses_the_helpers_end_to_end(wf, folder):
    fix = ("--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n def total(xs):\n"
           "-    return sum(xs) + 1\n+    return sum(xs)\n")
    replies = [block("print(ls())"),
               block("print(grep('return', 'app.py'))"),
               block(f"print(apply_patch({fix!r}))"),
               block("out = bash('python3 app.py')\nprint(out)"),
               block("FINAL(out.strip())")]
    lm = ScriptedModel(replies)
    executor = PlainExecutor()
    executor.namespace.update(wf.functions())
    rlm = RLM(root_client=lm, sub_client=lm, verify_answer=False, ground_answer=False)
    result = rlm.run("Fix the off-by-one in app.py and say what it prints.",
                     executor=executor)
    assert result.stopped_by == "final" and result.answer == "6"
    outputs = [entry.output for entry in result.history.entries]
    assert "app.py  (63 bytes)" in outputs[0]
    assert outputs[1].strip() == "app.py:2:    return sum(xs) + 1"
    assert outputs[2].strip() == "Applied: modified app.py (+1 -1)"
    assert (folder / "app.py").read_text().splitlines()[1] == "    return sum(xs)"


# -- in an isolated executor ---------------------------------------------------------------------
def test_in_an_isolated_repl_the_helpers_run_in_the_child(wf, folder):
    from rlm_kernel.executors.isolated import IsolatedExecutor

    functions = wf.functions()
    with IsolatedExecutor(functions, workdir=folder, max_processes=32) as ex:
        res = ex.execute("import os\nprint(read('pkg/notes.md', 2, 2), end='')\n"
                         "print(bash('echo $PPID; echo made > made.txt'), end='')\n"
                         "try:\n    ls('../outside')\nexcept PermissionError as e:\n"
                         "    print('refused:', 'outside the working folder' in str(e))\n"
                         "type(read).__name__")
        assert res.success, res.stderr
        lines = res.stdout.splitlines()
        assert lines[0] == "needle two"
        assert int(lines[1]) != os.getpid()  # bash's parent is the worker, not the host
        assert lines[2:] == ["refused: True", "'method'"]  # a real method, not a host stub
        assert (folder / "made.txt").read_text() == "made\n"
        assert ex.namespace["bash"] is functions["bash"]  # the host's own object reads back


def test_in_an_isolated_repl_a_host_served_helper_and_its_errors_cross_the_channel(wf):
    from rlm_kernel.executors.isolated import IsolatedExecutor

    calls = []

    def host_read(path, start=None, end=None):  # no PORTABLE mark: served by the host
        calls.append(path)
        return wf.read(path, start, end)

    with IsolatedExecutor({"host_read": host_read}) as ex:
        res = ex.execute("a = host_read('app.py', 1, 1)\n"
                         "try:\n    host_read('/etc/passwd')\n"
                         "except PermissionError as e:\n    b = str(e)\n"
                         "print(repr(a), type(host_read).__name__)\nprint(b)")
    assert res.success, res.stderr
    assert calls == ["app.py", "/etc/passwd"]  # the calls ran on the host
    first, second = res.stdout.splitlines()
    assert first == "'def total(xs):\\n' HostFunction"
    assert "'/etc/passwd' is outside the working folder" in second
