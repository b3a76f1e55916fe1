"""Shared pieces of the fault suite: scripted runs over the real executors.

:func:`scripted_run` gives its run the executor kind of :data:`EXECUTOR`, which the
suite's ``executor_kind`` fixture sets: every test of a module that uses
:func:`scripted_run` runs once in-process and once behind the process wall."""

from __future__ import annotations

from rlm_kernel import RLM
from rlm_kernel.models.scripted import ScriptedModel
from tests.scripted import scripted_rlm

EXECUTOR = "in-process"
"""The executor kind of the runs :func:`scripted_run` makes (``RLMConfig.executor``)."""

THOUGHT = "Trying something."
"""The reasoning line of the fault suite's replies (``block(code, THOUGHT)``)."""


def scripted_run(replies, sub_replies=None, **cfg) -> tuple[RLM, ScriptedModel]:
    """:func:`tests.scripted.scripted_rlm` (no answer or grounding check, the run's own
    temperature throughout) with the executor kind of :data:`EXECUTOR` unless ``cfg``
    names one."""
    cfg.setdefault("executor", EXECUTOR)
    return scripted_rlm(replies, sub_replies, **cfg)
