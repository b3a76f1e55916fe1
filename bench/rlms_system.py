"""Run one eval task through ``rlms`` 0.1.3, the RLM paper's reference package.

Used by ``bench/bench_accuracy.py --vs rlms``; not a script of its own.  Needs
``.venv/bin/pip install -e '.[bench]'`` (``rlms==0.1.3``).  Nothing is printed:
rlms's stdout is captured and dropped while it runs.

How rlms is driven (checked against the installed ``rlm/`` sources):

* ``rlm.RLM(backend="openai", backend_kwargs={"model_name": alias, "base_url":
  api_base, "api_key": "local"}, environment="local", max_iterations=N,
  sampling_args={"temperature": 0.0})``; every other argument is rlms's
  default: its own system prompt (``RLM_SYSTEM_PROMPT`` plus the orchestrator
  addendum), ``max_depth=1``, no budget / timeout / token / error limits,
  ``verbose=False``, no ``max_tokens`` on requests (llama-cpp-python's server
  then generates until end of sequence or a full context window; ours caps
  root steps and sub-calls at 1024 tokens).  ``--rlms-max-tokens`` in the
  bench sets a cap (see ``run_rlms``).
* Temperature: rlms 0.1.3 has a ``sampling_args`` parameter that it copies into
  ``backend_kwargs["sampling_args"]``; its ``OpenAIClient`` passes those as
  keyword arguments of ``client.chat.completions.create``.  The same client
  object serves the root calls and the REPL's ``llm_query`` /
  ``llm_query_batched`` / ``rlm_query`` sub-calls (rlms's ``LMHandler`` routes
  depth-1 requests to the default client when no ``other_backends`` are
  given), so every request goes to ``api_base`` with ``temperature=0``.  No
  patching was needed.
* Context: ``completion(task.context, root_prompt=task.question)``.  rlms binds
  the payload to ``context`` in its REPL through a temporary file (a str is
  written as text, a dict or list as JSON and read back with ``json.load``,
  so non-JSON values fail and dict keys become strings), and shows the root
  model only its type and length plus the question.
* Answer: rlms ends a run when model code sets ``answer["content"] = ...`` and
  ``answer["ready"] = True``; the answer is ``str(content)``.  If the
  ``max_iterations`` iterations pass without that, rlms makes one more call
  ("Please provide a final answer ...") and returns that reply's raw text.
  ``stopped_by`` is ``"final"`` in the first case, ``"max_iterations"`` in the
  second, ``"error"`` when the run raised.
* Steps: the number of iterations rlms ran (root-model calls that may run
  code; the extra answer call after the last iteration is not a step), counted
  by a subclass overriding ``RLM._completion_turn``; rlms 0.1.3 accepts
  ``on_iteration_*`` callbacks but never calls them.
* Tokens: prompt + completion tokens of every request of the run (root and
  sub-calls), from rlms's own usage tracking (the OpenAI responses' ``usage``),
  read from the run's ``LMHandler`` so they are known even when the run fails.
* Seconds: wall time of ``completion()``, which includes rlms starting and
  stopping its LM-handler socket server for each run (``shutdown()`` waits up
  to 0.5 s).

Settings rlms cannot honour: none of ours beyond temperature and max
iterations are passed on (rlms has no per-step output cap matching ours, no
stop sequences, no history window, no answer verification); its
``max_depth=1`` means ``rlm_query`` is a plain ``llm_query`` there.
"""

from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["RlmsRun", "rlms_available", "run_rlms"]

RLMS_VERSION = "0.1.3"


@dataclass
class RlmsRun:
    """What one rlms run gave: the fields of the bench's ``Outcome`` except the verdict."""

    answer: str | None
    steps: int
    seconds: float
    tokens: int
    stopped_by: str
    error: str | None = None
    llm_calls: int = 0


def rlms_available() -> str | None:
    """None if ``rlms`` 0.1.3 can be imported, else the reason it cannot."""
    try:
        from importlib.metadata import version

        import rlm  # noqa: F401

        got = version("rlms")
    except Exception as exc:  # noqa: BLE001 - returned as the reason
        return (f"rlms is not importable ({type(exc).__name__}: {exc}); "
                "install it: .venv/bin/pip install -e '.[bench]'")
    if got != RLMS_VERSION:
        return f"rlms {got} is installed; this bench is written for rlms {RLMS_VERSION}"
    return None


def _counting_rlm_class() -> type:
    """``rlm.RLM`` subclass that counts iterations and notes how the run ended."""
    from rlm import RLM

    class CountingRLM(RLM):  # type: ignore[misc, valid-type]
        """Counts ``_completion_turn`` calls (iterations) and keeps the run's LM handler."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.steps = 0
            self.hit_max_iterations = False
            self.handler: Any = None

        def _completion_turn(self, prompt: Any, lm_handler: Any, environment: Any) -> Any:
            self.steps += 1
            self.handler = lm_handler
            return super()._completion_turn(prompt, lm_handler, environment)

        def _default_answer(self, message_history: Any, lm_handler: Any) -> str:
            self.hit_max_iterations = True
            return super()._default_answer(message_history, lm_handler)

    return CountingRLM


def _usage(handler: Any) -> tuple[int, int]:
    """(tokens, calls) recorded by an rlms ``LMHandler``; (0, 0) if there is none."""
    if handler is None:
        return 0, 0
    try:
        summary = handler.get_usage_summary()
    except Exception:  # noqa: BLE001 - usage is best effort after a failure
        return 0, 0
    calls = sum(s.total_calls for s in summary.model_usage_summaries.values())
    return summary.total_input_tokens + summary.total_output_tokens, calls


def run_rlms(task: Any, api_base: str, model_alias: str, max_iterations: int, *,
             temperature: float = 0.0, max_tokens: int | None = None) -> RlmsRun:
    """Answer ``task.question`` about ``task.context`` with rlms 0.1.3.

    Args:
        task: an eval task (``question`` and ``context`` are used).
        api_base: OpenAI-compatible base URL, e.g. ``http://127.0.0.1:43121/v1``.
        model_alias: the model name the server answers to.
        max_iterations: rlms's ``max_iterations``.
        temperature: sent with every request (root and sub-calls).
        max_tokens: completion cap per request; None (the default) sends none,
            as rlms does out of the box.  Sent as ``extra_body={"max_tokens": N}``
            because rlms renames a ``max_tokens`` sampling arg to
            ``max_completion_tokens``, which llama-cpp-python's server ignores.

    Returns:
        An :class:`RlmsRun`.  Never raises for a failed run (except on
        Ctrl-C): the exception's text is in ``error`` and ``stopped_by`` is
        ``"error"``.
    """
    from rlm import CancellationError

    sampling: dict[str, Any] = {"temperature": temperature}
    if max_tokens is not None:  # rlms renames a plain max_tokens to max_completion_tokens
        sampling["extra_body"] = {"max_tokens": max_tokens}
    rlm_cls = _counting_rlm_class()
    start = time.perf_counter()
    runner = None
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            runner = rlm_cls(
                backend="openai",
                backend_kwargs={"model_name": model_alias, "base_url": api_base,
                                "api_key": "local"},
                environment="local",
                max_iterations=max_iterations,
                sampling_args=sampling,
                verbose=False,
            )
            result = runner.completion(task.context, root_prompt=task.question)
    except CancellationError as exc:  # rlms turns Ctrl-C into this
        raise KeyboardInterrupt from exc
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - model code may even raise SystemExit
        seconds = time.perf_counter() - start
        tokens, calls = _usage(getattr(runner, "handler", None))
        return RlmsRun(answer=None, steps=getattr(runner, "steps", 0), seconds=seconds,
                       tokens=tokens, stopped_by="error",
                       error=f"{type(exc).__name__}: {exc}", llm_calls=calls)
    seconds = time.perf_counter() - start
    usage = result.usage_summary
    tokens = usage.total_input_tokens + usage.total_output_tokens
    calls = sum(s.total_calls for s in usage.model_usage_summaries.values())
    answer = result.response
    return RlmsRun(answer=None if answer is None else str(answer), steps=runner.steps,
                   seconds=seconds, tokens=tokens,
                   stopped_by="max_iterations" if runner.hit_max_iterations else "final",
                   llm_calls=calls)
