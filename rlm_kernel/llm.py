"""LLM calls through litellm: lazy import, retries, usage and cost accounting.

Every call the engine makes (root model steps and ``llm_query`` sub-calls) goes
through :class:`LiteLLMClient`, which records one :class:`LLMCall` per request in
a shared :class:`UsageLedger`.  litellm is imported on the first call, never at
import time of this module, and with its price map read from the installed
package (``LITELLM_LOCAL_MODEL_COST_MAP``) so that nothing touches the network.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

__all__ = [
    "LLMError",
    "LLMCall",
    "Completion",
    "UsageLedger",
    "LanguageModel",
    "LiteLLMClient",
    "import_litellm",
    "LocalModelClient",
    "make_client",
]

Message = dict[str, str]

_litellm_lock = threading.Lock()
_litellm: Any = None


class LLMError(RuntimeError):
    """A model could not be called; ``str(err)`` is one readable line for the user."""


def import_litellm() -> Any:
    """Import litellm once, offline and quietly.

    Returns:
        The ``litellm`` module.

    Sets ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (unless the user set it) so litellm
    reads the cost map bundled with the package instead of downloading one, and
    turns off litellm's debug banners, which are printed to stdout otherwise.
    """
    global _litellm
    if _litellm is None:
        with _litellm_lock:
            if _litellm is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                import litellm

                litellm.suppress_debug_info = True
                litellm.drop_params = True  # providers reject params they lack
                _litellm = litellm
    return _litellm


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
    """

    model: str
    role: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    depth: int = 0
    error: str | None = None

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


class LanguageModel(Protocol):
    """What the engine needs from a model: one chat completion at a time."""

    model: str

    def complete(
        self,
        messages: list[Message],
        *,
        role: str = "root",
        stop: list[str] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Return the reply to ``messages`` (OpenAI chat format).

        Raises:
            LLMError: the provider failed after retries, the model is unknown or
                a key is missing.
        """
        ...


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    for junk in ("litellm.", "Provider List: https://docs.litellm.ai/docs/providers"):
        text = text.replace(junk, "")
    return text[:limit].strip()


class LiteLLMClient:
    """A :class:`LanguageModel` backed by ``litellm.completion``.

    Args:
        model: litellm model string, e.g. ``"openai/gpt-4.1-mini"``.
        api_base: optional server URL (OpenAI-compatible servers, the local model).
        api_key: optional key; otherwise litellm reads the provider's variable.
        temperature: sampling temperature (0 for reproducible runs).
        num_retries: retries on transient errors (rate limit, timeout, 5xx,
            connection); litellm applies exponential backoff between them.
        timeout: seconds before one request is abandoned.
        max_tokens: default completion cap in tokens (None = provider default).
        priced: False for models that cost nothing (skips the cost lookup).
        extra: further keyword arguments passed to ``litellm.completion``.
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
    ) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.temperature = temperature
        self.num_retries = num_retries
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.priced = priced
        self.extra = dict(extra or {})
        self.depth = 0
        self.ledger: UsageLedger | None = None
        self._context_window: int | None | bool = False  # False: not looked up yet

    @property
    def context_window(self) -> int | None:
        """The model's input limit in tokens from litellm's model map, or None."""
        if self._context_window is False:
            try:
                info = import_litellm().get_model_info(self.model)
                self._context_window = int(info.get("max_input_tokens") or 0) or None
            except Exception:  # unmapped model: litellm raises
                self._context_window = None
        return self._context_window  # type: ignore[return-value]

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

    def complete(
        self,
        messages: list[Message],
        *,
        role: str = "root",
        stop: list[str] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Send ``messages`` and return the reply; see :class:`LanguageModel`."""
        litellm = import_litellm()
        kwargs: dict[str, Any] = dict(self.extra)
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        if stop:
            kwargs["stop"] = stop
        cap = max_tokens if max_tokens is not None else self.max_tokens
        if cap:
            kwargs["max_tokens"] = cap
        start = time.perf_counter()
        call = LLMCall(model=self.model, role=role, depth=self.depth)
        try:
            response = litellm.completion(
                model=self.model,
                messages=messages,
                temperature=self.temperature,
                num_retries=self.num_retries,
                timeout=self.timeout,
                **kwargs,
            )
        except Exception as exc:
            call.seconds = time.perf_counter() - start
            call.error = _one_line(exc)
            self._record(call)
            raise LLMError(f"{self.model}: {_describe(exc)}") from exc
        call.seconds = time.perf_counter() - start
        usage = getattr(response, "usage", None)
        call.prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        call.completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        if self.priced:
            try:
                call.cost_usd = float(litellm.completion_cost(completion_response=response))
            except Exception:  # unpriced model: litellm raises, cost stays 0
                call.cost_usd = 0.0
        self._record(call)
        text = response.choices[0].message.content or ""
        return Completion(text=text, call=call)

    def _record(self, call: LLMCall) -> None:
        if self.ledger is not None:
            self.ledger.record(call)


def _describe(exc: BaseException) -> str:
    """Turn a litellm exception into one line naming the likely cause."""
    name = type(exc).__name__
    hints = {
        "AuthenticationError": "the API key was refused or is missing",
        "NotFoundError": "the provider does not know this model",
        "BadRequestError": "the request was rejected",
        "RateLimitError": "rate limited (gave up after retries)",
        "APIConnectionError": "cannot reach the model server",
        "Timeout": "the request timed out",
        "ContextWindowExceededError": "the prompt is longer than the model's context window",
        "ServiceUnavailableError": "the provider is unavailable",
        "InternalServerError": "the provider failed",
    }
    hint = hints.get(name, name)
    return f"{hint} ({_one_line(exc, 200)})"


class LocalModelClient(LiteLLMClient):
    """A :class:`LiteLLMClient` for the embedded model, served on 127.0.0.1.

    litellm talks to llama-cpp-python's OpenAI-compatible server as
    ``openai/<alias>``.  The server is started (or found) at the first request
    and looked up again before each one, so a server that died is restarted.

    Args:
        name: embedded model short name (see :data:`rlm_kernel.local_model.MODELS`).
        **kwargs: as for :class:`LiteLLMClient` (``api_base``/``api_key`` are set here).
    """

    def __init__(self, name: str, **kwargs: Any) -> None:
        kwargs.setdefault("num_retries", 1)
        super().__init__(f"openai/{name}", api_key="local", priced=False, **kwargs)
        self.local_name = name
        from .local_server import DEFAULT_N_CTX

        self._context_window = DEFAULT_N_CTX

    def check(self) -> None:
        """Nothing to check before the run: the server starts on first use."""

    def complete(self, messages: list[Message], **kwargs: Any) -> Completion:
        """Start or find the server, then send ``messages`` (see :class:`LanguageModel`).

        Raises:
            LLMError: the weights cannot be prepared, the server cannot start,
                or the request failed.
        """
        from .local_model import LocalModelError
        from .local_server import ensure_server

        try:
            self.api_base = ensure_server(self.local_name).api_base
        except LocalModelError as exc:
            raise LLMError(f"embedded model: {exc}") from exc
        return super().complete(messages, **kwargs)


def make_client(model: str | None, **kwargs: Any) -> LiteLLMClient:
    """Build the client for a model string.

    ``None``, ``""``, ``"local"`` or ``"local/<name>"`` select the embedded model
    (``RLM_MODEL`` is read by the callers, not here); anything else is a litellm
    model string.
    """
    if not model or model == "local":
        from .local_model import get_spec

        return LocalModelClient(get_spec(None).name, **kwargs)
    if model.startswith("local/"):
        from .local_model import get_spec

        return LocalModelClient(get_spec(model.split("/", 1)[1]).name, **kwargs)
    return LiteLLMClient(model, **kwargs)
