"""Which client a model string means: the embedded model or a litellm provider.

The one place that picks a backend; backends are imported when first asked for."""

from __future__ import annotations

from typing import Any

from .base import LanguageModel

__all__ = ["is_embedded", "make_client"]


def is_embedded(model: str | None) -> bool:
    """Whether ``model`` selects the embedded model: ``None``, ``""``, ``"local"`` or
    ``"local/<name>"``."""
    return not model or model == "local" or model.startswith("local/")


def make_client(model: str | None, **kwargs: Any) -> LanguageModel:
    """Build the client for a model string.

    ``None``, ``""``, ``"local"`` or ``"local/<name>"`` select the embedded model
    (``RLM_MODEL`` is read by the callers, not here); anything else is a litellm
    model string.

    Args:
        model: the model string.
        **kwargs: client settings (``temperature``, ``max_tokens``, ``cache`` ...),
            passed to :class:`LiteLLMClient` (the embedded model's client is one);
            ``cache=True`` lets the client's sub-calls use litellm's cache.

    Raises:
        LocalModelError: ``local/<name>`` names no embedded model.
    """
    if is_embedded(model):
        from .local.server import LocalModelClient
        from .local.weights import get_spec

        name = model.split("/", 1)[1] if model and "/" in model else None
        return LocalModelClient(get_spec(name).name, **kwargs)
    from .litellm_client import LiteLLMClient

    return LiteLLMClient(model, **kwargs)
