"""What the engine needs from a model, and nothing else: the :class:`LanguageModel`
protocol, the chat :data:`Message` shape, one call's options (:class:`CallOptions`),
:class:`LLMError`, and :class:`ClientWrapper` (a client over another one).

Adding a model option: a field of :class:`CallOptions` and the client that sends it
(:mod:`rlm_kernel.models.litellm_client`); the wrappers pass options on without naming them.

Every backend (litellm, the embedded server, the scripted stand-in) implements the
protocol; the engine imports this module and :func:`~rlm_kernel.models.make_client`,
never a backend.  Shape after alexzhang13/rlm's ``clients/base_lm.py``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, fields
from typing import Any, Protocol, runtime_checkable

from .usage import Completion, UsageLedger

__all__ = ["CallOptions", "ClientWrapper", "LanguageModel", "LLMError", "Message"]

#: One chat message in OpenAI's format: ``{"role": "system"|"user"|"assistant", "content": str}``.
Message = dict[str, str]


class LLMError(RuntimeError):
    """A model could not be called; ``str(err)`` is one readable line for the user."""


@dataclass(frozen=True)
class CallOptions:
    """The options of one model call, besides its messages: what
    :meth:`LanguageModel.complete` takes as keywords (``complete(messages, role="sub")``).

    Attributes:
        role: ``root`` (a step's reply), ``final`` (the last "answer now" call), ``sub``
            (an ``llm_query`` sub-call) or ``warmup``; recorded on the call.
        stop: stop sequences (None: none).
        max_tokens: the completion cap of this call in tokens (None: the client's).
        temperature: this call's sampling temperature (None: the client's).
        seed: this call's sampling seed, sent to the provider as ``seed`` (OpenAI's
            parameter; llama-cpp-python's server honours it, providers without seeds
            ignore it); None: the client's default (a fixed seed when ``temperature`` is
            given, else none).  Candidate runs give each candidate its own
            (:mod:`rlm_kernel.engine.strategies.candidates`).
        depth: the recursion depth of the run that makes the call (0: a top-level run,
            n: an ``rlm_query`` child n levels down), recorded on the call and its span;
            None: the client's own ``depth``.  The engine sends it for a child's calls,
            which go through the same clients as its parent's.

    A new option is a field here (default None: "the client's own") and code in the
    client that sends it; clients that cannot use an option (scripted models) accept
    and ignore it.

    Raises (on construction):
        TypeError: an option of another name.
    """

    role: str = "root"
    stop: list[str] | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None
    depth: int | None = None

    def call_depth(self, client_depth: int | None) -> int:
        """The depth to record: :attr:`depth` when given, else the client's (0 when it
        has none)."""
        return self.depth if self.depth is not None else int(client_depth or 0)

    def keywords(self) -> dict[str, Any]:
        """The options as ``complete`` keywords for the next client: ``role``, ``stop``,
        ``max_tokens`` and ``temperature`` always; an option added after them only when
        set (not None), so clients written before it keep working."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name in _ALWAYS_SENT or getattr(self, f.name) is not None}


#: The options every client has taken since the first protocol; see :meth:`CallOptions.keywords`.
_ALWAYS_SENT = frozenset({"role", "stop", "max_tokens", "temperature"})


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
        depth: the recursion depth recorded on calls that do not give one (0: a
            top-level run); a child run's calls give theirs (:attr:`CallOptions.depth`).
    """

    model: str
    ledger: UsageLedger | None
    depth: int

    @property
    def max_tokens(self) -> int | None:
        """The client's default completion cap in tokens, or None (the provider's)."""
        ...

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

    def complete(self, messages: list[Message], **options: Any) -> Completion:
        """Return the reply to ``messages`` (OpenAI chat format).

        Args:
            messages: the chat so far.
            **options: this call's options, by keyword: the fields of
                :class:`CallOptions` (``role``, ``stop``, ``max_tokens``,
                ``temperature``, ``seed``), each defaulting to the client's own.  A
                client reads them with ``CallOptions(**options)``.

        Raises:
            LLMError: the provider failed after retries, the model is unknown or
                a key is missing.
            TypeError: an option :class:`CallOptions` does not have.
        """
        ...


class ClientWrapper:
    """A :class:`LanguageModel` over another one: the wrapped client's facts and hooks
    (``model``, ``max_tokens``, ``context_window``, ``ledger``, ``depth``, ``check``)
    passed through explicitly; subclasses override :meth:`call` only (the budget
    guard, a candidate's sampling), which gets the call's :class:`CallOptions`.

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

    def complete(self, messages: list[Message], **options: Any) -> Completion:
        """This wrapper's call (:meth:`call`) with ``options`` read into a
        :class:`CallOptions`; see :meth:`LanguageModel.complete`.

        Raises:
            LLMError: the call failed.
            TypeError: an option :class:`CallOptions` does not have.
        """
        return self.call(messages, CallOptions(**options))

    def call(self, messages: list[Message], options: CallOptions) -> Completion:
        """The one hook a wrapper overrides: here, the wrapped client's call with
        ``options`` as keywords (:meth:`CallOptions.keywords`).  An override changes
        what it must (``dataclasses.replace(options, max_tokens=...)``) and passes the
        rest on unnamed.

        A client whose ``complete`` names its keywords and not ``depth`` (one written
        before that option) is not sent it: the call's record gets the depth here, after
        the call (the client's :class:`LLMCall` is the object its ledger keeps).

        Raises:
            LLMError: the call failed.
        """
        keywords = options.keywords()
        if "depth" in keywords and not takes_option(self._client, "depth"):
            depth = keywords.pop("depth")
            completion = self._client.complete(messages, **keywords)
            record = getattr(completion, "call", None)
            if record is not None and hasattr(record, "depth"):
                record.depth = depth
            return completion
        return self._client.complete(messages, **keywords)


def takes_option(client: Any, name: str) -> bool:
    """Whether ``client.complete`` takes the keyword ``name``: a parameter of that name,
    or ``**options`` (:func:`inspect.signature`; True when it cannot be read)."""
    try:
        parameters = inspect.signature(client.complete).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind is inspect.Parameter.VAR_KEYWORD or p.name == name
               for p in parameters)
