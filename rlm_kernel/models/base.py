"""What the engine needs from a model, and nothing else: the :class:`LanguageModel`
protocol, the chat :data:`Message` shape and :class:`LLMError`.

Every backend (litellm, the embedded server, the scripted stand-in) implements the
protocol; the engine imports this module and :func:`~rlm_kernel.models.make_client`,
never a backend.  Shape after alexzhang13/rlm's ``clients/base_lm.py``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .usage import Completion

__all__ = ["LanguageModel", "LLMError", "Message"]

#: One chat message in OpenAI's format: ``{"role": "system"|"user"|"assistant", "content": str}``.
Message = dict[str, str]


class LLMError(RuntimeError):
    """A model could not be called; ``str(err)`` is one readable line for the user."""


@runtime_checkable
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
