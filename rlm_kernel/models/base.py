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
from collections.abc import Callable
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
        stream: ``callable(text)`` called with each piece of the reply, in order, as
            the model writes it (a piece of a streamed reply: one token for llama.cpp's
            server and OpenAI's); the pieces joined are the reply the call returns.
            None: the reply comes whole.  A client that cannot stream calls it once with
            the whole reply (:meth:`ClientWrapper.call` does for a client whose
            ``complete`` does not take it).  An exception it raises (a stop, a spent time
            budget) ends the request: the client closes it, so the server stops
            generating, and re-raises it.

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
    stream: Callable[[str], None] | None = None

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
#: Options a client written before them may not take (:meth:`ClientWrapper.call`).
_LATER_OPTIONS = ("depth", "stream")


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
                ``temperature``, ``seed``, ``depth``, ``stream``), each defaulting to the client's own.  A
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

        A client whose ``complete`` names its keywords (one written before an option)
        is not sent those it lacks: the call's record gets the ``depth`` here, after the
        call (the client's :class:`LLMCall` is the object its ledger keeps), and
        ``stream`` is called once with the whole reply.

        Raises:
            LLMError: the call failed.
        """
        keywords = options.keywords()
        lacks = [name for name in _LATER_OPTIONS
                 if name in keywords and not takes_option(self._client, name)]
        for name in lacks:
            del keywords[name]
        completion = self._client.complete(messages, **keywords)
        if "depth" in lacks:
            record = getattr(completion, "call", None)
            if record is not None and hasattr(record, "depth"):
                record.depth = options.depth
        if "stream" in lacks and options.stream is not None and completion.text:
            options.stream(completion.text)
        return completion


def takes_option(client: Any, name: str) -> bool:
    """Whether ``client.complete`` takes the keyword ``name``: a parameter of that name,
    or ``**options`` (:func:`inspect.signature`; True when it cannot be read).  Read once
    per client class (a ``complete`` set on the instance is read each time)."""
    if "complete" in getattr(client, "__dict__", {}):
        return _takes(client.complete, name)
    return _class_takes(type(client), name)


_TAKES: dict[tuple[type, str], bool] = {}


def _class_takes(cls: type, name: str) -> bool:
    """:func:`_takes` of ``cls.complete``, kept per class and option."""
    key = (cls, name)
    if key not in _TAKES:
        _TAKES[key] = _takes(getattr(cls, "complete", None), name)
    return _TAKES[key]


def _takes(complete: Any, name: str) -> bool:
    try:
        parameters = inspect.signature(complete).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind is inspect.Parameter.VAR_KEYWORD or p.name == name
               for p in parameters)
