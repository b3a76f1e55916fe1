"""What the engine needs from a model, and nothing else: the :class:`LanguageModel`
protocol, the chat :data:`Message` shape, :class:`LLMError`, and :class:`ClientWrapper`
(a client over another one).

Every backend (litellm, the embedded server, the scripted stand-in) implements the
protocol; the engine imports this module and :func:`~rlm_kernel.models.make_client`,
never a backend.  Shape after alexzhang13/rlm's ``clients/base_lm.py``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .usage import Completion, UsageLedger

__all__ = ["ClientWrapper", "LanguageModel", "LLMError", "Message"]

#: One chat message in OpenAI's format: ``{"role": "system"|"user"|"assistant", "content": str}``.
Message = dict[str, str]


class LLMError(RuntimeError):
    """A model could not be called; ``str(err)`` is one readable line for the user."""


@runtime_checkable
class LanguageModel(Protocol):
    """What the engine needs from a model: one chat completion at a time, and the few
    facts and hooks it reads or sets around calls.

    Attributes:
        model: the litellm model string (``openai/gpt-4.1-mini``), as recorded on calls.
        max_tokens: the client's default completion cap in tokens (None: the provider's).
        context_window: the model's input window in tokens, if known (None: unknown);
            the engine fits its prompt into it.
        ledger: where every call is recorded (:class:`UsageLedger`); the engine sets it
            to the run tree's ledger before the first call (None: calls are not kept).
        depth: the recursion depth recorded on calls (0: a top-level run); the engine
            sets it on clients it makes for deeper runs.
    """

    model: str
    max_tokens: int | None
    ledger: UsageLedger | None
    depth: int

    @property
    def context_window(self) -> int | None:
        """The model's input window in tokens, or None when unknown."""
        ...

    def check(self) -> None:
        """Fail early, before a run starts, when the model cannot be called at all.

        Raises:
            LLMError: the model is unknown, a key is missing, or its server is down.
        """
        ...

    def complete(
        self,
        messages: list[Message],
        *,
        role: str = "root",
        stop: list[str] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> Completion:
        """Return the reply to ``messages`` (OpenAI chat format); ``temperature``
        overrides the client's own for this call (with a fixed ``seed``, so a rerun
        samples the same reply where the provider supports seeds).

        Args:
            messages: the chat so far.
            role: ``root`` (a step's reply), ``final`` (the last "answer now" call) or
                ``sub`` (an ``llm_query`` sub-call); recorded on the call.
            stop: stop sequences.
            max_tokens: the completion cap of this call (None: the client's).
            temperature: this call's sampling temperature (None: the client's).
            seed: this call's sampling seed, sent to the provider as ``seed`` (OpenAI's
                parameter; llama-cpp-python's server honours it, providers without
                seeds ignore it); None: the client's default (a fixed seed when
                ``temperature`` is given, else none).  Candidate runs give each
                candidate its own (:mod:`rlm_kernel.engine.strategies.candidates`).  Clients that
                cannot seed (scripted models) accept and ignore it.

        Raises:
            LLMError: the provider failed after retries, the model is unknown or
                a key is missing.
        """
        ...


class ClientWrapper:
    """A :class:`LanguageModel` over another one: the wrapped client's facts and hooks
    (``model``, ``max_tokens``, ``context_window``, ``ledger``, ``depth``, ``check``)
    passed through explicitly; subclasses change :meth:`complete` only (the budget
    guard, a candidate's sampling).

    Args:
        client: the model client to wrap.
    """

    def __init__(self, client: LanguageModel) -> None:
        self._client = client
        self.model = client.model

    @property
    def max_tokens(self) -> int | None:
        """The wrapped client's default completion cap (tokens); None for a client
        that does not say."""
        return getattr(self._client, "max_tokens", None)

    @property
    def context_window(self) -> int | None:
        """The wrapped model's input window (tokens), if known (None for a client
        that does not say)."""
        return getattr(self._client, "context_window", None)

    @property
    def ledger(self) -> UsageLedger | None:
        """The wrapped client's ledger (setting it sets the client's)."""
        return self._client.ledger

    @ledger.setter
    def ledger(self, value: UsageLedger | None) -> None:
        self._client.ledger = value

    @property
    def depth(self) -> int:
        """The depth recorded on the wrapped client's calls (setting it sets the client's)."""
        return self._client.depth

    @depth.setter
    def depth(self, value: int) -> None:
        self._client.depth = value

    def check(self) -> None:
        """The wrapped client's availability check.

        Raises:
            LLMError: the model cannot be called."""
        self._client.check()

    def complete(self, messages: list[Message], *, role: str = "root",
                 stop: list[str] | None = None, max_tokens: int | None = None,
                 temperature: float | None = None, seed: int | None = None) -> Completion:
        """The wrapped client's call (``seed`` passed on only when given, so clients
        written before it existed keep working); see :meth:`LanguageModel.complete`.

        Raises:
            LLMError: the call failed.
        """
        more = {} if seed is None else {"seed": seed}
        return self._client.complete(messages, role=role, stop=stop, max_tokens=max_tokens,
                                     temperature=temperature, **more)
