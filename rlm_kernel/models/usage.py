"""Accounting of model calls: one record per request, summed per run."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["LLMCall", "Completion", "UsageLedger"]


@dataclass(slots=True)
class LLMCall:
    """One request to a model.

    Attributes:
        model: litellm model string that served the call.
        role: ``"root"`` for a step of the loop, ``"sub"`` for ``llm_query``,
            ``"final"`` for the last "answer now" call.
        prompt_tokens / completion_tokens: token counts reported by the provider.
        cost_usd: price of the call in US dollars from litellm's cost map (0.0
            when the model is unpriced, e.g. the embedded local model).
        seconds: wall-clock duration of the request.
        depth: recursion depth of the run that made the call (0 = top level).
        error: the error message if the call failed, else ``None``.
        cached: answered from litellm's cache (``c.RLM.cache``): no request was
            sent, and ``cost_usd`` is 0.
        deployment: for a call through a model fleet (``c.RLM.router``), the
            deployment that answered: its ``model_info.id`` when the fleet gives one,
            else ``<litellm model>@<api_base>``; None otherwise.
    """

    model: str
    role: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    depth: int = 0
    error: str | None = None
    cached: bool = False
    deployment: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form for JSON output."""
        return asdict(self)


@dataclass(slots=True)
class Completion:
    """The text of one model reply plus its accounting record."""

    text: str
    call: LLMCall


@dataclass
class UsageLedger:
    """Thread-safe list of every :class:`LLMCall` of a run and its children.

    ``llm_query_batched`` records from several threads at once, hence the lock.
    """

    calls: list[LLMCall] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, call: LLMCall) -> None:
        """Append one call record."""
        with self._lock:
            self.calls.append(call)

    def totals(self) -> dict[str, float | int]:
        """Sums over all calls: ``llm_calls``, ``prompt_tokens``,
        ``completion_tokens`` (tokens) and ``cost_usd`` (USD)."""
        with self._lock:
            calls = list(self.calls)
        return {
            "llm_calls": len(calls),
            "prompt_tokens": sum(c.prompt_tokens for c in calls),
            "completion_tokens": sum(c.completion_tokens for c in calls),
            "cost_usd": sum(c.cost_usd for c in calls),
        }
