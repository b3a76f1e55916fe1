"""A scripted stand-in for a model, for unit tests of the loop's mechanics.

It is not a model: it returns prepared replies in order.  Features are shown
working on the embedded local model, never on this.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from .base import CallOptions, LLMError, Message
from .prices import TokenPrices
from .usage import Completion, LLMCall, UsageLedger

__all__ = ["ScriptedModel"]

Reply = str | Callable[[list[dict[str, str]]], str] | BaseException


class ScriptedModel:
    """Replies from a list, one per call; then ``FINAL("out of script")``.

    Args:
        replies: each a string, a ``callable(messages) -> str``, or an exception
            instance to raise (an :class:`LLMError` simulates a provider failure).
        sub_replies: replies for ``role="sub"`` calls; default: echo the prompt's
            first 40 characters as ``"sub:<...>"``.
        model: the name reported in call records.
        prompt_tokens / completion_tokens / cost_usd: recorded per call.
    """

    def __init__(self, replies: Sequence[Reply], *, sub_replies: Sequence[Reply] | None = None,
                 model: str = "scripted", prompt_tokens: int = 10, completion_tokens: int = 5,
                 cost_usd: float = 0.0) -> None:
        self.model = model
        self._replies = list(replies)
        self._sub = list(sub_replies) if sub_replies is not None else None
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.cost_usd = cost_usd
        self.ledger: UsageLedger | None = None
        self.depth = 0
        self.max_tokens: int | None = None
        self.context_window: int | None = None
        self.calls: list[list[dict[str, str]]] = []
        self.temperatures: list[float | None] = []  # per call: the override, if any
        self.seeds: list[int | None] = []  # per call: the seed sent, if any (else ignored)
        self.caps: list[int | None] = []  # per call: the completion cap (max_tokens) sent
        self._lock = threading.Lock()

    @property
    def token_prices(self) -> TokenPrices:
        """What a call costs, for a USD budget: :attr:`cost_usd` a request, whatever
        its tokens."""
        return TokenPrices(request_usd=self.cost_usd)

    def check(self) -> None:
        """Scripted models are always available."""

    def complete(self, messages: list[Message], **options: Any) -> Completion:
        """Return the next scripted reply (see class docstring); of the options
        (:class:`~rlm_kernel.models.CallOptions`) ``role`` chooses the script,
        ``temperature``, ``seed`` and ``max_tokens`` are recorded (:attr:`temperatures`,
        :attr:`seeds`, :attr:`caps`), not used; ``stream`` gets the whole reply at once.

        Raises:
            LLMError: the script's next item is an exception.
            TypeError: an unknown option."""
        opts = CallOptions(**options)
        role = opts.role
        with self._lock:
            self.calls.append(list(messages))
            self.temperatures.append(opts.temperature)
            self.seeds.append(opts.seed)
            self.caps.append(opts.max_tokens)
            if role == "sub" and self._sub is not None:
                item: Reply = self._sub.pop(0) if self._sub else "sub: out of script"
            elif role == "sub":
                item = "sub:" + messages[-1]["content"][:40]
            else:
                item = self._replies.pop(0) if self._replies else 'FINAL("out of script")'
        call = LLMCall(model=self.model, role=role, prompt_tokens=self.prompt_tokens,
                       completion_tokens=self.completion_tokens, cost_usd=self.cost_usd,
                       depth=opts.call_depth(self.depth))
        if isinstance(item, BaseException):
            call.error = str(item)
            if self.ledger is not None:
                self.ledger.record(call)
            raise item if not isinstance(item, Exception) else LLMError(str(item))
        text = item(messages) if callable(item) else item
        if self.ledger is not None:
            self.ledger.record(call)
        if opts.stream is not None and text:  # a script's reply is written at once
            opts.stream(text)
        return Completion(text=text, call=call)
