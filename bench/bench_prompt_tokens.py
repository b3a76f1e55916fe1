"""Benchmark: prompt size per step when ``context`` is 1 KB, 1 MB or 100 MB of text.

Run by hand (about 15 seconds, about 0.5 GB of memory; no model, no network):

    .venv/bin/python bench/bench_prompt_tokens.py

For each size a ``str`` context is built and a full :class:`rlm_kernel.RLM`
run of 3 steps is driven by a :class:`rlm_kernel.models.scripted.ScriptedModel`
(step 1 prints ``len(context)``, step 2 prints ``context[:200]``, step 3 calls
``FINAL``).  The scripted model records the messages it is sent; for each
step the table gives the prompt's characters (sum of the message contents)
and tokens, and the ratio 100 MB / 1 KB.  The RLM keeps the data in the REPL
and shows the model only metadata, so the prompt must not grow with the
context: the ratio should be about 1.0.

Tokens are counted with ``litellm.token_counter(model="gpt-4o", ...)``, which
uses tiktoken's ``o200k_base`` file bundled with litellm (no download).  If
that fails, tokens are estimated as characters / 4 and the header says so.

A second table gives the seconds it takes to build the variable metadata
(``REPLVariable.from_value``, as the engine does at the start of a run; median
of several builds) and the whole run's seconds for each size.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlm_kernel import RLM, RLMConfig  # noqa: E402
from rlm_kernel.models.scripted import ScriptedModel  # noqa: E402
from rlm_kernel.repl_types import REPLVariable  # noqa: E402

SIZES = [("1 KB", 1024), ("1 MB", 1024**2), ("100 MB", 100 * 1024**2)]
QUESTION = "How many characters does the report have?"
REPLIES = [
    "First I check the size.\n```repl\nprint(len(context))\n```",
    "Now I look at the start.\n```repl\nprint(context[:200])\n```",
    "I have the answer.\n```repl\nFINAL(len(context))\n```",
]
PARAGRAPH = (
    "The quarterly report covers revenue, costs and head count for every region. "
    "Sales in the north grew by four percent while the south stayed flat; the west "
    "opened two new offices and the east closed one.\n"
)
BUILD_REPEATS = 7


def make_text(n: int) -> str:
    """``n`` characters of English-like text (a paragraph repeated)."""
    return (PARAGRAPH * (n // len(PARAGRAPH) + 1))[:n]


def token_counter() -> tuple[Callable[[list[dict[str, str]]], int], str]:
    """The token counting function and a description of it for the header."""
    try:
        import litellm

        probe = [{"role": "user", "content": "hello world"}]
        litellm.token_counter(model="gpt-4o", messages=probe)

        def count(messages: list[dict[str, str]]) -> int:
            return int(litellm.token_counter(model="gpt-4o", messages=messages))

        return count, ("tokens: litellm.token_counter(model='gpt-4o'), tiktoken o200k_base "
                       "bundled with litellm (offline)")
    except Exception as exc:  # noqa: BLE001 - fall back and say so
        def estimate(messages: list[dict[str, str]]) -> int:
            return round(sum(len(m["content"]) for m in messages) / 4)

        return estimate, (f"tokens: ESTIMATED as characters / 4 (litellm.token_counter failed: "
                          f"{type(exc).__name__}: {str(exc)[:80]})")


def build_seconds(text: str, preview: int) -> float:
    """Median seconds of ``REPLVariable.from_value`` on ``text``."""
    times = []
    for _ in range(BUILD_REPEATS):
        t0 = time.perf_counter()
        REPLVariable.from_value("context", text, preview_length=preview)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    count, how = token_counter()
    preview = RLMConfig().preview_chars
    chars: dict[str, list[int]] = {}
    tokens: dict[str, list[int]] = {}
    meta_s: dict[str, float] = {}
    run_s: dict[str, float] = {}
    answers: dict[str, str | None] = {}
    for label, n in SIZES:
        text = make_text(n)
        meta_s[label] = build_seconds(text, preview)
        model = ScriptedModel(list(REPLIES))
        t0 = time.perf_counter()
        res = RLM(root_client=model, sub_client=model, max_iterations=5).run(QUESTION,
                                                                              context=text)
        run_s[label] = time.perf_counter() - t0
        if res.stopped_by != "final" or len(model.calls) != len(REPLIES):
            raise SystemExit(f"{label}: run stopped by {res.stopped_by} after "
                             f"{len(model.calls)} calls ({res.error})")
        answers[label] = res.answer
        chars[label] = [sum(len(m["content"]) for m in msgs) for msgs in model.calls]
        tokens[label] = [count(msgs) for msgs in model.calls]
        del text, model, res
        gc.collect()

    first, last = SIZES[0][0], SIZES[-1][0]
    print("Prompt size per step (all messages sent to the root model) vs size of `context` (str)")
    print(how)
    print()
    head = f"{'step':<5}"
    for label, _ in SIZES:
        head += f" {label + ' chars':>13} {label + ' tokens':>14}"
    head += f" {'ratio ' + last + '/' + first:>17}"
    print(head)
    print("-" * len(head))
    ratios = []
    for i in range(len(REPLIES)):
        row = f"{i + 1:<5}"
        for label, _ in SIZES:
            row += f" {chars[label][i]:>13,} {tokens[label][i]:>14,}"
        ratio = tokens[last][i] / tokens[first][i]
        ratios.append(ratio)
        row += f" {ratio:>14.3f} tok"
        print(row)
    print()
    head2 = (f"{'context':<8} {'characters':>13} {'metadata build s':>17} {'whole run s':>12}  "
             "answer")
    print(head2)
    print("-" * len(head2))
    for label, n in SIZES:
        print(f"{label:<8} {n:>13,} {meta_s[label]:>17.2e} {run_s[label]:>12.3f}  "
              f"{answers[label]}")
    print()
    flat = all(0.95 <= r <= 1.05 for r in ratios)
    print(f"prompt tokens ratio {last}/{first} per step: "
          f"{', '.join(f'{r:.3f}' for r in ratios)} -> {'FLAT' if flat else 'NOT FLAT'} "
          "(the context size itself grew 102,400x)")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    main()
