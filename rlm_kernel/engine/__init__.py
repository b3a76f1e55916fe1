"""The RLM loop, with nothing of Jupyter in it.

``loop`` (:class:`RLM`: prompt, root-model reply, code, history, termination),
``step`` (one reply's code run and its FINAL), ``tools`` (what model code calls:
``llm_query``, ``FINAL``, the context helpers), ``prompts``, ``config``
(:class:`RLMConfig`, the one source of settings), ``budget`` (limits held by the
host), ``events`` (what observers see), ``result`` (:class:`RLMResult`) and
``options`` (validated option values for the CLI and the magic).

The engine reaches a model only through :func:`rlm_kernel.models.make_client`
and the :class:`~rlm_kernel.models.LanguageModel` protocol, and code only through
an :class:`~rlm_kernel.executors.Executor`; importing it loads no Jupyter module
and no litellm.
"""

from __future__ import annotations

from .config import RLMConfig
from .events import Event, Observer
from .loop import RLM
from .result import RLMResult
from .resume import Continuation

__all__ = ["RLM", "RLMConfig", "RLMResult", "Continuation", "Event", "Observer"]
