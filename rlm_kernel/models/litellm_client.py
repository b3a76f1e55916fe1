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
from typing import Any, Protocol

from .usage import Completion, LLMCall, UsageLedger

__all__ = [
    "LLMError",
    "LLMCall",
    "Completion",
    "UsageLedger",
    "LanguageModel",
    "LiteLLMClient",
    "import_litellm",
]

Message = dict[str, str]

_litellm_lock = threading.Lock()
_litellm: Any = None


SAMPLING_SEED = 1234  # seed sent with calls that override the temperature


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
        temperature: float | None = None,
    ) -> Completion:
        """Return the reply to ``messages`` (OpenAI chat format); ``temperature``
        overrides the client's own for this call (with a fixed ``seed``, so a rerun
        samples the same reply where the provider supports seeds).

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
        temperature: float | None = None,
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
        if temperature is not None:  # a provider without seeds ignores it
            kwargs.update(seed=SAMPLING_SEED, drop_params=True)
        start = time.perf_counter()
        call = LLMCall(model=self.model, role=role, depth=self.depth)
        try:
            response = litellm.completion(
                model=self.model,
                messages=messages,
                temperature=self.temperature if temperature is None else temperature,
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
