"""The shared fault cases (``../shared/fault-cases/``) the in-process executor holds,
each as a test over the real engine, ``rlm run``'s ``main()`` or a real ``rlm`` kernel,
with a scripted model.  Each test names its case file.

The cases drive ``RLM(...).run`` with the grounding check on; these tests turn it off
(:func:`~tests.faults.helpers.scripted_run`), since several cases answer with a literal
(``FINAL(7)``) that the check would send back once, which is its designed behaviour
and not what the case attacks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

from rlm_kernel import RLM
from rlm_kernel.engine.budget import CHARS_PER_TOKEN
from rlm_kernel.export import export_rlm_log, export_run
from rlm_kernel.models.usage import Completion, LLMCall
from rlm_kernel.text import MAX_KEPT_CHARS, head_room
from tests.kernel_client import execute, script_model, text_of
from tests.replies import block

from . import helpers
from .helpers import THOUGHT, scripted_run

SECRET = "sk-test-0123456789abcdefSECRET"
ROOT = Path(__file__).resolve().parents[2]
CONTEXT_FILE = Path(__file__).with_name("__init__.py")


def run(*codes: str, **cfg):
    """A scripted run of ``codes`` (one step each) with a 2 s step limit, as the
    cases' ``h.run`` does; returns (result, model, seconds)."""
    cfg.setdefault("step_timeout", 2)
    rlm, lm = scripted_run([block(c, THOUGHT) for c in codes], **cfg)
    started = time.monotonic()
    res = rlm.run("question", context="some data")
    return res, lm, time.monotonic() - started


# -- the step time limit -----------------------------------------------------------------
SPIN = "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True: pass"


@pytest.mark.parametrize("patch", [
    "import threading\nthreading.Thread.start = lambda self: None",
    "import threading\ndef hook(frame, event, arg):\n    raise SystemExit\n"
    "threading.settrace(hook)",
], ids=["b05_thread_start_patch", "b08_threading_settrace"])
def test_threading_patched_by_a_step_does_not_disable_the_next_steps_limit(patch):
    """Shared fault cases b05_thread_start_patch.py and b08_threading_settrace.py."""
    res, _, took = run(patch, SPIN, "FINAL('after')")
    assert took < 15 and res.answer == "after"
    assert "threading" in res.history.entries[0].output  # told what was put back
    assert "StepTimeout" in res.history.entries[1].output
    assert threading.gettrace() is None


def test_a_tiny_step_limit_leaves_no_timer_armed():
    """Shared fault case c26_tiny_timeout.py: 1e-300 s must not leave SIGALRM armed."""
    import signal

    handler = signal.getsignal(signal.SIGALRM)
    outer = signal.getitimer(signal.ITIMER_REAL)  # pytest-timeout's, if it has one
    res, _, _ = run("x = 1", "FINAL(x)", step_timeout=1e-300)
    value, interval = signal.getitimer(signal.ITIMER_REAL)
    assert signal.getsignal(signal.SIGALRM) is handler and interval == outer[1]
    assert value <= outer[0] and (value > 0) == (outer[0] > 0)
    assert res.stopped_by == "final"


def test_max_seconds_holds_inside_a_step():
    """Shared fault case b12_max_seconds_in_step.py."""
    res, _, took = run("import time\ntime.sleep(8)\nprint('slept')", "FINAL('after')",
                       max_seconds=2, step_timeout=10)
    assert took < 4
    assert res.stopped_by == "budget" and "time budget of 2 s" in res.error
    assert "StepTimeout" in res.history.entries[0].output


# -- answers and control exceptions ------------------------------------------------------
def test_keyboard_interrupt_raised_by_model_code_is_a_model_error():
    """Shared fault case c07_raise_keyboardinterrupt.py."""
    res, _, _ = run("x = 1\nprint('work done')", "print('step 2 output')\nraise KeyboardInterrupt",
                    "FINAL(x)")
    assert res.stopped_by == "final" and res.answer == "1" and res.steps == 3
    assert "KeyboardInterrupt" in res.history.entries[1].output


def test_a_signal_variable_whose_class_raises_is_not_read():
    """Shared fault case c09_signal_class_property.py."""
    res, _, _ = run("class R:\n    @property\n    def __class__(self):\n"
                    "        raise SystemExit('from __class__')\nRLM_CONFIDENCE = R()\nprint('ok')",
                    "FINAL(1)")
    assert res.answer == "1"


def test_a_swallowed_final_then_a_swallowing_loop():
    """Shared fault case h01_swallowed_final_then_loop.py."""
    res, _, took = run("import time\ntry:\n    FINAL(7)\nexcept BaseException:\n    pass\n"
                       "while True:\n    try:\n        time.sleep(1)\n"
                       "    except BaseException:\n        pass", step_timeout=1)
    assert res.answer == "7" and took < 10


def test_nul_and_escape_in_the_answer_survive(tmp_path):
    """Shared fault case h04_nul_answer.py."""
    res, _, _ = run("FINAL('a\\x00b\\x1b[2Jc')")
    export_run(res, tmp_path / "h04.ipynb")
    assert res.answer == "a\x00b\x1b[2Jc"
    assert json.loads(json.dumps(res.summary()))["answer"] == res.answer


def test_a_final_from_a_thread_an_earlier_step_left_does_not_end_a_later_step():
    """Shared fault case c21_timer_final.py."""
    res, _, _ = run("import threading\nthreading.Timer(0.3, FINAL, args=('from the timer',)).start()",
                    "import time\ntime.sleep(0.6)\nprint('step 2 computed', 41 + 1)",
                    "FINAL(42)")
    assert res.answer == "42" and res.steps == 3


def test_a_final_from_a_thread_the_step_joins_counts():
    """Shared fault case h03_final_from_thread.py."""
    res, _, _ = run("import threading\nt = threading.Thread(target=FINAL, args=('from a thread',))\n"
                    "t.start(); t.join()\nprint('main goes on')", "FINAL('second')")
    assert res.answer == "from a thread" and res.steps == 1


# -- budgets ---------------------------------------------------------------------------
class _Counting:
    """A client that counts prompt tokens as characters / 4, as a provider would (b10);
    it has no ``max_tokens`` or ``context_window`` (a client that does not say)."""

    model = "counting"

    def __init__(self) -> None:
        self.ledger, self.depth = None, 0
        self.replies = [block("print(llm_query('word ' * 200_000)[:20])", THOUGHT),
                        block("FINAL('done')", THOUGHT)]
        self.sent = 0

    def check(self) -> None:
        pass

    def complete(self, messages, *, role="root", stop=None, max_tokens=None, temperature=None):
        text = self.replies.pop(0) if role != "sub" and self.replies else "ok"
        pt = sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN
        self.sent += pt
        call = LLMCall(model=self.model, role=role, prompt_tokens=pt, completion_tokens=1,
                       depth=self.depth)
        if self.ledger is not None:
            self.ledger.record(call)
        return Completion(text=text, call=call)


def test_a_long_sub_call_prompt_is_not_sent_past_the_token_budget():
    """Shared fault case b10_prompt_token_overshoot.py."""
    client = _Counting()
    res = RLM(root_client=client, sub_client=client, verify_answer=False, ground_answer=False,
              resample_temperature=0, max_tokens=20_000).run("q", context="x")
    assert res.prompt_tokens + res.completion_tokens <= 20_000 and client.sent <= 20_000
    assert "does not fit" in res.history.entries[0].output
    assert res.answer == "done"


@pytest.mark.parametrize("budget", [{}, {"max_llm_calls": 50}],
                         ids=["b07_llm_query_after_run", "b07b_after_run_with_budget"])
def test_a_thread_left_running_cannot_call_the_model(budget):
    """Shared fault cases b07_llm_query_after_run.py and b07b_after_run_with_budget.py."""
    code = ("import threading, time\ndef spend():\n    time.sleep(0.3)\n    while True:\n"
            "        try:\n            llm_query('more')\n        except BaseException:\n"
            "            return\n        time.sleep(0.05)\n"
            "threading.Thread(target=spend, daemon=True).start()")
    res, lm, _ = run(code, "import time\ntime.sleep(0.5)", "FINAL('done')", **budget)
    time.sleep(1.5)
    assert len(lm.calls) == res.llm_calls == 3


# -- process state ---------------------------------------------------------------------
def test_process_settings_a_step_changes_are_put_back():
    """Shared fault cases b06b_switchinterval_left.py, c14_recursionlimit.py,
    c17_int_digits.py, c23_state_survey.py (its settings but sys.path, os.environ and
    gc.freeze, which are the model's to use across steps)."""
    snap = lambda: (sys.getrecursionlimit(), sys.getswitchinterval(),  # noqa: E731
                    sys.get_int_max_str_digits(), os.getcwd(), sys.excepthook,
                    threading.excepthook, list(warnings.filters))
    before = snap()
    res, _, _ = run("import gc, sys, os, threading, warnings, signal\n"
                    "sys.setrecursionlimit(60)\nsys.setswitchinterval(1000)\n"
                    "sys.set_int_max_str_digits(640)\n"
                    "os.chdir('/usr')\nsys.excepthook = lambda *a: None\n"
                    "threading.excepthook = lambda a: None\nwarnings.simplefilter('error')\n"
                    "signal.signal(signal.SIGUSR1, signal.SIG_IGN)", "FINAL('after')")
    import signal

    assert snap() == before and signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL
    assert res.answer == "after"
    note = res.history.entries[0].output
    assert "recursion limit" in note and "working folder" in note and "restored" in note


def test_after_a_lowered_recursion_limit_export_and_a_new_run_work(tmp_path):
    """Shared fault case c14b_recursionlimit_after.py."""
    res, _, _ = run("import sys\nsys.setrecursionlimit(30)", "FINAL('after')")
    export_run(res, tmp_path / "c14b.ipynb")
    res2, _, _ = run("x = [1, 2, 3]\nprint(sorted(x))", "FINAL(len(x))")
    assert res2.answer == "3"


def test_a_warnings_error_filter_does_not_break_the_export(tmp_path):
    """Shared fault case c15_warnings_error.py."""
    res, _, _ = run("import warnings\nwarnings.simplefilter('error')", "FINAL('after')")
    export_run(res, tmp_path / "c15.ipynb")
    assert (tmp_path / "c15.ipynb").exists()


def test_the_namespaces_builtins_entry_is_put_back():
    """Shared fault case kr06_kernel_ns_builtins.py, over the plain executor."""
    res, _, _ = run("globals()['__builtins__'] = {'__import__': __import__}\nx = 1",
                    "FINAL(len([1, 2]))")
    assert res.answer == "2"


# -- threads ---------------------------------------------------------------------------
def test_a_thread_named_like_the_hosts_is_muted():
    """Shared fault case c10_thread_named_rlm.py."""
    code = ("import threading, time\ndef chatter():\n    for i in range(300):\n"
            "        print('bg', i)\n        time.sleep(0.01)\n"
            "threading.Thread(target=chatter, daemon=True, name='rlm-stream-flush').start()\n"
            "time.sleep(0.05)")
    res, _, _ = run(code, "import time\ntime.sleep(0.5)\nprint('quiet')", "FINAL('done')")
    assert "left 1 thread" in res.history.entries[0].output
    assert res.history.entries[1].output.strip() == "quiet"


def test_a_low_level_thread_is_muted():
    """Shared fault case c20_low_level_thread.py: a thread started with
    ``_thread.start_new_thread`` has no ``threading.Thread``; it is quarantined by
    identifier."""
    code = ("import _thread, time\ndef chatter():\n    for i in range(300):\n"
            "        print('bg', i)\n        time.sleep(0.01)\n"
            "_thread.start_new_thread(chatter, ())\ntime.sleep(0.05)")
    res, _, _ = run(code, "import time\ntime.sleep(0.5)\nprint('quiet')", "FINAL('done')")
    assert "bg 0" in res.history.entries[0].output  # its own step keeps what it wrote
    assert "left 1 thread" in res.history.entries[0].output
    assert res.history.entries[1].output.strip() == "quiet"


def test_a_steps_own_worker_keeps_its_output_when_it_reuses_an_ident():
    """Shared fault case c27_ident_reuse.py."""
    s2 = ("import threading, time\ntime.sleep(1.0)\n"
          "def work():\n    print('result computed in a worker thread')\n"
          "t = threading.Thread(target=work); t.start(); t.join()\nprint('main: joined')")
    res, _, _ = run("import threading, time\n"
                    "threading.Thread(target=time.sleep, args=(0.5,), daemon=True).start()",
                    s2, "FINAL('x')")
    assert "result computed in a worker thread" in res.history.entries[1].output


def test_rewriting_the_child_runners_depth_cell_does_not_deepen_recursion():
    """Shared fault case b03_depth_closure_cell.py: the depth limit is the host's."""
    attack = ("r = llm_query.__self__.child_runner\n"
              "cells = dict(zip(r.__code__.co_freevars, r.__closure__ or ()))\n"
              "if 'max_depth' in cells:\n    cells['max_depth'].cell_contents = 99\n"
              "print(rlm_query('go deeper'))")
    events = []
    rlm, _ = scripted_run([block(attack, THOUGHT)] * 8 + [block("FINAL('done')", THOUGHT)] * 3,
                          max_depth=1, child_max_iterations=2, max_iterations=3, events=events)
    rlm.run("q", context="x")
    depths = {e.depth for e in events if e.kind == "run_started"}
    assert depths and max(depths) <= 1


def test_a_key_across_the_kept_outputs_cut_is_redacted(monkeypatch):
    """Shared fault case s03_cap_boundary_split.py: the key straddles the end of the
    kept head of a long output.  (Behind the process wall the worker's environment has
    no key; the code then holds it as a literal, which the host redacts the same.)"""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    head = head_room(MAX_KEPT_CHARS)  # where the kept head ends
    tail = MAX_KEPT_CHARS - head
    code = (f"import os\nk = os.environ.get('OPENAI_API_KEY') or {SECRET!r}\n"
            f"print('x' * ({head} - 15) + k + 'y' * ({tail} - 15 + 1), end='')")
    res, lm, _ = run(code, "FINAL('done')")
    out = res.history.entries[0].output
    assert "characters cut: print less" in out  # the output was cut
    assert SECRET[:15] not in out and SECRET[16:] not in out
    assert SECRET[:15] not in json.dumps(lm.calls, default=str)


def test_a_batch_stops_sending_when_its_step_times_out():
    """Shared fault case b11_batch_after_timeout.py."""
    from tests.scripted import scripted_rlm

    def slow(messages):
        time.sleep(0.5)
        return "sub answer"

    rlm, lm = scripted_rlm([block("r = llm_query_batched(['p%d' % i for i in range(64)])",
                                  THOUGHT), block("FINAL('done')", THOUGHT)],
                           sub_replies=[slow] * 64, step_timeout=1, max_concurrency=4)
    rlm.run("q", context="x")
    at_return = len(lm.calls)
    time.sleep(2)
    assert len(lm.calls) == at_return


# -- secrets ---------------------------------------------------------------------------
def _holds_secret(res, lm) -> bool:
    return SECRET in json.dumps(res.to_dict(), default=str) or SECRET in json.dumps(lm.calls)


def test_a_key_popped_from_the_environment_stays_secret(monkeypatch, executor_kind):
    """Shared fault case s01_env_deleted_then_print.py.  Behind the process wall the
    key is not in the child's environment at all (there is nothing to pop)."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    res, lm, _ = run("import os\nk = os.environ.pop('OPENAI_API_KEY')", "print(k)",
                     "FINAL('done')")
    assert not _holds_secret(res, lm)
    if executor_kind == "isolated":
        assert "KeyError: 'OPENAI_API_KEY'" in res.history.entries[0].output
    else:
        assert "[redacted OPENAI_API_KEY]" in res.history.entries[1].output


def test_rlm_query_prompt_and_context_are_redacted(monkeypatch, executor_kind):
    """Shared fault case s04_rlm_query_prompt.py.  Behind the process wall the key is
    not in the worker's environment (nor in any file of the host's /tmp or home), so
    model code reads the same value from a variable whose name is not a secret's (data
    that happens to hold a key, passed by name: the worker's environment is an
    allow-list): the host still redacts what reaches ``rlm_query``."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    key = "os.environ['OPENAI_API_KEY']"
    if executor_kind == "isolated":
        monkeypatch.setenv("RLM_TEST_PLAIN_DATA", SECRET)
        monkeypatch.setenv("RLM_PASS_ENV", "RLM_TEST_PLAIN_DATA")
        key = "os.environ['RLM_TEST_PLAIN_DATA']"
    res, lm, _ = run(f"import os\nprint(rlm_query('check this: ' + {key}))",
                     "import os\nprint(rlm_query('summarise', "
                     f"context={{'key': {key}}}))",
                     "FINAL('done')", max_depth=1, child_max_iterations=1)
    assert len(lm.calls) >= 5 and not any(SECRET in json.dumps(m) for m in lm.calls)
    assert not _holds_secret(res, lm)


def test_the_answer_checks_message_and_the_log_are_redacted(monkeypatch, tmp_path):
    """Shared fault case s05_verify_check_repr.py."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    final = "import os\nFINAL({'token': os.environ['OPENAI_API_KEY']})"
    res, lm, _ = run(final, final, verify_answer=True)
    export_rlm_log(res, tmp_path / "s05.jsonl")
    assert "You called FINAL" in json.dumps(lm.calls)
    assert not any(SECRET in json.dumps(m) for m in lm.calls)
    assert SECRET not in (tmp_path / "s05.jsonl").read_text()


def test_rebinding_re_escape_does_not_switch_redaction_off(monkeypatch):
    """Shared fault case s08_re_escape_patch.py."""
    import re

    escape = re.escape
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    res, lm, _ = run("import re\nre.escape = lambda s: '(?!)'",
                     "import os\nprint(os.environ['OPENAI_API_KEY'])", "FINAL('done')")
    assert re.escape is escape and not _holds_secret(res, lm)


def test_the_key_read_from_proc_environ_is_redacted(monkeypatch):
    """Shared fault case s07_proc_environ.py (os.environb; /proc/self/environ holds the
    environment the process started with, which a test cannot set)."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    res, lm, _ = run("import os\nprint(repr(os.environb))", "FINAL('done')")
    assert not _holds_secret(res, lm)


# -- rlm run -------------------------------------------------------------------------------
def cli(tmp_path: Path, replies: list[str], *args: str, cwd: Path | None = None,
        timeout: float = 60) -> tuple[int | None, str, str]:
    """``rlm run`` as the console script runs it (argv from the process), in a child
    process over a scripted model, with ``--executor`` of the test's executor kind; (exit
    code or None if killed after ``timeout``, stdout, stderr)."""
    script = tmp_path / "rlm_cli.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "import rlm_kernel.engine.rlm as e\n"
        "from rlm_kernel.models.scripted import ScriptedModel\n"
        "from tests.replies import block\n"
        f"lm = ScriptedModel([block(c) for c in {replies!r}])\n"
        "e.make_client = lambda *a, **k: lm\n"
        "from rlm_kernel.cli import main\n"
        "sys.argv = ['rlm', 'run', '--model', 'openai/scripted', '--context', "
        f"{str(CONTEXT_FILE)!r}, '--step-timeout', '2', '--no-ground-answer', "
        f"'--executor', {helpers.EXECUTOR!r}, *{list(args)!r}, 'q']\n"
        "sys.exit(main())\n")
    proc = subprocess.Popen([sys.executable, str(script)], cwd=cwd or tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        return None, out.decode(errors="replace"), err.decode(errors="replace")


@pytest.mark.parametrize("value", ["inf", "1e300"])
def test_an_unbounded_step_timeout_is_refused(value, capsys):
    """Shared fault case k_cli_step_timeout_inf.py."""
    from rlm_kernel.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["run", "--context", str(CONTEXT_FILE), "--step-timeout", value, "q"])
    assert exited.value.code == 2
    assert "--step-timeout: must be more than 0 and at most" in capsys.readouterr().err
    with pytest.raises(ValueError, match="step_timeout"):
        RLM(step_timeout=float(value))


def test_json_stdout_holds_only_the_object(tmp_path, executor_kind):
    """Shared fault cases k_cli_fd_write.py and k_cli_thread_dunder_stdout.py.  In-process
    the raw writes land on the host's stderr; behind the process wall the child's file
    descriptors 1 and 2 are pipes the host reads, so they are the step's own output (in
    the trajectory and the notebook)."""
    chatter = ("import threading, time, sys\ndef chatter():\n    while True:\n"
               "        sys.__stdout__.write('JUNK-THREAD\\n')\n        sys.__stdout__.flush()\n"
               "        time.sleep(0.001)\nthreading.Thread(target=chatter, daemon=True).start()")
    rc, out, err = cli(tmp_path, ["import os, subprocess\nos.write(1, b'JUNK-OS-WRITE\\n')\n"
                                  "subprocess.run(['echo', 'JUNK-SUBPROCESS'])\nprint('normal')",
                                  chatter, "import time\ntime.sleep(0.2)", "FINAL('answer')"],
                       "--json", "--export", str(tmp_path / "run.ipynb"))
    assert rc == 0, err
    assert json.loads(out)["answer"] == "answer"
    if executor_kind == "isolated":
        notebook = (tmp_path / "run.ipynb").read_text()
        assert "JUNK-OS-WRITE" in notebook and "JUNK-SUBPROCESS" in notebook
    else:
        assert "JUNK-OS-WRITE" in err and "JUNK-SUBPROCESS" in err


def test_a_closed_stdout_is_put_back_for_the_answer(tmp_path):
    """Shared fault case k_cli_close1.py."""
    rc, out, err = cli(tmp_path, ["import os\nos.close(1)", "FINAL('the answer')"])
    assert rc == 0 and "Answer: the answer" in out, err
    assert "file descriptor 1" in out


def test_a_non_daemon_thread_named_like_the_hosts_does_not_hold_the_exit(tmp_path):
    """Shared fault case k_cli_nondaemon_rlm_thread.py."""
    rc, out, _ = cli(tmp_path, ["import threading, time\ndef forever():\n    while True:\n"
                                "        time.sleep(0.5)\n"
                                "threading.Thread(target=forever, name='rlm-keepalive').start()",
                                "FINAL('answer')"], "--json", timeout=30)
    assert rc == 0 and json.loads(out)["answer"] == "answer"


def test_chdir_in_a_step_does_not_move_the_export(tmp_path):
    """Shared fault case c16_chdir.py."""
    user, model = tmp_path / "user", tmp_path / "model"
    user.mkdir()
    model.mkdir()
    rc, _, err = cli(tmp_path, [f"import os\nos.chdir({str(model)!r})", "FINAL('answer')"],
                     "--export", "run.ipynb", cwd=user)
    assert rc == 0, err
    assert (user / "run.ipynb").exists() and not (model / "run.ipynb").exists()


def test_atexit_hooks_of_model_code_neither_print_nor_hold_the_exit(tmp_path):
    """Shared fault case k_cli_atexit.py."""
    rc, out, err = cli(tmp_path, ["import atexit, time, sys\n"
                                  "atexit.register(time.sleep, 3600)\n"
                                  "atexit.register(lambda: print('JUNK-FROM-ATEXIT'))",
                                  "FINAL('answer')"], "--json", timeout=30)
    assert rc == 0, err
    assert json.loads(out)["answer"] == "answer"


def test_final_whose_str_raises_system_exit_still_prints_json(tmp_path):
    """Shared fault case k_cli_final_systemexit.py."""
    rc, out, err = cli(tmp_path, ["print('worked')", "class A:\n    def __str__(self):\n"
                                  "        raise SystemExit(0)\nFINAL(A())"], "--json")
    assert rc == 0 and json.loads(out)["steps"] == 2, err


# -- the rlm kernel (tests/conftest.py's kernel fixture) ---------------------------------------
def _task(kc, replies, setup=None, **cfg):
    if setup:
        execute(kc, setup, timeout=30)
    script_model(kc, [block(r, THOUGHT) for r in replies], ground_answer=False, **cfg)
    reply, messages = execute(kc, "%rlm Do it", timeout=120)
    return reply["content"]["status"], text_of(messages)


def _probe(kc, code):
    _, messages = execute(kc, code, timeout=30)
    return text_of(messages)


def test_kernel_variables_view_of_a_value_whose_str_hangs(kernel):
    """Shared fault case kr01_varview_str_hang.py."""
    _, kc = kernel
    code = ("import time\nclass Slow:\n    def __str__(self):\n        while True:\n"
            "            time.sleep(0.1)\n    __repr__ = __str__\nslow = Slow()\nprint('made')")
    started = time.monotonic()
    status, _ = _task(kc, [code, "FINAL('x')"], step_timeout=2.0)
    assert status == "ok" and time.monotonic() - started < 20


def test_kernel_secret_written_in_two_halves(kernel):
    """Shared fault case kr03_kernel_split_secret.py."""
    _, kc = kernel
    code = ("import os, sys, time\nk = os.environ['OPENAI_API_KEY']\n"
            "sys.stdout.write(k[:15])\nsys.stdout.flush()\ntime.sleep(0.25)\nprint(k[15:])")
    _task(kc, [code, "FINAL('done')"], setup=f"import os\nos.environ['OPENAI_API_KEY'] = {SECRET!r}",
          step_timeout=5.0)
    assert _probe(kc, f"import json\nprint({SECRET!r} in json.dumps(_lm.calls), "
                      "'[redacted OPENAI_API_KEY]' in json.dumps(_lm.calls))").split() == \
        ["False", "True"]


def test_kernel_recursion_limit_and_builtins_entry_are_put_back(kernel):
    """Shared fault cases kr05_kernel_recursionlimit.py and kr06_kernel_ns_builtins.py."""
    _, kc = kernel
    before = _probe(kc, "import sys\nprint(sys.getrecursionlimit())").strip()
    _task(kc, ["import sys\nsys.setrecursionlimit(80)",
               "globals()['__builtins__'] = {'__import__': __import__}\nx = 1", "FINAL('x')"],
          step_timeout=5.0)
    assert _probe(kc, "import sys\nprint(sys.getrecursionlimit(), len([1, 2]))").split() == \
        [before, "2"]


def test_kernel_variable_preview_of_a_stashed_key_is_redacted(kernel):
    """Shared fault case kr07_kernel_var_preview_secret.py."""
    _, kc = kernel
    execute(kc, f"import os\nos.environ['OPENAI_API_KEY'] = {SECRET!r}", timeout=30)
    script_model(kc, [block("import os\nstash = 'key: ' + os.environ['OPENAI_API_KEY']", THOUGHT),
                      block("FINAL('ok')", THOUGHT), block("FINAL('second run')", THOUGHT)],
                 step_timeout=5.0, ground_answer=False)
    execute(kc, "%rlm First task", timeout=60)
    execute(kc, "%rlm Second task", timeout=60)
    assert _probe(kc, f"import json\nprint([i for i, m in enumerate(_lm.calls) "
                      f"if {SECRET!r} in json.dumps(m)])").strip() == "[]"


def test_kernel_result_and_error_outputs_are_capped(kernel):
    """Shared fault case kr08_kernel_uncapped_outputs.py."""
    _, kc = kernel
    _task(kc, ["'x' * 20_000_000", "raise ValueError('y' * 20_000_000)", "FINAL('ok')"],
          step_timeout=20.0)
    lengths = json.loads(_probe(kc, "import json\nrec = list(get_ipython().find_magic('rlm')"
                                    ".__self__.runs.values())[-1]\nprint(json.dumps("
                                    "[len(e.output) for e in rec.result.history.entries]))"))
    assert 0 < max(lengths[:2]) <= 200_000


def test_kernel_survives_a_step_that_stops_the_event_loop(kernel):
    """Shared fault case kr02_asyncio_stop.py: the kernel runs on an asyncio loop;
    ``loop.stop()`` from a step must not end the kernel."""
    km, kc = kernel
    status, _ = _task(kc, ["import asyncio\nasyncio.get_event_loop().stop()\n"
                           "print('asked the loop to stop')", "FINAL('still here')"],
                      step_timeout=5.0)
    assert status == "ok"
    assert _probe(kc, "print('alive', 1 + 1)").strip() == "alive 2"
    assert km.is_alive()


def test_kernel_final_whose_str_raises_system_exit_is_kept(kernel):
    """Shared fault case kr04_kernel_final_str_systemexit.py."""
    _, kc = kernel
    status, _ = _task(kc, ["class A:\n    def __str__(self):\n        raise SystemExit(7)\n"
                           "print('step 1 work')\nFINAL(A())"], step_timeout=5.0)
    assert status == "ok"
    assert _probe(kc, "print(type(rlm_answer).__name__)").strip() == "A"
