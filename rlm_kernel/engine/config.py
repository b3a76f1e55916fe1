"""Settings of a run, in one immutable dataclass (traitlets wrap it in the kernel)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from .prompts import STOP_SEQUENCES

__all__ = ["RLMConfig"]


@dataclass(frozen=True, slots=True)
class RLMConfig:
    """Limits and knobs of the RLM loop.  All durations are seconds.

    Attributes:
        max_iterations: steps (root-model calls that run code) before the last
            "answer now" call.
        max_depth: deepest child run ``rlm_query`` may start (0: it behaves
            like ``llm_query``).
        child_max_iterations: step limit of child runs.
        max_llm_calls / max_tokens / max_cost_usd / max_seconds: run budgets
            (children included); None = unlimited.  Tokens count prompt plus
            completion; cost is in US dollars.
        step_timeout: seconds one step's code may run before it is stopped.
        max_output_chars: characters of a step's output shown to the model
            (the user still sees all of it).
        preview_chars: characters of each variable's preview in the prompt.
        history_window: most recent steps kept in the prompt.
        termination: name of the termination policy (see ``PolicyRegistry``).
        termination_config: configuration passed to that policy.
        max_concurrency: parallel requests of ``llm_query_batched``.
        max_consecutive_errors: failed or code-less steps in a row that end the
            run with ``stopped_by="error"`` (0 = never).
        temperature: sampling temperature of every call.
        max_step_tokens / max_sub_tokens: completion cap in tokens for root steps
            and for sub-calls (None = provider default).
        cut_after_first_block: run only the first code block of a reply and
            drop what follows (small models write the next turn themselves).
        use_stop_sequences: send stop sequences that end a reply at its first
            closing fence.
        context_window: the root model's context window in tokens, to keep the
            prompt inside it (None: ask the client; the embedded model knows).
        protect_inputs: restore the run's input variables (``context`` ...) if
            model code rebinds or deletes them, with a warning to the model.
        restate_question: repeat the question in every step's message, so the
            form of the answer it asks for stays in view.
        verify_answer: before a run's first ``FINAL`` is accepted, show the model
            the question beside the value it chose and let it confirm or correct
            it (one extra step; skipped at the last step).
        resample_temperature: when a reply repeats the code of an earlier step,
            ask once more at this temperature (0 or None = never); breaks the loops a
            model falls into at temperature 0.
    """

    max_iterations: int = 12
    max_depth: int = 1
    child_max_iterations: int = 6
    max_llm_calls: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_seconds: float | None = None
    step_timeout: float | None = 120.0
    max_output_chars: int = 3000
    preview_chars: int = 500
    history_window: int = 8
    termination: str = "final_pattern"
    termination_config: dict[str, Any] | None = None
    max_concurrency: int = 16
    max_consecutive_errors: int = 5
    temperature: float = 0.0
    max_step_tokens: int | None = 1024
    max_sub_tokens: int | None = 1024
    cut_after_first_block: bool = True
    use_stop_sequences: bool = True
    protect_inputs: bool = True
    context_window: int | None = None
    restate_question: bool = True
    verify_answer: bool = False
    resample_temperature: float | None = 0.7

    def replace(self, **changes: Any) -> RLMConfig:
        """A copy with ``changes`` applied; None values are ignored.

        Raises:
            TypeError: a name is not a field of the config.
            ValueError: ``max_iterations`` < 1.
        """
        names = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise TypeError(f"unknown RLM setting(s): {', '.join(unknown)}")
        new = replace(self, **{k: v for k, v in changes.items() if v is not None})
        if new.max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        return new

    def stop_sequences(self) -> list[str] | None:
        """The stop sequences to send with root-model calls, or None."""
        return list(STOP_SEQUENCES) if self.use_stop_sequences else None
