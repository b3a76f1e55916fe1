"""``RLM(workdir=...)`` / ``rlm run --workdir``: a run whose model code works in a folder,
with the folder's file helpers, on both executors.  Scripted model (the loop's
mechanics); real folders, real worker processes."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

from rlm_kernel.cli.run import main
from tests.replies import block
from tests.scripted import scripted_rlm

PATCH = """--- a/notes.txt
+++ b/notes.txt
@@ -1,2 +1,2 @@
 first line
-second line
+second line, patched
"""


def run(folder, replies, executor, **config):
    rlm, lm = scripted_rlm(replies, workdir=str(folder), executor=executor, **config)
    return rlm.run("Patch the notes."), lm


@pytest.mark.parametrize("executor", ["in-process", "isolated"])
def test_model_code_works_in_the_folder_with_its_helpers(tmp_path, executor):
    (tmp_path / "notes.txt").write_text("first line\nsecond line\n")
    code = ("import os\nprint(os.getcwd())\nprint(ls())\n"
            f"print(apply_patch({PATCH!r}))\n"
            "open('made.txt', 'w').write('by the model')\n"
            "FINAL(read('notes.txt'))")
    res, lm = run(tmp_path, [block(code)], executor)
    assert res.stopped_by == "final"
    assert "second line, patched" in res.answer
    assert (tmp_path / "notes.txt").read_text() == "first line\nsecond line, patched\n"
    assert (tmp_path / "made.txt").read_text() == "by the model"  # relative to the folder
    output = res.history.entries[0].output
    assert output.splitlines()[0] == str(tmp_path.resolve())
    assert "notes.txt" in output
    # the model was told the folder and its helpers
    first = lm.calls[0][1]["content"]
    assert f"Working folder: your code runs in {tmp_path.resolve()}" in first
    assert "- apply_patch(patch) -> str:" in first and "- bash(command" in first


@pytest.mark.parametrize("executor", ["in-process", "isolated"])
def test_a_path_outside_the_folder_is_refused(tmp_path, executor):
    (tmp_path / "inside").mkdir()
    res, _ = run(tmp_path / "inside", [block("print(read('../secret.txt'))"),
                                       block("FINAL('done')")], executor)
    assert "PermissionError" in res.history.entries[0].output
    assert "outside the working folder" in res.history.entries[0].output


def test_a_helper_rebound_by_model_code_is_put_back(tmp_path):
    res, _ = run(tmp_path, [block("ls = None"), block("FINAL(ls())")], "in-process")
    assert res.stopped_by == "final" and "Error" not in (res.answer or "")


def test_behind_the_wall_nothing_outside_the_folder_is_writable(tmp_path):
    home_file = pathlib.Path.home() / f".rlm-wall-test-{os.getpid()}"
    in_tmp = tmp_path / "outside.txt"  # /tmp is the child's own: never the host's
    (tmp_path / "work").mkdir()
    code = (f"for path in [{str(home_file)!r}, {str(in_tmp)!r}]:\n"
            "    try:\n        open(path, 'w').write('x')\n        print('wrote', path)\n"
            "    except OSError as exc:\n        print('refused', path, exc.errno)\n"
            "FINAL('ok')")
    try:
        res, _ = run(tmp_path / "work", [block(code)], "isolated")
        assert f"refused {home_file} 30" in res.history.entries[0].output  # EROFS
        assert not home_file.exists() and not in_tmp.exists()
    finally:
        home_file.unlink(missing_ok=True)


def test_a_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="workdir: working folder .* does not exist"):
        run(tmp_path / "nope", [block("FINAL(1)")], "in-process")


def test_rlm_run_workdir_missing_folder_exits_2(tmp_path, capsys):
    assert main(["run", "--workdir", str(tmp_path / "nope"), "--model", "openai/x",
                 "What is here?"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_behind_the_wall_the_homes_key_folders_read_empty(tmp_path, monkeypatch):
    """Issue 19, item 3, and issue 25: behind the wall the home is not there at all (an
    empty read-only folder in the sandbox): neither ``~/.ssh`` nor any other file of it.
    The home here is a stand-in (``$HOME``) holding a key."""
    # not under /tmp: behind the wall /tmp is the worker's own, empty
    home = pathlib.Path(__file__).resolve().parent / f".home-{os.getpid()}"
    try:
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
        (home / "notes.txt").write_text("readable")
        (tmp_path / "work").mkdir()
        monkeypatch.setenv("HOME", str(home))
        # by its path: model code's own HOME is the sandbox's private /tmp
        code = (f"import os\nfor name in ('.ssh', 'notes.txt'):\n    try:\n"
                f"        print(open(os.path.join({str(home)!r}, name)).read())\n"
                "    except OSError as e:\n        print(type(e).__name__)\n"
                f"print(os.listdir({str(home)!r}))\nFINAL('ok')")
        res, _ = run(tmp_path / "work", [block(code)], "isolated")
        assert res.history.entries[0].output.splitlines() == [
            "FileNotFoundError", "FileNotFoundError", "[]"]
        assert (home / ".ssh" / "id_ed25519").read_text() == "PRIVATE KEY"  # untouched
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("executor", ["in-process", "isolated"])
def test_an_rlm_query_child_runs_in_the_same_folder(tmp_path, executor):
    """The child run's executor gets the run's working folder (behind the wall: the
    same write wall), not an unwalled one in the host's folder."""
    # a folder of the host's (/tmp and /var/tmp are the sandbox's own, private ones)
    outside = pathlib.Path(__file__).resolve().parent / f"rlm-child-wall-{os.getpid()}-{executor}"
    child = ("import os\ntry:\n    open(" + repr(str(outside)) + ", 'w').write('x')\n"
             "    wrote = 'wrote outside'\nexcept OSError:\n    wrote = 'refused'\n"
             "FINAL(os.getcwd() + ' ' + wrote)")
    (tmp_path / "work").mkdir()
    rlm, _ = scripted_rlm([block("print(rlm_query('where are you?'))"), block(child),
                           block("FINAL('done')")], workdir=str(tmp_path / "work"),
                          executor=executor, max_depth=1, child_max_iterations=1)
    res = rlm.run("Ask a child.")
    said = res.history.entries[0].output
    try:
        assert said.startswith(str((tmp_path / "work").resolve())), said
        if executor == "isolated":  # walled as the top-level run (test_isolated's tests)
            assert "refused" in said and not outside.exists(), said
        else:  # in-process only the helpers are confined (docs/security.md)
            assert "wrote outside" in said
    finally:
        outside.unlink(missing_ok=True)


@pytest.mark.parametrize("executor", ["in-process", "isolated"])
def test_search_without_data_points_to_the_folders_helpers(tmp_path, executor):
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "notes.txt").write_text("first line\n")
    result, _ = run(folder, [block("search('first')"), block("FINAL('ok')")], executor,
                    max_iterations=3)
    output = result.history.entries[0].output
    assert "no variable 'context' to search" in output
    assert "the files of the working folder: grep('word') or read('path')" in output
