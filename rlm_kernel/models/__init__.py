"""Model clients: the :class:`LanguageModel` protocol the engine calls, usage records,
the litellm client, the scripted stand-in for unit tests, and the embedded local
model (``local/``: weights assembled from part packages, a llama.cpp server), and
model fleets through litellm's Router (``router``).

The engine gets clients from :func:`make_client`; nothing here imports litellm or
llama.cpp until a call needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import tracing
from .base import CallOptions, ClientWrapper, LanguageModel, LLMError, Message
from .factory import is_embedded, make_client, model_label
from .litellm_client import LiteLLMClient, import_litellm
from .prices import TokenPrices, token_prices
from .usage import Completion, LLMCall, UsageLedger

if TYPE_CHECKING:  # pragma: no cover
    from .cache import configure_cache
    from .local.keep_alive import describe_status, read_status
    from .local.server import (
        ensure_server,
        find_running,
        running_replicas,
        start_replicas,
        stop_all_servers,
        stop_replicas,
        stop_running,
        stop_server,
    )
    from .local.weights import LocalModelError, get_spec, is_prepared, prepare, weights_path
    from .router import Fleet, RouterClient, fleet_yaml, load_fleet

__all__ = ["CallOptions", "ClientWrapper", "LanguageModel", "LiteLLMClient", "LLMError", "Message", "import_litellm",
           "is_embedded", "make_client", "model_label", "Completion", "LLMCall", "UsageLedger",
           "configure_cache", "ensure_server", "find_running", "stop_all_servers", "stop_server",
           "stop_running", "LocalModelError", "get_spec", "is_prepared", "prepare", "weights_path", "tracing",
           "Fleet", "RouterClient", "fleet_yaml", "load_fleet", "running_replicas",
           "start_replicas", "stop_replicas", "TokenPrices", "token_prices", "describe_status",
           "read_status"]

# Names whose modules load on first use: the embedded model's server and weights, and
# the sub-call cache, are not needed by every process that imports this package (the
# isolated worker imports it, and would pay about 45 ms at each start).
_LAZY = {"configure_cache": "cache", "ensure_server": "local.server",
         "find_running": "local.server", "stop_all_servers": "local.server",
         "stop_server": "local.server", "stop_running": "local.server",
         "describe_status": "local.keep_alive", "read_status": "local.keep_alive",
         "LocalModelError": "local.weights",
         "get_spec": "local.weights", "is_prepared": "local.weights",
         "prepare": "local.weights", "weights_path": "local.weights",
         "Fleet": "router", "RouterClient": "router", "fleet_yaml": "router",
         "load_fleet": "router", "running_replicas": "local.server",
         "start_replicas": "local.server", "stop_replicas": "local.server"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
