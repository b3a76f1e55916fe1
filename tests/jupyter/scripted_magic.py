"""Shared pieces of the ``%rlm`` tests in this process's IPython shell: a scripted
model given through the session's client seam, and the magics object."""

from __future__ import annotations

from typing import Any

from IPython import get_ipython

from rlm_kernel.models.scripted import ScriptedModel


def script(monkeypatch: Any, replies: list[str], seen: list[Any] | None = None) -> ScriptedModel:
    """Make this scripted model every client the shell's ``%rlm`` session asks for (both
    roles), through :attr:`~rlm_kernel.jupyter.session.NotebookSession.client_factory`
    (undone after the test); the model strings asked for go to ``seen``."""
    lm = ScriptedModel(replies)

    def factory(model: str | None) -> ScriptedModel:
        if seen is not None:
            seen.append(model)
        return lm

    monkeypatch.setattr(magics(get_ipython()).session, "client_factory", factory)
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
