"""Shared pieces of the ``%rlm`` tests in this process's IPython shell: a scripted
model in place of the real one, and the magics object."""

from __future__ import annotations

from typing import Any

import rlm_kernel.engine.rlm as engine
from rlm_kernel.models.scripted import ScriptedModel


def script(monkeypatch: Any, replies: list[str]) -> ScriptedModel:
    """Make every model the magic asks for this scripted one (both roles)."""
    lm = ScriptedModel(replies)
    monkeypatch.setattr(engine, "make_client", lambda model, **kw: lm)
    return lm


def magics(ip: Any) -> Any:
    """The shell's :class:`~rlm_kernel.jupyter.magic.RLMMagics`."""
    return ip.magics_manager.registry["RLMMagics"]


def quiet_shell(ip: Any, names: tuple[str, ...]):
    """Yield ``ip`` with the answer checks and widgets off; afterwards ``names`` are
    removed from its namespace and the settings put back."""
    for line in ("RLM.verify_answer = False", "RLM.ground_answer = False",
                 "RLM.widgets = False"):
        ip.run_line_magic("config", line)
    yield ip
    for name in names:
        ip.user_ns.pop(name, None)
    for line in ("RLM.executor = None", "RLM.ground_answer = True", "RLM.widgets = True"):
        ip.run_line_magic("config", line)
