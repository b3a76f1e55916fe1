"""Which client a model string means: the embedded model or a litellm provider.

The one place that picks a backend; backends are imported when first asked for."""

from __future__ import annotations

from typing import Any

from .base import LanguageModel

__all__ = ["is_embedded", "make_client", "model_label"]


def is_embedded(model: str | None) -> bool:
    """Whether ``model`` selects the embedded model: ``None``, ``""``, ``"local"`` or
    ``"local/<name>"``."""
    return not model or model == "local" or model.startswith("local/")


def model_label(model: str | None) -> str:
    """The name a user reads for a model string: the embedded model is named as local
    (``local model qwen2.5-coder-1.5b (embedded, no network)``), never as the
    ``openai/<name>`` string its client speaks to the local server with; any other
    model string is shown as it is.

    A model string ``openai/<name>`` is read as the embedded model when ``<name>`` is one
    of the embedded models (:data:`rlm_kernel.models.local.weights.MODELS`): that is the
    string a run of the embedded model records (``LocalModelClient``).

    Args:
        model (str | None): a model string as a run records it (``RLMResult.model``).
    """
    if is_embedded(model):
        name = model.split("/", 1)[1] if model and "/" in model else "default"
        return f"local model {name} (embedded, no network)"
    from .local.weights import MODELS

    assert model is not None  # is_embedded(None) is True
    provider, _, name = model.partition("/")
    if provider == "openai" and name in MODELS:
        return f"local model {name} (embedded, no network)"
    return model


def make_client(model: str | None, router: Any = None, *, keep_alive: float | None = None,
                **kwargs: Any) -> LanguageModel:
    """Build the client for a model string.

    With a ``router`` (a model fleet), a ``model`` that is one of its ``model_name``
    values gets a :class:`~rlm_kernel.models.router.RouterClient` sending through the
    fleet's one litellm Router.  Otherwise ``None``, ``""``, ``"local"`` or
    ``"local/<name>"`` select the embedded model (``RLM_MODEL`` is read by the callers,
    not here), and anything else is a litellm model string.

    Args:
        model: the model string, or a model_name of the fleet.
        router: None, or the fleet: a fleet file's path, its parsed dict, or a
            :class:`~rlm_kernel.models.router.Fleet` (see
            :func:`~rlm_kernel.models.router.load_fleet`).
        keep_alive: the embedded model only: seconds a server its client starts stays
            up after its last request (see
            :func:`~rlm_kernel.models.local.server.ensure_server`); None: the default.
        **kwargs: client settings (``temperature``, ``max_tokens``, ``cache`` ...),
            passed to :class:`LiteLLMClient` (the embedded model's client is one);
            ``cache=True`` lets the client's sub-calls use litellm's cache.

    Raises:
        LocalModelError: ``local/<name>`` names no embedded model.
        LLMError: the fleet cannot be read, or ``model`` is neither one of its
            model_names nor a provider's model string (``provider/name``) nor the
            embedded model (the message lists the fleet's model_names).
    """
    if router is not None:
        from .router import RouterClient, load_fleet

        fleet = load_fleet(router)
        if model in fleet.model_names:
            return RouterClient(model, fleet, **kwargs)
        if model and not is_embedded(model) and "/" not in model:
            raise fleet.unknown(model)
    if model is None or is_embedded(model):
        from .local.server import LocalModelClient
        from .local.weights import get_spec

        name = model.split("/", 1)[1] if model and "/" in model else None
        return LocalModelClient(get_spec(name).name, keep_alive=keep_alive, **kwargs)
    from .litellm_client import LiteLLMClient

    return LiteLLMClient(model, **kwargs)
