"""Benchmark: framework overhead per step of the RLM loop, ours vs ``rlms`` 0.1.3.

Run by hand (about 20 seconds; no real model, no network beyond 127.0.0.1):

    .venv/bin/pip install rlms==0.1.3      # or: pip install -e '.[bench]'
    .venv/bin/python bench/bench_overhead.py [--runs 10] [--steps 20] [--no-http]

Each run is a question whose scripted model replies ``--steps`` times with a
trivial step (```repl\\nx = 1\\n```) and then with the framework's way of giving
the final answer (``FINAL("done")`` for ours; ``answer["content"] = ...;
answer["ready"] = True`` for rlms).  One *step* is the time between two
consecutive model calls: the loop parses the reply, runs the code, records the
history and builds the next prompt.  The model answers instantly, so that time
is all framework overhead.  The table gives the median and the 90th percentile
over every step of every run (``--runs`` x ``--steps`` steps, after one warm-up
run), and the median wall time of a whole run (set-up and tear-down included).

Two modes, both measured in the same process, runs of the two frameworks
interleaved:

* ``in-process``: ours gets a :class:`rlm_kernel.models.scripted.ScriptedModel`; rlms
  gets a ``rlm.clients.base_lm.BaseLM`` subclass returning the same replies.
  rlms has no client registry (``rlm.clients.get_client`` is a closed
  if/elif over backend names), so the scripted client is plugged in by
  replacing ``rlm.core.rlm.get_client`` for the duration of the run.
* ``http``: a tiny OpenAI-compatible server on 127.0.0.1 (in a thread of this
  process; ``bench/openai_stub.py``) answers every ``POST /v1/chat/completions`` at once with the next
  scripted reply.  Ours talks to it through its real ``LiteLLMClient``
  (litellm), rlms through its real ``openai`` backend (the OpenAI SDK).  Both
  pay the same HTTP cost; the client libraries differ, and that difference is
  part of what is measured.  Steps are timed at the server (arrival of one
  request to arrival of the next).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # rlm_kernel
sys.path.insert(0, str(Path(__file__).resolve().parent))  # openai_stub (sibling module)

from openai_stub import StubChatServer  # noqa: E402

from rlm_kernel import RLM  # noqa: E402
from rlm_kernel.models import LiteLLMClient  # noqa: E402
from rlm_kernel.models.scripted import ScriptedModel  # noqa: E402

STEP_REPLY = "```repl\nx = 1\n```"
OURS_FINAL = '```repl\nFINAL("done")\n```'
RLMS_FINAL = '```repl\nanswer["content"] = "done"\nanswer["ready"] = True\n```'
QUESTION = "What is the answer?"
CONTEXT = "The answer is done.\n" * 50
TARGET_MS = 2.0


# -- measurement ------------------------------------------------------------------------------
@dataclass
class Sample:
    """Step gaps (ms) and whole-run times (ms) of one framework in one mode."""

    steps_ms: list[float] = field(default_factory=list)
    runs_ms: list[float] = field(default_factory=list)
    error: str | None = None

    def add_run(self, stamps: list[float], run_seconds: float, expected_calls: int,
                answer: Any) -> None:
        if len(stamps) != expected_calls:
            raise RuntimeError(f"expected {expected_calls} model calls, saw {len(stamps)}")
        if str(answer).strip() != "done":
            raise RuntimeError(f"unexpected final answer {answer!r}")
        self.steps_ms += [(b - a) * 1e3 for a, b in zip(stamps, stamps[1:], strict=False)]
        self.runs_ms.append(run_seconds * 1e3)


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1] if len(values) >= 2 else values[0]


# -- the local OpenAI-compatible server --------------------------------------------------------
def load(server: StubChatServer, script: deque[str], replies: list[str]) -> None:
    """Queue ``replies`` (served in order by ``server``) for the next run; forget its stamps."""
    script.clear()
    script.extend(replies)
    server.reset()


# -- ours -------------------------------------------------------------------------------------
def ours_in_process(steps: int) -> tuple[list[float], float, Any]:
    stamps: list[float] = []

    def reply(text: str) -> Callable[[list[dict[str, str]]], str]:
        def answer(_messages: list[dict[str, str]]) -> str:
            stamps.append(time.perf_counter())
            return text
        return answer

    model = ScriptedModel([reply(STEP_REPLY)] * steps + [reply(OURS_FINAL)])
    seconds, answer = _our_run(model, steps)
    return stamps, seconds, answer


def _our_run(client: Any, steps: int) -> tuple[float, Any]:
    """One run of our loop on ``client``; (seconds, answer)."""
    start = time.perf_counter()
    # the same trivial step on purpose: repetition detection off (rlms has none)
    res = RLM(root_client=client, sub_client=client, max_iterations=steps + 1,
              repeat_limit=None).run(QUESTION, context=CONTEXT)
    seconds = time.perf_counter() - start
    if res.stopped_by != "final":
        raise RuntimeError(f"our run stopped by {res.stopped_by}: {res.error}")
    return seconds, res.answer


def ours_http(steps: int, server: StubChatServer,
              script: deque[str]) -> tuple[list[float], float, Any]:
    load(server, script, [STEP_REPLY] * steps + [OURS_FINAL])
    client = LiteLLMClient("openai/scripted", api_base=server.base_url, api_key="x",
                           num_retries=0, priced=False)
    seconds, answer = _our_run(client, steps)
    return list(server.stamps), seconds, answer


# -- rlms -------------------------------------------------------------------------------------
def rlms_available() -> str | None:
    """None if ``rlms`` 0.1.3 can be imported, else the reason it cannot."""
    try:
        from importlib.metadata import version

        import rlm  # noqa: F401

        got = version("rlms")
    except Exception as exc:  # noqa: BLE001 - reported in the table
        return f"rlms is not importable ({type(exc).__name__}: {exc}); " \
               "install it: .venv/bin/pip install rlms==0.1.3"
    if got != "0.1.3":
        return f"rlms {got} is installed; this benchmark is written for rlms 0.1.3"
    return None


def make_rlms_scripted_client(replies: list[str], stamps: list[float]) -> Any:
    from rlm.clients.base_lm import BaseLM
    from rlm.core.types import ModelUsageSummary, UsageSummary

    class ScriptedLM(BaseLM):
        """rlms client returning prepared replies, one per call."""

        def __init__(self) -> None:
            super().__init__(model_name="scripted")
            self.queue = deque(replies)
            self.calls = 0

        def completion(self, prompt: Any, model: str | None = None) -> str:
            stamps.append(time.perf_counter())
            self.calls += 1
            return self.queue.popleft() if self.queue else "out of script"

        async def acompletion(self, prompt: Any, model: str | None = None) -> str:
            return self.completion(prompt, model)

        def get_usage_summary(self) -> UsageSummary:
            return UsageSummary(model_usage_summaries={"scripted": ModelUsageSummary(
                total_calls=self.calls, total_input_tokens=10 * self.calls,
                total_output_tokens=5 * self.calls)})

        def get_last_usage(self) -> ModelUsageSummary:
            return ModelUsageSummary(total_calls=1, total_input_tokens=10, total_output_tokens=5)

    return ScriptedLM()


def rlms_in_process(steps: int) -> tuple[list[float], float, Any]:
    import rlm
    import rlm.core.rlm as rlm_core

    stamps: list[float] = []
    client = make_rlms_scripted_client([STEP_REPLY] * steps + [RLMS_FINAL], stamps)
    original = rlm_core.get_client
    rlm_core.get_client = lambda backend, backend_kwargs: client  # the only seam rlms has
    try:
        start = time.perf_counter()
        res = rlm.RLM(backend="openai", backend_kwargs={"model_name": "scripted"},
                      max_iterations=steps + 1).completion(CONTEXT, root_prompt=QUESTION)
        seconds = time.perf_counter() - start
    finally:
        rlm_core.get_client = original
    return stamps, seconds, res.response


def rlms_http(steps: int, server: StubChatServer,
              script: deque[str]) -> tuple[list[float], float, Any]:
    import rlm

    load(server, script, [STEP_REPLY] * steps + [RLMS_FINAL])
    start = time.perf_counter()
    res = rlm.RLM(backend="openai",
                  backend_kwargs={"model_name": "scripted", "base_url": server.base_url,
                                  "api_key": "x", "max_retries": 0},
                  max_iterations=steps + 1).completion(CONTEXT, root_prompt=QUESTION)
    seconds = time.perf_counter() - start
    return list(server.stamps), seconds, res.response


# -- driver -----------------------------------------------------------------------------------
def measure(runners: dict[str, Callable[[], tuple[list[float], float, Any]]], runs: int,
            steps: int) -> dict[str, Sample]:
    """Warm each runner up once, then alternate them ``runs`` times."""
    samples = {name: Sample() for name in runners}
    for name, runner in runners.items():
        try:
            runner()
        except Exception as exc:  # noqa: BLE001 - reported in the table
            samples[name].error = f"{type(exc).__name__}: {exc}"
    for _ in range(runs):
        for name, runner in runners.items():
            if samples[name].error:
                continue
            gc.collect()
            try:
                stamps, seconds, answer = runner()
                samples[name].add_run(stamps, seconds, steps + 1, answer)
            except Exception as exc:  # noqa: BLE001 - reported in the table
                samples[name].error = f"{type(exc).__name__}: {exc}"
    return samples


def print_table(rows: list[tuple[str, str, Sample]], rlms_reason: str | None) -> None:
    header = (f"{'framework':<18} {'mode':<11} {'steps':>5} {'median ms/step':>14} "
              f"{'p90 ms/step':>11} {'ratio vs rlms':>13} {'median ms/run':>13}")
    print(header)
    print("-" * len(header))
    ref = {mode: s for fw, mode, s in rows if fw.startswith("rlms") and s.steps_ms}
    notes = []
    for fw, mode, s in rows:
        if not s.steps_ms:
            why = s.error or rlms_reason or "no data"
            print(f"{fw:<18} {mode:<11} {'-':>5} {'n/a':>14} {'n/a':>11} {'n/a':>13} {'n/a':>13}")
            notes.append(f"{fw} ({mode}) not measured: {why}")
            continue
        med = statistics.median(s.steps_ms)
        ratio = "n/a"
        if mode in ref:
            ratio = f"{med / statistics.median(ref[mode].steps_ms):.2f}x"
        print(f"{fw:<18} {mode:<11} {len(s.steps_ms):>5} {med:>14.3f} {p90(s.steps_ms):>11.3f} "
              f"{ratio:>13} {statistics.median(s.runs_ms):>13.1f}")
        if s.error:
            notes.append(f"{fw} ({mode}) failed after some runs: {s.error}")
    for note in notes:
        print(f"note: {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="measured runs per framework")
    parser.add_argument("--steps", type=int, default=20, help="trivial steps per run")
    parser.add_argument("--no-http", action="store_true", help="skip the HTTP mode")
    args = parser.parse_args()
    runs, steps = args.runs, args.steps
    reason = rlms_available()

    print(f"RLM loop overhead per step: {runs} runs x {steps} steps per framework and mode "
          f"(+1 warm-up run), python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print("step = time between two consecutive model calls; the model replies instantly")
    print("ratio vs rlms = our median / rlms median in the same mode (lower is faster)")
    print()

    rows: list[tuple[str, str, Sample]] = []
    runners: dict[str, Callable[[], tuple[list[float], float, Any]]] = {
        "rlm_kernel": lambda: ours_in_process(steps)}
    if reason is None:
        runners["rlms 0.1.3"] = lambda: rlms_in_process(steps)
    got = measure(runners, runs, steps)
    rows += [("rlm_kernel", "in-process", got["rlm_kernel"]),
             ("rlms 0.1.3", "in-process", got.get("rlms 0.1.3", Sample()))]

    if not args.no_http:
        script: deque[str] = deque()  # each request takes the next scripted reply
        with StubChatServer(lambda _request: script.popleft() if script
                            else "out of script") as server:
            runners = {"rlm_kernel": lambda: ours_http(steps, server, script)}
            if reason is None:
                runners["rlms 0.1.3"] = lambda: rlms_http(steps, server, script)
            got = measure(runners, runs, steps)
        rows += [("rlm_kernel+litellm", "http", got["rlm_kernel"]),
                 ("rlms 0.1.3+openai", "http", got.get("rlms 0.1.3", Sample()))]

    print_table(rows, reason)
    print()
    print("in-process: ours = rlm_kernel.models.scripted.ScriptedModel; rlms = a BaseLM subclass with the "
          "same replies, plugged in by replacing rlm.core.rlm.get_client (rlms has no client "
          "registry)")
    if not args.no_http:
        print("http: both frameworks call the same OpenAI-compatible server on 127.0.0.1 that "
              "answers at once (same HTTP cost); ours through litellm, rlms through the openai "
              "SDK; steps timed at the server. Both clients build each request with the "
              "openai SDK (litellm uses it underneath), whose per-message request transform "
              "dominates these steps")
    print("median ms/run includes set-up and tear-down: rlms starts and stops a TCP "
          "LM-handler server per completion(), and socketserver.shutdown() waits up to its "
          "0.5 s poll interval; that is not part of the per-step figures")
    ours = rows[0][2]
    if ours.steps_ms:
        med = statistics.median(ours.steps_ms)
        verdict = "PASS" if med <= TARGET_MS else "FAIL"
        print(f"target: rlm_kernel in-process median <= {TARGET_MS:g} ms/step: {med:.3f} ms "
              f"-> {verdict}")


if __name__ == "__main__":
    main()
