"""Model clients: the :class:`LanguageModel` protocol the engine calls, usage records,
the litellm client, the scripted stand-in for unit tests, and the embedded local
model (``local/``: weights assembled from part packages, a llama.cpp server).

The engine gets clients from :func:`make_client`; nothing here imports litellm or
llama.cpp until a call needs them.
"""

from __future__ import annotations

from . import tracing
from .base import ClientWrapper, LanguageModel, LLMError, Message
from .cache import configure_cache
from .factory import is_embedded, make_client
from .litellm_client import LiteLLMClient, import_litellm
from .local.server import ensure_server, find_running, stop_all_servers, stop_server
from .local.weights import LocalModelError, get_spec, is_prepared, prepare, weights_path
from .usage import Completion, LLMCall, UsageLedger

__all__ = ["ClientWrapper", "LanguageModel", "LiteLLMClient", "LLMError", "Message", "import_litellm",
           "is_embedded", "make_client", "Completion", "LLMCall", "UsageLedger",
           "configure_cache", "ensure_server", "find_running", "stop_all_servers", "stop_server",
           "LocalModelError", "get_spec", "is_prepared", "prepare", "weights_path", "tracing"]
