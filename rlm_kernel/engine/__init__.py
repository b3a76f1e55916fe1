"""The RLM loop, with nothing of Jupyter in it.

``loop`` (:class:`RLM`: clients, budget, the run), ``run`` (:class:`~.run.Run`: one
run, a step top to bottom: prompt, root-model reply, code, history, termination),
``step`` (a reply's parts and the step record), ``answer`` (an answer's one guarded
text), ``grounding`` (whether a ``FINAL``'s value came from the data), ``tools`` (what model code calls: ``llm_query``, ``FINAL``, the context
helpers), ``prompts``, ``config`` (:class:`RLMConfig`, the one source of settings),
``budget`` (limits held by the host), ``events`` (what observers see), ``result``
(:class:`RLMResult`), ``recording`` (replay), ``resume`` (continuing a run),
``children`` (``rlm_query``'s child runs), ``candidates`` (N trajectories of one task
and a vote: ``RLMConfig.candidates``), ``vote`` (answers normalised, the vote) and
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
