"""Shared pieces of the fault suite: scripted runs over the real plain executor."""

from __future__ import annotations

from rlm_kernel import RLM
from rlm_kernel.models.scripted import ScriptedModel

THOUGHT = "Trying something."
"""The reasoning line of the fault suite's replies (``block(code, THOUGHT)``)."""


def scripted_run(replies, sub_replies=None, **cfg) -> tuple[RLM, ScriptedModel]:
    """An RLM over a scripted model (both roles); no answer check, no grounding check,
    no resampling, so each scripted reply is exactly one step."""
    lm = ScriptedModel(replies, sub_replies=sub_replies)
    cfg.setdefault("verify_answer", False)
    cfg.setdefault("ground_answer", False)
    cfg.setdefault("resample_temperature", 0)
    return RLM(root_client=lm, sub_client=lm, **cfg), lm
