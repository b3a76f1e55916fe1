"""rlm-kernel: Recursive Language Models in a persistent Python REPL.

``from rlm_kernel import RLM`` gives the engine; importing the package is
cheap (litellm and the local model load on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__

__all__ = ["RLM", "RLMConfig", "RLMResult", "__version__"]

from .redaction import redact_log_records

redact_log_records()  # the package's log records carry no secret (rlm_kernel.redaction)

if TYPE_CHECKING:  # pragma: no cover
    from .engine import RLM
    from .engine.config import RLMConfig
    from .engine.result import RLMResult


def __getattr__(name: str) -> Any:
    if name == "RLM":
        from .engine import RLM

        return RLM
    if name == "RLMConfig":
        from .engine.config import RLMConfig

        return RLMConfig
    if name == "RLMResult":
        from .engine.result import RLMResult

        return RLMResult
    raise AttributeError(f"module 'rlm_kernel' has no attribute {name!r}")


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext rlm_kernel``: the ``%rlm`` magic in any IPython kernel."""
    from .jupyter.extension import load_ipython_extension as load

    load(shell)
