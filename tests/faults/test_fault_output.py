"""Floods, secrets, odd characters and stray threads in a step's output
(engine + plain executor; the notebook export is the real nbformat writer)."""

from __future__ import annotations

import json
import os
import time

import nbformat
import pytest

from rlm_kernel.executors.streams import MAX_KEPT_CHARS
from rlm_kernel.export import export_run
from tests.replies import block

from .helpers import THOUGHT, scripted_run

CONTEXT_FILE = os.path.join(os.path.dirname(__file__), "__init__.py")
SECRET = "sk-test-0123456789abcdefSECRET"


def test_one_huge_print_is_kept_capped_in_trajectory_and_notebook(tmp_path):
    rlm, _ = scripted_run([block("print('x' * 10**8)", THOUGHT), block("FINAL('ok')", THOUGHT)])
    res = rlm.run("q", context="x")
    out = res.history.entries[0].output
    assert len(out) <= MAX_KEPT_CHARS + 100 and "characters cut: print less ...]" in out
    path = tmp_path / "run.ipynb"
    export_run(res, path)
    assert path.stat().st_size < 5 * MAX_KEPT_CHARS


def test_secret_environment_values_reach_nothing(monkeypatch, tmp_path, executor_kind):
    """Secret values reach no prompt, trajectory, notebook, live event or answer.  Behind
    the process wall they are not in the child's environment at all (names like
    ``*_TOKEN`` are left out, short values too), nor in any file of the host's ``/tmp``
    or home, so model code reads the same values from variables whose names are not a
    secret's (data that happens to hold keys), passed to the worker by name
    (``RLM_PASS_ENV``: the worker's environment is an allow-list), and the host's
    redaction is what holds."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET[::-1])
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to be worth hiding
    env = "os.environ[{!r}]".format
    first = "import os\nprint(os.environ)\n"
    if executor_kind == "isolated":
        plain = {}  # names no secret pattern matches
        for i, name in enumerate(("OPENAI_API_KEY", "MY_SERVICE_TOKEN", "SHORT_TOKEN")):
            plain[name] = f"RLM_TEST_PLAIN_{i}"
            monkeypatch.setenv(plain[name], os.environ[name])
        monkeypatch.setenv("RLM_PASS_ENV", ",".join(plain.values()))
        env = lambda name: f"os.environ[{plain[name]!r}]"  # noqa: E731
        first = ("import os\nprint(sorted(n for n in os.environ if n.endswith(('_KEY', "
                 "'_TOKEN'))), 'in the environment')\nprint(" + env("SHORT_TOKEN") + ")\n")
    rlm, lm = scripted_run([
        block(f"{first}print({env('MY_SERVICE_TOKEN')})\n"
              f"print(llm_query('key ' + {env('OPENAI_API_KEY')}))", THOUGHT),
        block(f"import os, sys\nsys.stderr.write({env('OPENAI_API_KEY')})\n"
              f"raise ValueError({env('OPENAI_API_KEY')})", THOUGHT),
        block(f"FINAL('the key is ' + {env('OPENAI_API_KEY')})", THOUGHT),
    ])
    live = []
    rlm.observer = live.append
    res = rlm.run("q", context="x")
    path = tmp_path / "run.ipynb"
    export_run(res, path)
    places = {
        "trajectory": json.dumps(res.to_dict(), default=str),
        "answer": res.answer,
        "next prompts": json.dumps(lm.calls[1:]),
        "notebook": path.read_text(),
        "live events": repr(live),
    }
    for where, text in places.items():
        assert SECRET not in text and SECRET[::-1] not in text, where
    assert "[redacted OPENAI_API_KEY]" in res.answer
    assert "[redacted MY_SERVICE_TOKEN]" in res.history.entries[0].output
    assert "abc" in res.history.entries[0].output  # short values are left alone
    if executor_kind == "isolated":
        assert "[] in the environment" in res.history.entries[0].output


def test_lone_surrogates_export_and_read_back(tmp_path):
    rlm, _ = scripted_run([block("print('a\\ud800b')", THOUGHT),
                           block("FINAL('z\\udc80')", THOUGHT)])
    res = rlm.run("q", context="x")
    path = tmp_path / "run.ipynb"
    export_run(res, path)
    nb = nbformat.read(path, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert any("a\ud800b" in o.get("text", "") for o in outputs)
    assert [p.name for p in tmp_path.iterdir()] == ["run.ipynb"]  # no temp file left


def test_a_failed_export_leaves_the_old_notebook_whole(tmp_path):
    rlm, _ = scripted_run([block("FINAL(1)", THOUGHT)])
    res = rlm.run("q", context="x")
    path = tmp_path / "run.ipynb"
    export_run(res, path)
    before = path.read_bytes()
    res.history.entries[0].output = object()  # not text: the writer fails
    with pytest.raises(Exception):  # noqa: B017 - whatever nbformat raises
        export_run(res, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.ipynb"]


def test_a_thread_left_running_does_not_write_into_later_steps():
    code = ("import threading, time\n"
            "def chatter():\n"
            "    for i in range(300):\n"
            "        print('bg', i)\n"
            "        time.sleep(0.01)\n"
            "threading.Thread(target=chatter, daemon=True).start()\n"
            "time.sleep(0.05)")
    rlm, _ = scripted_run([block(code, THOUGHT),
                           block("import time\ntime.sleep(0.5)\nprint('quiet')", THOUGHT),
                           block("FINAL('done')", THOUGHT)])
    res = rlm.run("q", context="x")
    first, second = res.history.entries[0].output, res.history.entries[1].output
    assert "bg 0" in first and "left 1 thread(s) running" in first
    assert "bg" not in second and second.strip() == "quiet"


def test_stdout_of_the_json_cli_is_only_json(monkeypatch, capfd):
    from rlm_kernel import cli
    from rlm_kernel.engine import rlm as engine
    from rlm_kernel.models.scripted import ScriptedModel

    code = ("import threading, time, sys\n"
            "def chatter():\n"
            "    for i in range(100):\n"
            "        print('bg', i)\n"
            "        time.sleep(0.005)\n"
            "threading.Thread(target=chatter, daemon=True).start()\nprint('step')")
    lm = ScriptedModel([block(code, THOUGHT),
                        block("import time\ntime.sleep(0.3)\nFINAL('ok')", THOUGHT)])
    monkeypatch.setattr(engine, "make_client", lambda *a, **k: lm)
    path = os.path.join(os.path.dirname(__file__), "__init__.py")
    assert cli.main(["run", "--model", "openai/scripted", "--context", path, "--json",
                     "--no-ground-answer", "q"]) == 0
    time.sleep(0.6)  # the chatter thread has finished by now
    out = capfd.readouterr().out
    assert json.loads(out)["answer"] == "ok"


def test_text_mode_cli_prints_a_surrogate_answer(monkeypatch, tmp_path):
    import subprocess
    import sys

    script = tmp_path / "run.py"
    script.write_text(
        "import sys\n"
        "import rlm_kernel.engine.rlm as e\n"
        "from rlm_kernel.models.scripted import ScriptedModel\n"
        "lm = ScriptedModel(['x\\n```repl\\nprint(\"a\\\\ud800\")\\nFINAL(\"z\\\\udc80\")\\n```'])\n"
        "e.make_client = lambda *a, **k: lm\n"
        "from rlm_kernel.cli import main\n"
        f"sys.exit(main(['run', '--model', 'openai/x', '--context', {CONTEXT_FILE!r}, "
        "'--no-ground-answer', 'q']))\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert b"Answer: z\\udc80" in proc.stdout
