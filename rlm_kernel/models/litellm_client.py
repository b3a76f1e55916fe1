"""LLM calls through litellm: lazy import, retries, usage and cost accounting.

Every call the engine makes (root model steps and ``llm_query`` sub-calls) goes
through :class:`LiteLLMClient`, which records one :class:`LLMCall` per request in
a shared :class:`UsageLedger`.  litellm is imported on the first call, never at
import time of this module, and with its price map read from the installed
package (``LITELLM_LOCAL_MODEL_COST_MAP``) so that nothing touches the network.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from ..redaction import Redactor, remember_settings
from .base import CallOptions, LanguageModel, LLMError, Message
from .usage import Completion, LLMCall, UsageLedger

log = logging.getLogger(__name__)

__all__ = [
    "LLMError",
    "LLMCall",
    "Completion",
    "UsageLedger",
    "LanguageModel",
    "LiteLLMClient",
    "import_litellm",
]

_litellm_lock = threading.Lock()
_litellm: Any = None


SAMPLING_SEED = 1234  # seed sent with calls that override the temperature


def import_litellm() -> Any:
    """Import litellm once, offline and quietly.

    Returns:
        The ``litellm`` module.

    Sets ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (unless the user set it) so litellm
    reads the cost map bundled with the package instead of downloading one, turns
    off litellm's debug banners, which are printed to stdout otherwise, and its
    logging of each piece of a streamed reply (``disable_streaming_logging``): a job
    per piece on litellm's thread pool, each running ``asyncio.run``: a fraction of a ms of
    CPU a token that no part of rlm-kernel reads.  A streamed reply is still logged
    once whole, to the callbacks and to litellm's cache, when its stream ends
    (litellm's ``CustomStreamWrapper``; tests/models/test_streaming.py checks both).
    """
    global _litellm
    if _litellm is None:
        with _litellm_lock:
            if _litellm is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                import litellm

                litellm.suppress_debug_info = True
                litellm.drop_params = True  # providers reject params they lack
                litellm.disable_streaming_logging = True  # per piece; see above
                _litellm = litellm
    return _litellm


def _exception_line(exc: BaseException, limit: int = 300) -> str:
    """``str(exc)`` on one line, at most ``limit`` characters, without litellm's
    module prefix, its repeated class name ("X: X: ...") or its provider-list URL;
    secrets redacted before the cut (a cut inside a key would leave its start)."""
    text = Redactor()(" ".join(str(exc).split()))
    for junk in ("litellm.", "Provider List: https://docs.litellm.ai/docs/providers"):
        text = text.replace(junk, "")
    head, sep, rest = text.partition(": ")
    if sep and rest.startswith(head + ":"):  # "AuthenticationError: AuthenticationError: ..."
        text = rest
    return text[:limit].strip()


class LiteLLMClient:
    """A :class:`LanguageModel` backed by ``litellm.completion``.

    Args:
        model: litellm model string, e.g. ``"openai/gpt-4.1-mini"``.
        api_base: optional server URL (OpenAI-compatible servers, the local model);
            a password in it (``http://user:PASSWORD@host/v1``) becomes one of the
            process's secrets.
        api_key: optional key; otherwise litellm reads the provider's variable.  It
            becomes one of the process's secrets (:mod:`rlm_kernel.redaction`), as do
            the credential-like keys of ``extra``: redacted wherever text leaves a run.
        temperature: sampling temperature (0 for reproducible runs).
        num_retries: retries on transient errors (rate limit, timeout, 5xx,
            connection); litellm applies exponential backoff between them.
        timeout: seconds before one request is abandoned.
        max_tokens: default completion cap in tokens (None = provider default).
        priced: False for models that cost nothing (skips the cost lookup).
        extra: further keyword arguments passed to ``litellm.completion``.
        cache: answer sub-calls (``role="sub"``) from litellm's cache when the same
            request was made before (see :mod:`rlm_kernel.models.cache`).
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        num_retries: int = 3,
        timeout: float = 600.0,
        max_tokens: int | None = None,
        priced: bool = True,
        extra: dict[str, Any] | None = None,
        cache: bool = False,
    ) -> None:
        self.model = model
        self.cache = cache
        self.api_base = api_base
        self.api_key = api_key
        self.temperature = temperature
        self.num_retries = num_retries
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.priced = priced
        self.extra = dict(extra or {})
        remember_settings({"api_key": api_key, "api_base": api_base, **self.extra})
        self.depth = 0
        self.ledger: UsageLedger | None = None
        self._context_window: int | None | bool = False  # False: not looked up yet
        self.whole_replies = False  # the server sends no stream: replies are asked whole

    @property
    def context_window(self) -> int | None:
        """The model's input limit in tokens from litellm's model map, or None."""
        if self._context_window is False:
            try:
                info = import_litellm().get_model_info(self.model)
                self._context_window = int(info.get("max_input_tokens") or 0) or None
            except Exception:  # unmapped model: litellm raises
                self._context_window = None
        return self._context_window

    def check(self) -> None:
        """Fail fast, before a run starts, on an unknown model or a missing key.

        Raises:
            LLMError: litellm cannot tell the provider of ``model``, or the
                provider's API key variable is not set and no ``api_key`` was given.
        """
        litellm = import_litellm()
        try:
            _, provider, _, _ = litellm.get_llm_provider(self.model, api_base=self.api_base)
        except Exception as exc:  # litellm raises BadRequestError here
            raise LLMError(
                f"unknown model {self.model!r}: litellm cannot tell which provider serves it "
                "(use a provider prefix such as 'openai/...', 'anthropic/...', 'ollama/...')"
            ) from exc
        if self.api_key or self.api_base:
            return
        env = litellm.validate_environment(self.model)
        missing = [k for k in env.get("missing_keys", []) if k.endswith(("_KEY", "_TOKEN"))]
        if missing:
            raise LLMError(
                f"model {self.model!r} ({provider}) needs {', '.join(missing)} "
                "in the environment, or pass an api_key"
            )

    def complete(self, messages: list[Message], **options: Any) -> Completion:
        """Send ``messages`` and return the reply; ``options`` are the call's
        :class:`~rlm_kernel.models.CallOptions` (see :class:`LanguageModel`; ``seed``
        goes to litellm as ``seed``).  A new option is sent from
        :meth:`_request_kwargs`.

        Transient failures are retried twice over: by the provider SDK and by
        litellm's own layer (``tenacity``, a declared dependency).

        Raises:
            LLMError: the call failed after retries; its one line names the real
                cause: the HTTP status and the provider's message, a refused or reset
                connection to ``api_base``, or no answer within ``timeout`` seconds.
            TypeError: an option :class:`~rlm_kernel.models.CallOptions` does not have.
        """
        opts = CallOptions(**options)
        litellm = import_litellm()
        kwargs = self._request_kwargs(opts)
        if self.cache and opts.role == "sub":  # sub-calls only: never the root model's turns
            kwargs["cache"] = {"use-cache": True}
        depth, stream = opts.call_depth(self.depth), opts.stream
        if stream is None or self.whole_replies:
            completion = self._send(litellm, messages, opts.role, kwargs, depth)
            if stream is not None and completion.text:
                stream(completion.text)  # one piece: the whole reply
            return completion
        completion = self._send(litellm, messages, opts.role, kwargs, depth, stream)
        if completion.text:
            return completion
        # An empty streamed reply: a server that ignores ``stream`` answers with one JSON
        # body, which litellm reads as a stream of nothing.  Asked again whole, once:
        # a reply there means the server does not stream (every later call is asked whole).
        whole = self._send(litellm, messages, opts.role, kwargs, depth)
        if whole.text:
            self.whole_replies = True
            log.warning("%s: the server at %s sent no stream, only whole replies: its "
                        "replies are asked whole from now on (not shown as they are "
                        "written; a stop waits for the reply)", self.model,
                        self.api_base or "the provider")
            stream(whole.text)
        return whole

    def _send(self, litellm: Any, messages: list[Message], role: str,
              kwargs: dict[str, Any], depth: int = 0,
              stream: Callable[[str], None] | None = None) -> Completion:
        """One ``litellm.completion`` request, counted in an :class:`LLMCall`; with
        ``stream``, a streamed one (:meth:`read_stream`).

        Raises:
            LLMError: the request failed (after retries), or its stream broke.
            BaseException: what ``stream`` raised (a stop), after the request was closed.
        """
        start = time.perf_counter()
        call = LLMCall(model=self.model, role=role, depth=depth)
        if stream is not None:
            kwargs = {**kwargs, "stream": True, "stream_options": {"include_usage": True}}
        try:
            response = self._request(litellm, messages, kwargs)
            self._note_response(call, response)
            if stream is not None:
                response = self.read_stream(litellm, response, messages, stream, call, start)
        except Exception as exc:
            self._failed(call, start, exc)
        call.seconds = time.perf_counter() - start
        self._count_usage(call, response)
        self._record(call)
        text = response.choices[0].message.content or ""
        return Completion(text=text, call=call)

    def _request(self, litellm: Any, messages: list[Message], kwargs: dict[str, Any]) -> Any:
        """Send the request: ``litellm.completion`` with the client's retries and
        timeout (a subclass sends it elsewhere: the Router's fleet)."""
        return litellm.completion(model=self.model, messages=messages,
                                  num_retries=self.num_retries, timeout=self.timeout, **kwargs)

    def _note_response(self, call: LLMCall, response: Any) -> None:
        """Note on ``call`` what the response says before it is read (nothing here;
        the Router notes the deployment that answered)."""

    def _failed(self, call: LLMCall, start: float, exc: Exception) -> None:
        """Record ``call`` as failed with ``exc``'s cause and raise it as an LLMError.

        Raises:
            LLMError: always; its line names the cause (:func:`_describe`).
        """
        call.seconds = time.perf_counter() - start
        call.error = _describe(exc, self.api_base, self.timeout)
        log.warning("%s (%s call) failed: %s", self.model, call.role, call.error)
        log.debug("litellm's exception", exc_info=True)  # the chain, for a maintainer
        self._record(call)
        raise LLMError(f"{self.model}: {call.error}") from exc

    def read_stream(self, litellm: Any, response: Any, messages: list[Message],
                     stream: Callable[[str], None], call: LLMCall, start: float) -> Any:
        """Read a streamed reply, handing each piece of text to ``stream``; returns the
        reply as one response (litellm's ``stream_chunk_builder``: the text joined, the
        usage the provider sent in its last chunk, else litellm's count).

        When ``stream`` raises (a stop: ``KeyboardInterrupt``; a spent budget) the
        request is closed at once, which closes its connection: a server that streams
        stops generating when its client is gone (llama-cpp-python's checks after each
        token).  The call is recorded with what was written (``call.error`` says it was
        cut) and the exception raised again.

        Raises:
            BaseException: what ``stream`` raised.
            Exception: the stream broke (turned into an LLMError by the caller).
        """
        chunks: list[Any] = []
        written = 0
        try:
            for chunk in response:
                chunks.append(chunk)
                choices = getattr(chunk, "choices", None) or []
                piece = getattr(getattr(choices[0], "delta", None), "content", None) \
                    if choices else None
                if piece:
                    written += len(piece)
                    stream(piece)
        except BaseException as exc:
            _close_stream(response)
            if isinstance(exc, Exception):  # the stream broke: the caller says how
                raise
            call.seconds = time.perf_counter() - start
            call.completion_tokens = sum(1 for c in chunks if getattr(c, "choices", None))
            call.error = f"the reply was cut after {written} characters ({type(exc).__name__})"
            self._record(call)
            raise
        hidden = getattr(response, "_hidden_params", None) or {}
        call.cached = bool(hidden.get("cache_hit"))  # the stream, not the reply built from it
        return litellm.stream_chunk_builder(chunks, messages=messages)

    def _request_kwargs(self, options: CallOptions) -> dict[str, Any]:
        """litellm ``completion`` arguments besides the model and messages, from the
        client's settings and this call's ``options``: ``seed`` when given, else
        :data:`SAMPLING_SEED` when ``temperature`` overrides the client's."""
        stop, max_tokens = options.stop, options.max_tokens
        temperature, seed = options.temperature, options.seed
        kwargs: dict[str, Any] = dict(self.extra)
        kwargs["temperature"] = self.temperature if temperature is None else temperature
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        if stop:
            kwargs["stop"] = stop
        cap = max_tokens if max_tokens is not None else self.max_tokens
        if cap:
            kwargs["max_tokens"] = cap
        if seed is not None or temperature is not None:  # a provider without seeds ignores it
            kwargs.update(seed=SAMPLING_SEED if seed is None else seed, drop_params=True)
        return kwargs

    def _count_usage(self, call: LLMCall, response: Any) -> None:
        """Tokens from the response's ``usage``; cost (USD) from litellm's price map
        (0 for an unpriced model, and for a reply from the cache)."""
        usage = getattr(response, "usage", None)
        call.prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        call.completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        hidden = getattr(response, "_hidden_params", None) or {}
        call.cached = call.cached or bool(hidden.get("cache_hit"))
        if self.priced and not call.cached:
            try:
                call.cost_usd = float(import_litellm().completion_cost(
                    completion_response=response))
            except Exception:  # unpriced model: litellm raises, cost stays 0
                call.cost_usd = 0.0

    def _record(self, call: LLMCall) -> None:
        if self.ledger is not None:
            self.ledger.record(call)


def _close_stream(response: Any) -> None:
    """Close a streamed response (litellm's ``CustomStreamWrapper`` over the provider
    SDK's stream) and with it its HTTP connection; best effort."""
    for target in (getattr(response, "completion_stream", None), response):
        close = getattr(target, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # noqa: BLE001 - closing what may be closed already
                log.debug("closing a stream failed", exc_info=True)


_HINTS = {  # litellm exception class -> what it usually means for the user
    "AuthenticationError": "the API key was refused or is missing",
    "PermissionDeniedError": "the API key may not use this model",
    "NotFoundError": "the provider does not know this model (or the URL is wrong)",
    "BadRequestError": "the request was rejected",
    "RateLimitError": "rate limited (gave up after retries)",
    "ContextWindowExceededError": "the prompt is longer than the model's context window",
    "ServiceUnavailableError": "the provider is unavailable",
    "InternalServerError": "the provider failed",
}
_BY_STATUS = {401: "AuthenticationError", 403: "PermissionDeniedError", 404: "NotFoundError",
              400: "BadRequestError", 429: "RateLimitError", 503: "ServiceUnavailableError"}
_TIMEOUTS = {"Timeout", "APITimeoutError", "TimeoutException", "TimeoutError", "ReadTimeout",
             "ConnectTimeout", "WriteTimeout", "PoolTimeout"}
_CONNECTION = {"APIConnectionError", "ConnectError", "RemoteProtocolError"}


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes (``__cause__``, else ``__context__``), outermost first,
    without the ``tenacity`` import failure litellm raises over the real error when
    tenacity is missing."""
    out: list[BaseException] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen and len(out) < 30:
        seen.add(id(cur))
        if not (getattr(cur, "name", None) == "tenacity" or "tenacity import failed" in str(cur)):
            out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out or [exc]


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _http_status(chain: list[BaseException]) -> int | None:
    """The HTTP status of the provider's reply: the innermost exception holding a
    response (the HTTP client's or SDK's own), else litellm's ``status_code``."""
    for exc in reversed(chain):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if isinstance(status, int) and status >= 400 and type(exc).__module__.split(".")[0] in (
                "openai", "httpx", "anthropic"):
            return status
    status = getattr(chain[0], "status_code", None)
    return status if isinstance(status, int) and status >= 400 else None


def _describe(exc: BaseException, api_base: str | None = None,
              timeout: float | None = None) -> str:
    """Turn a litellm exception into one line naming its real cause, every secret the
    process knows redacted (a provider's error often quotes the key it was sent:
    :mod:`rlm_kernel.redaction`).

    litellm files a refused connection under ``InternalServerError`` and, without
    ``tenacity``, hides any error behind "tenacity import failed"; so this walks the
    exception's causes down to the transport's own error (``ConnectionRefusedError``,
    ``httpx.ReadTimeout``) and the HTTP status of the provider's reply.

    Args:
        exc: the exception ``litellm.completion`` raised.
        api_base: the server URL the request went to, if one was set (for the message).
        timeout: the request timeout in seconds (for the message).
    """
    return Redactor()(_cause(exc, api_base, timeout))


def _cause(exc: BaseException, api_base: str | None, timeout: float | None) -> str:
    """:func:`_describe`'s line, before redaction."""
    chain = _chain(exc)
    names = set().union(*(_names(e) for e in chain))
    detail = _exception_line(chain[0], 200)
    where = f" at {api_base}" if api_base else ""
    if names & _TIMEOUTS:
        within = f" within {timeout:g} s" if timeout else ""
        return f"the request timed out: no answer{within}{where} ({detail})"
    os_error = next((e for e in reversed(chain) if isinstance(e, (ConnectionError, socket.gaierror))
                     or (isinstance(e, OSError) and names & _CONNECTION)), None)
    if os_error is not None or names & _CONNECTION:
        root = _exception_line(os_error, 200) if os_error is not None else detail
        if isinstance(os_error, ConnectionRefusedError):
            cause = "connection refused, is the server running?"
        elif isinstance(os_error, ConnectionResetError):
            cause = "connection reset by the server"
        else:
            cause = "connection failed"
        return f"cannot reach the model server{where}: {cause} ({root})"
    status = _http_status(chain)
    kind = next((n for n in _HINTS if n in names), None)
    if kind is None and status is not None:
        kind = _BY_STATUS.get(status, "InternalServerError" if status >= 500 else None)
    hint = _HINTS.get(kind, type(chain[0]).__name__) if kind else type(chain[0]).__name__
    prefix = f"HTTP {status}: " if status else ""
    return f"{prefix}{hint} ({detail})"
