"""What a model's tokens cost, before a call is sent: for a USD budget to reserve what a
call may spend (:mod:`rlm_kernel.engine.budget`).

Prices come from litellm's cost map (``litellm.get_model_info``: ``input_cost_per_token``,
``output_cost_per_token`` and their tiers), the one the ledger prices finished calls with
(``litellm.completion_cost``), or from custom prices given with the model
(``input_cost_per_token`` / ``output_cost_per_token`` in its litellm parameters).
litellm is imported only when prices are asked for.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["TokenPrices", "token_prices"]

log = logging.getLogger(__name__)

_PROMPT_KEY = re.compile(r"input_cost_per_token(_above_\d+k_tokens)?\Z")
_COMPLETION_KEY = re.compile(r"output_cost_per_(reasoning_)?token(_above_\d+k_tokens)?\Z")


@dataclass(frozen=True, slots=True)
class TokenPrices:
    """The most one call can cost per token, in USD.

    Attributes:
        prompt_usd: USD per prompt token (the highest tier of the model's prices).
        completion_usd: USD per completion token (reasoning tokens included).
        request_usd: USD per request whatever its tokens (0 for token-priced models).
    """

    prompt_usd: float = 0.0
    completion_usd: float = 0.0
    request_usd: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int = 0) -> float:
        """USD of a call of ``prompt_tokens`` and ``completion_tokens`` (tokens)."""
        return (self.request_usd + prompt_tokens * self.prompt_usd
                + completion_tokens * self.completion_usd)

    @classmethod
    def highest(cls, prices: list[TokenPrices]) -> TokenPrices:
        """Each price at its highest over ``prices`` (deployments a call may reach)."""
        return cls(max((p.prompt_usd for p in prices), default=0.0),
                   max((p.completion_usd for p in prices), default=0.0),
                   max((p.request_usd for p in prices), default=0.0))


def _from_map(info: Mapping[str, Any]) -> TokenPrices:
    """The highest prompt and completion prices of a cost-map entry (or of custom
    prices given with a model)."""
    def top(pattern: re.Pattern[str]) -> float:
        return max((float(v) for k, v in info.items()
                    if pattern.match(k) and isinstance(v, (int, float))), default=0.0)
    return TokenPrices(top(_PROMPT_KEY), top(_COMPLETION_KEY))


def _model_prices(model: str, params: Mapping[str, Any]) -> TokenPrices | None:
    """Prices of one litellm model string with its parameters (custom prices first)."""
    if any(_PROMPT_KEY.match(k) or _COMPLETION_KEY.match(k) for k in params):
        return _from_map(params)
    from .litellm_client import import_litellm

    try:
        return _from_map(import_litellm().get_model_info(model))
    except Exception:  # noqa: BLE001 - not in the map: litellm prices its calls at 0 too
        log.debug("no prices for %s in litellm's cost map", model)
        return None


def _innermost(client: Any) -> Any:
    """The model client under its wrappers (budget, tracing, recording ...)."""
    seen = 0
    while hasattr(client, "_client") and seen < 32:
        client, seen = client._client, seen + 1
    return client


def token_prices(client: Any) -> TokenPrices | None:
    """The most a call of ``client`` can cost per token, or None when not known.

    Args:
        client: a :class:`~rlm_kernel.models.LanguageModel`, wrapped or not.  A client
            may declare its own (``token_prices``, a :class:`TokenPrices`); a litellm
            client made with ``priced=False`` costs nothing; a fleet's model_name costs
            the highest prices among its deployments.

    Returns:
        The prices, or None for a model litellm's cost map does not hold (its calls
        are priced at 0 USD by the ledger, which prices with the same map).
    """
    inner = _innermost(client)
    declared = getattr(inner, "token_prices", None)
    if isinstance(declared, TokenPrices):
        return declared
    if getattr(inner, "priced", True) is False:
        return TokenPrices()
    fleet = getattr(inner, "fleet", None)
    model = getattr(inner, "model", None)
    if fleet is not None and hasattr(fleet, "deployments"):
        found = [_model_prices(str(d["litellm_params"].get("model")), d["litellm_params"])
                 for d in fleet.deployments(model)]
        known = [p for p in found if p is not None]
        return TokenPrices.highest(known) if known else None
    if not isinstance(model, str) or not model:
        return None
    return _model_prices(model, getattr(inner, "extra", None) or {})
