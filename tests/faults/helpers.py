"""Shared pieces of the fault suite: scripted runs over the real executors.

:func:`scripted_run` gives its run the executor kind of :data:`EXECUTOR`, which the
suite's ``executor_kind`` fixture sets: every test of a module that uses
:func:`scripted_run` runs once in-process and once behind the process wall."""

from __future__ import annotations

from rlm_kernel import RLM
from rlm_kernel.models.scripted import ScriptedModel

EXECUTOR = "in-process"
"""The executor kind of the runs :func:`scripted_run` makes (``RLMConfig.executor``)."""

THOUGHT = "Trying something."
"""The reasoning line of the fault suite's replies (``block(code, THOUGHT)``)."""


def scripted_run(replies, sub_replies=None, **cfg) -> tuple[RLM, ScriptedModel]:
    """An RLM over a scripted model (both roles); no answer check, no grounding check,
    no resampling, so each scripted reply is exactly one step."""
    lm = ScriptedModel(replies, sub_replies=sub_replies)
    cfg.setdefault("verify_answer", False)
    cfg.setdefault("ground_answer", False)
    cfg.setdefault("resample_temperature", 0)
    cfg.setdefault("executor", EXECUTOR)
    return RLM(root_client=lm, sub_client=lm, **cfg), lm
