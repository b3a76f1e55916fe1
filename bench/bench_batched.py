"""Benchmark: ``llm_query_batched`` of 16 prompts vs 16 sequential ``llm_query`` calls.

Run by hand (about 30 seconds; no network beyond 127.0.0.1):

    .venv/bin/python bench/bench_batched.py [--prompts 16] [--delay 0.25] [--repeats 3]

A small OpenAI-compatible server (``bench/openai_stub.py``) runs in a thread
of this process on 127.0.0.1 (``http.server.ThreadingHTTPServer``, one thread
per connection, so requests are served concurrently).  It answers
``POST /v1/chat/completions`` after a fixed delay (``--delay`` seconds,
standing in for model latency) with a valid ``chat.completion`` JSON including
``usage``.

Each measurement is a full :class:`rlm_kernel.RLM` run: a scripted root model
(:class:`rlm_kernel.models.scripted.ScriptedModel`) emits one step of code that asks
the sub model the ``--prompts`` questions, times that itself with
``time.perf_counter``, then answers with ``FINAL``.  The sub model is our real
``LiteLLMClient`` (litellm, ``openai/<alias>``) pointed at the local server.
Three ways of asking: ``[llm_query(p) for p in prompts]``, and
``llm_query_batched(prompts)`` with ``max_concurrency`` 8 and with the
default (16).  Every reply is checked (right text, input order) and every call
must be in the run's usage ledger.  The table gives the median over
``--repeats`` runs of the seconds spent in the step's calls, the whole run's
seconds, and the speed-up over the sequential calls (target: >= 8x).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before litellm is imported
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # rlm_kernel
sys.path.insert(0, str(Path(__file__).resolve().parent))  # openai_stub (sibling module)

from openai_stub import StubChatServer  # noqa: E402

from rlm_kernel import RLM, RLMConfig  # noqa: E402
from rlm_kernel.executors import PlainExecutor  # noqa: E402
from rlm_kernel.models import LiteLLMClient  # noqa: E402
from rlm_kernel.models.scripted import ScriptedModel  # noqa: E402

TARGET_SPEEDUP = 8.0
SEQUENTIAL_CODE = """\
import time
t0 = time.perf_counter()
replies = [llm_query(p) for p in prompts]
elapsed = time.perf_counter() - t0
print(len(replies), round(elapsed, 3))
"""
BATCHED_CODE = """\
import time
t0 = time.perf_counter()
replies = llm_query_batched(prompts)
elapsed = time.perf_counter() - t0
print(len(replies), round(elapsed, 3))
"""
WARMUP_CODE = 'replies = [llm_query("warm up")]\nelapsed = 0.0\n'


def reply_to(request: dict[str, Any]) -> str:
    """The stub server's reply to a chat request: ``"reply to: <its last message>"``."""
    return f"reply to: {request.get('messages', [{}])[-1].get('content', '')}"


def one_run(code: str, prompts: list[str], sub: LiteLLMClient,
            max_concurrency: int | None) -> tuple[float, float, list[str], int]:
    """Run the RLM once; return (seconds in the calls, seconds of the run, replies,
    sub-calls in the ledger)."""
    root = ScriptedModel([f"Ask the helper.\n```repl\n{code}```", '```repl\nFINAL("ok")\n```'])
    executor = PlainExecutor()
    config = RLMConfig().replace(max_iterations=3)
    if max_concurrency is not None:  # None: the default setting
        config = config.replace(max_concurrency=max_concurrency)
    start = time.perf_counter()
    res = RLM(config=config, root_client=root, sub_client=sub).run(
        "Ask the helper every question.", executor=executor, prompts=prompts)
    run_seconds = time.perf_counter() - start
    if res.stopped_by != "final":
        raise RuntimeError(f"run stopped by {res.stopped_by}: {res.error}")
    step_output = res.history.entries[0].output if res.history.entries else ""
    if "Error" in step_output or "Traceback" in step_output:
        raise RuntimeError(f"the step failed: {step_output.strip()[:300]}")
    sub_calls = sum(1 for c in res.calls if c.role == "sub" and c.error is None)
    return executor.namespace["elapsed"], run_seconds, executor.namespace["replies"], sub_calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=16, help="prompts per batch")
    parser.add_argument("--delay", type=float, default=0.25, help="server latency in seconds")
    parser.add_argument("--repeats", type=int, default=3, help="runs per row (median)")
    args = parser.parse_args()
    prompts = [f"Question {i}: what is {i} plus {i}?" for i in range(args.prompts)]
    expected = [f"reply to: {p}" for p in prompts]
    default_concurrency = RLMConfig().max_concurrency

    with StubChatServer(reply_to, delay=args.delay, usage=(20, 6)) as server:
        sub = LiteLLMClient("openai/bench-sub", api_base=server.base_url, api_key="x",
                            num_retries=0, priced=False)
        t0 = time.perf_counter()
        one_run(WARMUP_CODE, prompts, sub, None)  # imports litellm, opens a connection
        warmup = time.perf_counter() - t0

        rows: list[tuple[str, str, float, float, int]] = []
        plans = [("sequential llm_query", SEQUENTIAL_CODE, None, "1"),
                 ("llm_query_batched", BATCHED_CODE, 8, "8"),
                 ("llm_query_batched", BATCHED_CODE, None, f"{default_concurrency} (default)")]
        for name, code, concurrency, shown in plans:
            calls_s, runs_s = [], []
            server.reset()
            for _ in range(args.repeats):
                elapsed, run_seconds, replies, sub_calls = one_run(code, prompts, sub,
                                                                   concurrency)
                if list(replies) != expected:
                    bad = next(i for i, (a, b) in enumerate(zip(replies, expected,
                                                                strict=False)) if a != b)
                    raise SystemExit(f"{name}: reply {bad} is {replies[bad]!r}, "
                                     f"expected {expected[bad]!r}")
                if sub_calls != len(prompts):
                    raise SystemExit(f"{name}: {sub_calls} sub-calls in the ledger, "
                                     f"expected {len(prompts)}")
                calls_s.append(elapsed)
                runs_s.append(run_seconds)
            rows.append((name, shown, statistics.median(calls_s), statistics.median(runs_s),
                         server.peak))

    print(f"{args.prompts} sub-calls through rlm_kernel's LiteLLMClient (litellm) to a local "
          f"OpenAI-compatible server on 127.0.0.1 answering after {args.delay:g} s each")
    print(f"median of {args.repeats} full RLM runs per row; 'calls s' = time spent in the "
          "step's calls (timed inside the step), 'run s' = whole RLM run; "
          f"{os.cpu_count()} CPUs; warm-up run {warmup:.1f} s (litellm import) not counted")
    print()
    header = (f"{'method':<22} {'max_concurrency':<15} {'calls s':>8} {'run s':>7} "
              f"{'peak in flight':>14} {'speed-up':>9}")
    print(header)
    print("-" * len(header))
    base = rows[0][2]
    for name, shown, calls, run, peak in rows:
        print(f"{name:<22} {shown:<15} {calls:>8.3f} {run:>7.3f} {peak:>14} "
              f"{base / calls:>8.1f}x")
    print()
    ideal = args.prompts * args.delay
    print(f"ideal: sequential {ideal:.2f} s, fully parallel {args.delay:.2f} s "
          f"(speed-up {args.prompts}x)")
    best = base / rows[2][2]
    verdict = "PASS" if best >= TARGET_SPEEDUP else "FAIL"
    print(f"target: speed-up with the default max_concurrency >= {TARGET_SPEEDUP:g}x: "
          f"{best:.1f}x "
          f"-> {verdict}")


if __name__ == "__main__":
    main()
