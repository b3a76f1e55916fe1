"""Streamed replies on the embedded model: how soon a step's reply shows, what
streaming costs per step, and what the server spends after a stop.

Run by hand (the real model, the shared embedded server; about 6 minutes on 2 cores):

    .venv/bin/python bench/bench_streaming.py [--tasks 2] [--trials 3]

Three tables, each with its baseline side by side in the same run:

1. **First visible token.**  For ``--trials`` prompts (the first 2,000 characters of a
   standard-library module and a question: ~600 tokens), the seconds from the call to
   the first ``model_writing`` an observer gets (a run's ``ReplyStream``, as a cell
   gets it), the prompt new to the server; then, the prompt evaluated by the server
   already (it reuses it), the same against one token not streamed
   (``max_tokens=1``): what streaming adds to the model's own time.  Target: the
   prompt's evaluation + 0.3 s.
2. **Seconds per step, streamed and not.**  ``--tasks`` dev tasks of ``evals`` each run
   twice through :class:`rlm_kernel.RLM`, ``stream_replies`` on and off, in
   alternating order (on/off, then off/on), after a one-step run of the same task that
   is not measured (the server then holds the task's prompt head for both runs alike);
   mean seconds per step (a root call plus its code).  Target: ≤ 3 % apart.
3. **Server CPU after a stop.**  A long reply (``max_tokens`` 400) stopped after
   ``--stop-after`` seconds of writing: streamed and stopped by a ``KeyboardInterrupt``
   in the stream callback (what Ctrl-C and the stop button raise).  Two rows stop a
   streamed request ``--stop-after`` seconds into the evaluation of a new ~3,000-token
   prompt (a ``KeyboardInterrupt`` from a timer, as Ctrl-C): on the embedded server,
   whose abort callback stops llama.cpp when the client goes
   (:mod:`rlm_kernel.models.local.abort`), and on llama-cpp-python's server alone
   (``python -m llama_cpp.server``, the same options, started for these rows), which
   looks at its client only between two tokens.  The last row is the path before
   streaming, on that server: not streamed, the client gives up on its request after
   ``--stop-after`` seconds, as a stopped run did, and the server writes on.  Each: the
   server's CPU seconds (``/proc/PID/stat``) from the stop until it is idle (no CPU
   for 0.5 s; at most 120 s).  Target: < 1 s.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_accuracy import load_tasks  # noqa: E402
from proc_cpu import cpu_seconds, cpu_until_idle  # noqa: E402

from rlm_kernel import RLM, RLMConfig  # noqa: E402
from rlm_kernel.engine.budget import Budget, BudgetGuard  # noqa: E402
from rlm_kernel.engine.events import ModelWriting  # noqa: E402
from rlm_kernel.engine.writing import ReplyStream  # noqa: E402
from rlm_kernel.models import LiteLLMClient, LLMError, UsageLedger  # noqa: E402
from rlm_kernel.models.local.launcher import free_port, server_command  # noqa: E402
from rlm_kernel.models.local.server import LocalModelClient, ensure_server  # noqa: E402
from rlm_kernel.models.local.weights import get_spec, weights_path  # noqa: E402

MODEL = "qwen2.5-coder-1.5b"
MODULES = ["json.decoder", "textwrap", "shlex", "fnmatch", "glob", "calendar"]


def source_of(module: str, chars: int) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin
    return Path(spec.origin).read_text()[:chars]


def question(module: str, chars: int = 4000) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You answer questions about Python code."},
            {"role": "user", "content": f"```python\n{source_of(module, chars)}\n```\n"
             "Which functions does this code define? Name each with one line on what it does."}]


def client(max_tokens: int | None = None, timeout: float = 600.0) -> LocalModelClient:
    lm = LocalModelClient(MODEL, max_tokens=max_tokens, timeout=timeout)
    lm.ledger = UsageLedger()
    return lm


def first_token(trials: int) -> list[tuple[str, int, float, float, float]]:
    """Per trial: the module, the prompt's tokens, seconds to the first
    ``model_writing`` (streamed, the prompt new to the server), then with the prompt
    evaluated already (the server reuses it): seconds to the first ``model_writing``
    and seconds for one token not streamed."""
    rows = []
    for module in MODULES[:trials]:
        messages = question(module, 2000)

        def first_shown(messages: list[dict[str, str]] = messages) -> float:
            seen: list[float] = []
            guard = BudgetGuard(Budget(), UsageLedger(), time.monotonic())
            writer = ReplyStream(1, lambda e: seen.append(time.perf_counter())
                                 if isinstance(e, ModelWriting) else None, guard)
            start = time.perf_counter()
            client(max_tokens=8).complete(messages, stream=writer)
            return seen[0] - start

        cold = first_shown()
        start = time.perf_counter()
        one = client(max_tokens=1).complete(messages)
        one_token = time.perf_counter() - start
        warm = first_shown()
        rows.append((module, one.call.prompt_tokens, cold, warm, one_token))
    return rows


def per_step(n_tasks: int) -> list[tuple[str, bool, int, float]]:
    """Per run: the task, streamed or not, steps, seconds per step."""
    tasks, _ = load_tasks("dev", None, None, 1)
    rows = []
    for i, task in enumerate(tasks[:n_tasks]):
        # not measured: the server then holds this task's prompt head, for both runs alike
        RLM(config=RLMConfig(max_iterations=1)).run(task.question, context=task.context)
        for stream in ((True, False) if i % 2 == 0 else (False, True)):
            res = RLM(config=RLMConfig(stream_replies=stream, max_iterations=6)).run(
                task.question, context=task.context)
            rows.append((str(task.id), stream, res.steps, res.seconds / max(1, res.steps)))
    return rows


def after_stop(pid: int, stop_after: float,
               trials: int) -> list[tuple[str, float, float, str]]:
    """Per way of stopping (the streamed stop ``trials`` times): CPU seconds after the
    stop, seconds until idle, what the client saw."""
    rows = []
    long_reply = question("calendar", 2000)
    # streamed, stopped by KeyboardInterrupt in the callback (Ctrl-C, the stop button)
    for trial in range(1, trials + 1):
        got: list[float] = []

        def stop_later(_piece: str, got: list[float] = got) -> None:
            got.append(time.monotonic())
            if got[-1] - got[0] >= stop_after:
                raise KeyboardInterrupt

        try:
            client(max_tokens=400).complete(long_reply, stream=stop_later)
            seen = "not stopped (the reply ended first)"
        except KeyboardInterrupt:
            seen = f"stopped after {len(got)} tokens"
        at_stop = cpu_seconds(pid)
        cpu, idle = cpu_until_idle(pid, at_stop)
        rows.append((f"streamed, stopped while writing (trial {trial})", cpu, idle, seen))
    # streamed, stopped during the prompt's evaluation
    prompt = question("calendar", 12000)

    def stop_at_first(_piece: str) -> None:
        raise KeyboardInterrupt

    begun = time.monotonic()
    try:
        client(max_tokens=400).complete(prompt, stream=stop_at_first)
    except KeyboardInterrupt:
        pass
    seen = f"first token after {time.monotonic() - begun:.1f} s, stopped there"
    at_stop = cpu_seconds(pid)
    cpu, idle = cpu_until_idle(pid, at_stop)
    rows.append(("streamed, stopped at its first token (long prompt)", cpu, idle, seen))
    # streamed, stopped while a new long prompt is evaluated: ours, then upstream's alone
    rows.append(("stopped mid-prompt: rlm-kernel's server", *mid_prompt(
        pid, client(max_tokens=20), stop_after)))
    with PlainLlamaServer() as plain:
        rows.append(("stopped mid-prompt: llama_cpp.server alone (before)", *mid_prompt(
            plain.pid, plain.client(20), stop_after)))
        # before streaming: not streamed, the client gives up (its request is closed)
        plain.client(1).complete(long_reply)  # its prompt evaluated, as for ours above
        first = time.monotonic()
        try:
            plain.client(400, timeout=stop_after).complete(long_reply)
            seen = "not stopped (the reply ended first)"
        except LLMError:
            seen = f"gave up after {time.monotonic() - first:.1f} s"
        cpu, idle = cpu_until_idle(plain.pid, cpu_seconds(plain.pid))
        rows.append(("not streamed, client gone: llama_cpp.server (before)", cpu, idle, seen))
    return rows


def mid_prompt(pid: int, lm: LiteLLMClient, stop_after: float) -> tuple[float, float, str]:
    """A streamed request with a new ~3,000-token prompt to the server ``pid`` through
    ``lm``, stopped ``stop_after`` seconds after the call by a ``KeyboardInterrupt``
    (SIGALRM): the server's CPU seconds after the stop, seconds to idle, what happened."""
    lines = [f"record {n}: {uuid.uuid4().hex}" for n in range(150)]
    ask = [{"role": "user", "content": "\n".join(lines) + "\nWhich record is last?"}]
    pieces: list[str] = []

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, stop_after)
    try:
        lm.complete(ask, stream=pieces.append)
        seen = "not stopped (the reply ended first)"
    except KeyboardInterrupt:
        seen = f"stopped after {len(pieces)} tokens"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    cpu, idle = cpu_until_idle(pid, cpu_seconds(pid), limit=120)
    return cpu, idle, seen


class PlainLlamaServer:
    """llama-cpp-python's own server (``python -m llama_cpp.server``) with the options
    of the embedded server, on a free port, for as long as the ``with`` block runs
    (:attr:`pid`; :meth:`client` makes clients of it)."""

    def __enter__(self) -> PlainLlamaServer:
        spec, port = get_spec(MODEL), free_port()
        ours = server_command(weights_path(spec), spec.name, port)
        options = ours[ours.index("llama_cpp.server") + 1:ours.index("--keep_alive")]
        self.proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", *options],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pid, self.model = self.proc.pid, f"openai/{spec.name}"
        self.base = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.base + "/models", timeout=2).close()
                break
            except OSError:
                time.sleep(0.5)
        self.client(1).complete([{"role": "user", "content": "hi"}])  # loaded, warm
        return self

    def client(self, max_tokens: int, timeout: float = 600.0) -> LiteLLMClient:
        """A client of this server: ``max_tokens`` a reply, ``timeout`` seconds."""
        lm = LiteLLMClient(self.model, api_base=self.base, api_key="none",
                           max_tokens=max_tokens, timeout=timeout, num_retries=0,
                           priced=False)
        lm.ledger = UsageLedger()
        return lm

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=2, help="dev tasks for table 2")
    parser.add_argument("--trials", type=int, default=3, help="prompts for table 1")
    parser.add_argument("--stop-after", type=float, default=2.0,
                        help="seconds of writing before the stop (table 3)")
    parser.add_argument("--tables", default="1,2,3", help="which tables (default: 1,2,3)")
    args = parser.parse_args()
    pid = ensure_server(MODEL).pid
    client(max_tokens=1).complete([{"role": "user", "content": "hi"}])  # loaded, warm

    tables = {int(t) for t in args.tables.split(",")}
    if 1 in tables:
        _first_token_table(args.trials)
    if 2 in tables:
        _per_step_table(args.tasks)
    if 3 in tables:
        _after_stop_table(pid, args.stop_after, args.trials)


def _first_token_table(trials: int) -> None:
    print("\n1. Seconds to the first visible token (target: prompt evaluation + 0.3 s)")
    print(f"{'prompt':<14} {'tokens':>7} {'new prompt':>11} {'evaluated':>10} "
          f"{'1 token, not streamed':>22} {'streaming adds':>15}")
    for module, tokens, cold, warm, one in first_token(trials):
        print(f"{module:<14} {tokens:>7} {cold:>11.2f} {warm:>10.2f} {one:>22.2f} "
              f"{warm - one:>+15.2f}")
    print("(new prompt / evaluated: seconds from the call to the first model_writing, "
          "the prompt new to the server / already evaluated by it)")


def same_request(repeats: int) -> list[tuple[bool, float, int]]:
    """The same request (its prompt evaluated by the server already, 100 tokens
    written), streamed and not in turn, ``repeats`` times each: (streamed, seconds,
    tokens written)."""
    messages = question("fnmatch", 1500)
    client(max_tokens=1).complete(messages)  # the prompt evaluated once, before
    client(max_tokens=1).complete(messages, stream=lambda _p: None)  # and litellm's first
    rows = []  # stream read (its lazy imports: 0.3 s), not measured
    for i in range(2 * repeats):
        stream = i % 2 == 0
        start = time.perf_counter()
        # not streamed: litellm's plain client of the same server (the embedded model's
        # client streams every request, so that a killed client stops its server)
        lm = client(max_tokens=100) if stream else LiteLLMClient(
            f"openai/{MODEL}", api_base=ensure_server(MODEL).api_base, api_key="none",
            max_tokens=100, num_retries=0, priced=False)
        reply = lm.complete(messages, stream=(lambda _p: None) if stream else None)
        rows.append((stream, time.perf_counter() - start, reply.call.completion_tokens))
    return rows


def _per_step_table(tasks: int) -> None:
    print("\n2a. One request, streamed and not in turn (the same prompt, evaluated "
          "already; 100 tokens written)")
    rows2 = same_request(4)
    for stream in (True, False):
        secs = [t for st, t, _ in rows2 if st is stream]
        tokens = {n for st, _, n in rows2 if st is stream}
        print(f"{'streamed' if stream else 'not streamed':<14} mean {statistics.mean(secs):6.2f} s"
              f"  (runs: {', '.join(f'{t:.2f}' for t in secs)}; tokens {sorted(tokens)})")
    on1 = statistics.mean(t for st, t, _ in rows2 if st)
    off1 = statistics.mean(t for st, t, _ in rows2 if not st)
    print(f"ratio streamed / not streamed: {on1 / off1:.3f}")
    print("\n2b. Seconds per step of whole runs, streamed and not (target: ≤ 3 % apart; "
          "replies may differ: the server's prompt reuse changes their last bits)")
    rows = per_step(tasks)
    print(f"{'task':<28} {'streamed':>9} {'steps':>6} {'s/step':>8}")
    for task, stream, steps, secs in rows:
        print(f"{task:<28} {'yes' if stream else 'no':>9} {steps:>6} {secs:>8.2f}")
    on = statistics.mean(s for _, st, _, s in rows if st)
    off = statistics.mean(s for _, st, _, s in rows if not st)
    print(f"{'mean':<28} {'yes':>9} {'':>6} {on:>8.2f}")
    print(f"{'mean':<28} {'no':>9} {'':>6} {off:>8.2f}")
    print(f"ratio streamed / not streamed: {on / off:.3f}")


def _after_stop_table(pid: int, stop_after: float, trials: int) -> None:
    print(f"\n3. Server CPU seconds after a stop (target: < 1 s; stopped after "
          f"{stop_after:g} s of writing, or of the prompt's evaluation)")
    print(f"{'how the request ended':<52} {'CPU s':>7} {'s to idle':>10}  client")
    for how, cpu, idle, seen in after_stop(pid, stop_after, trials):
        print(f"{how:<52} {cpu:>7.2f} {idle:>10.2f}  {seen}")


if __name__ == "__main__":
    main()
