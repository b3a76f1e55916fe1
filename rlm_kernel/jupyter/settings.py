"""The run settings as traitlets: the ``c.RLM`` config section (class :class:`RLM`, also
:data:`RLMSettings`; not the engine's ``RLM``), its traits made from
:func:`rlm_kernel.engine.config.settings` (so help, defaults and bounds are
:class:`~rlm_kernel.engine.config.RLMConfig`'s own, and ``None`` means "no limit").

    c.RLM.max_llm_calls = 50          # in ipython_kernel_config.py / rlm_kernel_config.py
    %config RLM.step_timeout = 30     # in a session
    %config RLM                       # every option, its help and current value
"""

from __future__ import annotations

import os
from typing import Any

from traitlets import (
    Bool,
    Dict,
    Float,
    Int,
    List,
    TraitError,
    TraitType,
    Unicode,
    default,
    link,
    validate,
)
from traitlets.config import Configurable

from ..engine import RLMConfig, Setting
from ..engine.frontends import settings

__all__ = ["RLMSettings", "config_traits", "register_section"]

_TRAITS: dict[str, type[TraitType]] = {"int": Int, "float": Float, "bool": Bool,
                                       "str": Unicode, "dict": Dict}


_BY_NAME = {s.name: s for s in settings()}


def _setting_trait(name: str) -> TraitType:
    """The configurable trait of the run setting ``name``: its default, ``None``
    allowed when optional, its help with its bound.

    Raises:
        KeyError: no setting of :class:`RLMConfig` has that name."""
    s = _BY_NAME[name]
    help_text = s.help if s.low is None else f"{s.help} Must be {s.bound()}."
    if s.kind == "list":  # a text is taken as one item (traitlets' List); the engine
        # splits each item at commas and spaces
        return List(Unicode(), default_value=list(s.default), allow_none=s.optional,
                    help=help_text).tag(config=True)
    return _TRAITS[s.kind](s.default, allow_none=s.optional, help=help_text).tag(config=True)


def config_traits() -> dict[str, TraitType]:
    """One configurable trait per :class:`RLMConfig` field (same name, default, help)."""
    return {s.name: _setting_trait(s.name) for s in settings()}


class RLM(Configurable):
    """The ``RLM`` config section: every run setting as a trait (``model`` and
    ``sub_model`` among them), plus ``widgets``, ``warm_start``, ``follow_ups`` and
    ``tools``.

    The class is named ``RLM`` because traitlets takes a section's name from its class
    (``c.RLM.<setting>``, ``--RLM.<setting>``, ``%config RLM``); it is not the engine's
    :class:`rlm_kernel.engine.RLM`, with which it shares only that name.  Import it as
    :data:`RLMSettings`.  Use :meth:`run_config` to get the :class:`RLMConfig` of the
    current values.
    """

    # One declared trait per run setting, its default, help and bounds the setting's own
    # (:func:`config_traits`); tests/jupyter/test_settings.py checks that every
    # RLMConfig field has one.
    model = _setting_trait("model")
    sub_model = _setting_trait("sub_model")
    router = _setting_trait("router")
    keep_alive = _setting_trait("keep_alive")
    mcp_servers = _setting_trait("mcp_servers")
    max_tool_calls = _setting_trait("max_tool_calls")
    tool_timeout = _setting_trait("tool_timeout")
    max_iterations = _setting_trait("max_iterations")
    max_depth = _setting_trait("max_depth")
    child_max_iterations = _setting_trait("child_max_iterations")
    max_llm_calls = _setting_trait("max_llm_calls")
    max_tokens = _setting_trait("max_tokens")
    max_cost_usd = _setting_trait("max_cost_usd")
    max_seconds = _setting_trait("max_seconds")
    auto_max_seconds = _setting_trait("auto_max_seconds")
    step_timeout = _setting_trait("step_timeout")
    max_output_chars = _setting_trait("max_output_chars")
    preview_chars = _setting_trait("preview_chars")
    history_window = _setting_trait("history_window")
    history_code = _setting_trait("history_code")
    termination = _setting_trait("termination")
    termination_config = _setting_trait("termination_config")
    max_concurrency = _setting_trait("max_concurrency")
    max_consecutive_errors = _setting_trait("max_consecutive_errors")
    temperature = _setting_trait("temperature")
    max_step_tokens = _setting_trait("max_step_tokens")
    max_sub_tokens = _setting_trait("max_sub_tokens")
    cut_after_first_block = _setting_trait("cut_after_first_block")
    use_stop_sequences = _setting_trait("use_stop_sequences")
    stream_replies = _setting_trait("stream_replies")
    protect_inputs = _setting_trait("protect_inputs")
    context_window = _setting_trait("context_window")
    restate_question = _setting_trait("restate_question")
    verify_answer = _setting_trait("verify_answer")
    ground_answer = _setting_trait("ground_answer")
    cache = _setting_trait("cache")
    callbacks = _setting_trait("callbacks")
    resample_temperature = _setting_trait("resample_temperature")
    repeat_limit = _setting_trait("repeat_limit")
    candidates = _setting_trait("candidates")
    candidates_early_stop = _setting_trait("candidates_early_stop")
    candidate_temperature = _setting_trait("candidate_temperature")
    executor = _setting_trait("executor")
    memory_limit = _setting_trait("memory_limit")
    workdir = _setting_trait("workdir")
    test_command = _setting_trait("test_command")
    test_timeout = _setting_trait("test_timeout")
    pass_env = _setting_trait("pass_env")

    # Beside the run settings (the models among them): the widgets, the warm start,
    # follow-up tasks and the user's tools.
    follow_ups = Bool(
        True, help="A task is told the session's earlier tasks (questions, answers, code, "
        "the variables they left); %%rlm --new starts afresh.").tag(config=True)
    tools = List(
        Unicode(), help="Names of the notebook's functions offered to the model as tools "
        "(%rlm tools add NAME).").tag(config=True)
    widgets = Bool(
        True, help="Show the progress and variables widgets in the task cell.").tag(config=True)
    warm_start = Bool(
        help="When the extension loads (every RLM kernel start), import litellm in "
        "the background and, if the root model is the embedded one, start its server and "
        "have it read the system prompt, so the first task's first step comes sooner. "
        "Default: on, unless the environment sets RLM_WARM_START=0.",
    ).tag(config=True)

    @default("warm_start")
    def _warm_start_default(self) -> bool:
        return os.environ.get("RLM_WARM_START", "1").strip().lower() not in ("0", "false",
                                                                              "no", "off")

    @validate(*_BY_NAME)
    def _check_bounds(self, proposal: Any) -> Any:
        """Reject a value out of its setting's bounds with the bound in the message."""
        setting: Setting = _BY_NAME[proposal["trait"].name]
        try:
            setting.check(proposal["value"])
        except ValueError as exc:
            raise TraitError(f"RLM.{exc}") from None
        return proposal["value"]

    def run_config(self, **overrides: Any) -> RLMConfig:
        """The current trait values as an :class:`RLMConfig`, with ``overrides``
        applied (:meth:`RLMConfig.replace`: None sets an optional setting to none).

        Raises:
            ValueError: an override below its bound, or None for a setting that needs
                a value."""
        return RLMConfig(**{name: getattr(self, name) for name in _BY_NAME}).replace(
            **overrides)


RLMSettings = RLM
"""The ``c.RLM`` section's class under a name that does not read as the engine's
:class:`rlm_kernel.engine.RLM` (``RLMMagics`` and ``RLMKernelApp`` use it)."""


def register_section(shell: Any, owner: RLM) -> RLM:
    """Make ``%config RLM`` list the section's options (help and current values) like
    any configurable's, and ``%config RLM.model`` read one.

    IPython's ``%config`` finds a section by the class name of an object in
    ``shell.configurables``; the settings live in ``owner`` (the magic, a subclass), so
    an :class:`RLM` whose traits are linked to ``owner``'s is registered.  Settings
    still go to ``owner`` only (``%config RLM.x = v`` updates every configurable; this
    view takes its values through the links, so a rejected value is reported once).

    Args:
        shell: the IPython shell (its ``configurables`` list).
        owner: the configurable that holds the ``c.RLM`` settings.

    Returns:
        The registered view (once per shell: a second call returns the first view).
    """
    for known in shell.configurables:
        if type(known) is RLM:
            return known
    view = RLM()
    for name in RLM.class_trait_names(config=True):
        link((owner, name), (view, name))
    view.update_config = lambda config: None  # type: ignore[method-assign]
    shell.configurables.append(view)
    return view
