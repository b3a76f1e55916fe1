"""Moved to :mod:`rlm_kernel.models`; this name is kept for old imports."""

from __future__ import annotations

from .models import (
    Completion,
    LanguageModel,
    LiteLLMClient,
    LLMCall,
    LLMError,
    UsageLedger,
    import_litellm,
    make_client,
)

__all__ = ["Completion", "LanguageModel", "LiteLLMClient", "LLMCall", "LLMError",
           "UsageLedger", "import_litellm", "make_client"]
