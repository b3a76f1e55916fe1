"""The one factory of scripted runs: an :class:`~rlm_kernel.RLM` whose root and sub
model is a :class:`~rlm_kernel.models.scripted.ScriptedModel`, for tests of the loop's
mechanics (which step runs, what is recorded, when the run stops), never of answers.

Its settings are :class:`~rlm_kernel.RLMConfig`'s defaults except those in
:data:`SCRIPTED_SETTINGS`, chosen so that a scripted ``FINAL`` ends the run at once (no
check step takes the next scripted reply) and the scripted model is always called at
the run's own temperature.  A test whose subject is one of these mechanisms (grounding,
the answer check, the temperature of a resampled step) turns it on explicitly, e.g.
``scripted_rlm(replies, ground_answer=True)``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlm_kernel import RLM
from rlm_kernel.models.scripted import ScriptedModel

SCRIPTED_SETTINGS: dict[str, Any] = {
    # RLMConfig: True.  A scripted FINAL of a value no step printed would be sent back
    # once for a check step, which takes the next scripted reply.
    "ground_answer": False,
    # RLMConfig: 0.7, the temperature of the step sampled again after a repetition.
    # 0: the run's own, so a scripted model's calls carry no temperature of their own
    # (a reply that repeats an earlier step is still shown and sampled again).
    "resample_temperature": 0.0,
    # RLMConfig: False too; set here so a test reads that no answer check runs.
    "verify_answer": False,
}
"""The settings where a scripted run differs from (or pins) ``RLMConfig``'s defaults."""


def scripted_rlm(replies: Sequence[str], sub_replies: Sequence[str] | None = None, *,
                 events: list[Any] | None = None, model: str | None = None,
                 cost_usd: float = 0.0, **settings: Any) -> tuple[RLM, ScriptedModel]:
    """An RLM over one scripted model (root and sub-calls).

    Args:
        replies: the root model's replies, in order (see :func:`tests.replies.block`).
        sub_replies: the sub-calls' replies (``llm_query``), or None for the root's list.
        events: a list that receives every event of the runs (its ``append`` is the
            RLM's observer), or None for no observer.
        model: the RLM's model name (e.g. ``"scripted/root"`` for an export's metadata),
            or None for the default.
        cost_usd: what the scripted model reports each call costs, in USD.
        **settings: ``RLMConfig`` fields; they override :data:`SCRIPTED_SETTINGS`.

    Returns:
        ``(rlm, lm)``: the RLM and its scripted model (``lm.calls`` holds the messages
        of each call).
    """
    lm = ScriptedModel(replies, sub_replies=sub_replies, cost_usd=cost_usd)
    observer = None if events is None else events.append
    return RLM(model, root_client=lm, sub_client=lm, observer=observer,
               **{**SCRIPTED_SETTINGS, **settings}), lm
