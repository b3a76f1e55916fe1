"""The run settings as traitlets: the ``c.RLM`` config section, built from
:func:`rlm_kernel.engine.config.settings` (so help, defaults and bounds are
:class:`~rlm_kernel.engine.config.RLMConfig`'s own, and ``None`` means "no limit").

    c.RLM.max_llm_calls = 50          # in ipython_kernel_config.py / rlm_kernel_config.py
    %config RLM.step_timeout = 30     # in a session
"""

from __future__ import annotations

import os
from typing import Any

from traitlets import Bool, Dict, Float, Int, TraitError, TraitType, Unicode, default, validate
from traitlets.config import Configurable

from ..engine.config import RLMConfig, Setting, settings

__all__ = ["RLMSettings", "config_traits"]

_TRAITS: dict[str, type[TraitType]] = {"int": Int, "float": Float, "bool": Bool,
                                       "str": Unicode, "dict": Dict}


def config_traits() -> dict[str, TraitType]:
    """One configurable trait per :class:`RLMConfig` field (same name, default, help)."""
    traits: dict[str, TraitType] = {}
    for s in settings():
        help_text = s.help if s.low is None else f"{s.help} Must be {s.bound()}."
        trait = _TRAITS[s.kind](s.default, allow_none=s.optional, help=help_text)
        traits[s.name] = trait.tag(config=True)
    return traits


def _check(self: Any, proposal: Any) -> Any:
    """Reject a value out of its setting's bounds with the bound in the message."""
    setting: Setting = _BY_NAME[proposal["trait"].name]
    try:
        setting.check(proposal["value"])
    except ValueError as exc:
        raise TraitError(f"RLM.{exc}") from None
    return proposal["value"]


_BY_NAME = {s.name: s for s in settings()}
_namespace: dict[str, Any] = dict(config_traits())
_namespace["_check_bounds"] = validate(*_BY_NAME)(_check)
_namespace["__doc__"] = """The ``RLM`` config section: every run setting as a trait,
    plus ``model``, ``sub_model`` and ``widgets``.

    Its class name is ``RLM`` so that traitlets reads ``c.RLM.<setting>``.  Use
    :meth:`run_config` to get the :class:`RLMConfig` of the current values."""
_namespace["__module__"] = __name__


def _run_config(self: Any, **overrides: Any) -> RLMConfig:
    """The current trait values as an :class:`RLMConfig`, with ``overrides`` applied
    (None values ignored).

    Raises:
        ValueError: an override below its bound."""
    return RLMConfig(**{name: getattr(self, name) for name in _BY_NAME}).replace(**overrides)


_namespace["run_config"] = _run_config
# Beside the run settings: the models (litellm model strings) and the task cell's widgets.
_namespace["model"] = Unicode(
    None, allow_none=True, help="Root model: a litellm model string; empty means the "
    "embedded local model (default: env RLM_MODEL).").tag(config=True)
_namespace["sub_model"] = Unicode(
    None, allow_none=True, help="Model for llm_query (default: env RLM_SUB_MODEL); empty "
    "means the root model.").tag(config=True)
_namespace["widgets"] = Bool(
    True, help="Show the progress and variables widgets in the task cell.").tag(config=True)
_namespace["_default_model"] = default("model")(lambda self: os.environ.get("RLM_MODEL") or None)
_namespace["_default_sub_model"] = default("sub_model")(
    lambda self: os.environ.get("RLM_SUB_MODEL") or None)
RLMSettings: type[Configurable] = type("RLM", (Configurable,), _namespace)
