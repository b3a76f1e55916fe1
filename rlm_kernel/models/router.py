"""Model fleets: every call of a run through one litellm ``Router``.

A fleet is what the litellm proxy's config file holds: a ``model_list`` of deployments
(``model_name``: the name a run asks for; ``litellm_params``: the litellm model string,
``api_base``, ``api_key``, ``rpm``, ``tpm`` ...; ``model_info.id``: the deployment's
name) and optional ``router_settings`` (``routing_strategy``, ``num_retries``,
``allowed_fails``, ``cooldown_time``, ``fallbacks`` ...), given as a YAML/JSON file or as
the parsed dict.  ``os.environ/VAR`` values are read from the environment by the Router,
as the proxy reads them.  A fleet's keys (a literal ``api_key``, or the value of the
variable ``os.environ/NAME`` names, whatever ``NAME`` is called; every credential-like key
of ``litellm_params`` and ``router_settings``) become secrets of the process when the
fleet is loaded (:func:`rlm_kernel.redaction.remember_settings`): redacted wherever
text leaves a run, like the environment's keys.

The Router does the work: it spreads calls over a model_name's deployments by its
routing strategy, keeps each within its ``rpm``/``tpm``, retries and fails over
(``num_retries``, ``fallbacks``) and cools a failing deployment down.  One Router is built
per fleet per process (:func:`get_router`), so a run's root model, its sub-calls, child
runs and candidates, and every other run of the process that names the same fleet, share
its rate accounting and cooldowns.  :class:`RouterClient` is the
:class:`~rlm_kernel.models.litellm_client.LiteLLMClient` that sends through it: the same
usage and cost accounting, error descriptions and sub-call cache, plus the deployment
that answered on each :class:`~rlm_kernel.models.usage.LLMCall`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..redaction import ENV_PREFIX, redact_text, remember_settings
from .base import LLMError, Message
from .litellm_client import LiteLLMClient, import_litellm
from .usage import LLMCall

log = logging.getLogger(__name__)

__all__ = ["Fleet", "RouterClient", "fleet_yaml", "get_router", "load_fleet"]

_ENV_PREFIX = ENV_PREFIX
_routers: dict[str, Any] = {}
_routers_lock = threading.Lock()


@dataclass(frozen=True)
class Fleet:
    """A validated fleet: the Router's ``model_list`` and ``router_settings``.

    Attributes:
        model_list: the deployments, as in the litellm proxy's config.
        router_settings: keyword arguments of ``litellm.Router`` (may be empty).
        source: where it came from (the file's path, or ``"<dict>"``), for messages.
    """

    model_list: list[dict[str, Any]] = field(repr=False)  # it may hold keys
    router_settings: dict[str, Any] = field(default_factory=dict, repr=False)
    source: str = "<dict>"

    @property
    def model_names(self) -> list[str]:
        """The ``model_name`` values, each once, in file order."""
        return list(dict.fromkeys(d["model_name"] for d in self.model_list))

    @property
    def key(self) -> str:
        """The fleet's identity: two fleets with the same deployments and settings
        (from a file or a dict) share one Router."""
        return json.dumps([self.model_list, self.router_settings], sort_keys=True,
                          default=str)

    def deployment_ids(self) -> set[str]:
        """The ``model_info.id`` values the user gave."""
        return {str(d["model_info"]["id"]) for d in self.model_list
                if isinstance(d.get("model_info"), Mapping) and d["model_info"].get("id")}

    def deployments(self, model_name: str) -> list[dict[str, Any]]:
        """The deployments of ``model_name``."""
        return [d for d in self.model_list if d["model_name"] == model_name]

    def unknown(self, model: str) -> LLMError:
        """The error for a model that is no model_name of this fleet."""
        return LLMError(f"the fleet {self.source} has no model_name {model!r}; its "
                        f"model_names: {', '.join(self.model_names)}")


def load_fleet(source: Any) -> Fleet:
    """Read and check a fleet.

    Args:
        source: a path (``str`` or ``os.PathLike``) of a YAML or JSON file in the
            litellm proxy's config format (other top-level keys such as
            ``litellm_settings`` are ignored), its parsed ``dict``, or a :class:`Fleet`.

    Returns:
        The :class:`Fleet`.

    Raises:
        LLMError: the file is missing or unreadable, it is not YAML, or its
            ``model_list`` is missing or malformed (each deployment needs a
            ``model_name`` and ``litellm_params.model``), ``router_settings`` is not a
            mapping, or an ``os.environ/VAR`` value names a variable that is not set.
            One line, naming the file and the deployment.

    The fleet's keys become secrets of the process (see the module docstring).
    """
    if isinstance(source, Fleet):
        return source
    if isinstance(source, Mapping):
        return _checked(dict(source), "<dict>")
    if not isinstance(source, (str, os.PathLike)):
        raise LLMError(f"router: a fleet file's path or its dict, not {type(source).__name__}")
    path = Path(source).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LLMError(f"router: no fleet file {str(path)!r}") from None
    except OSError as exc:
        raise LLMError(f"router: cannot read the fleet file {str(path)!r}: "
                       f"{exc.strerror or exc}") from None
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise LLMError(f"router: {path} is not valid YAML{line}: {problem}") from None
    if not isinstance(data, Mapping):
        raise LLMError(f"router: {path} must hold a mapping with a model_list, "
                       f"not {type(data).__name__}")
    return _checked(dict(data), str(path))


def _checked(data: dict[str, Any], source: str) -> Fleet:
    """A :class:`Fleet` of the parsed file or dict; raises :class:`LLMError` as
    :func:`load_fleet` says."""
    models = data.get("model_list")
    if not isinstance(models, list) or not models:
        raise LLMError(f"router: {source} needs a model_list: a list of deployments, each "
                       "{model_name: ..., litellm_params: {model: ..., api_base: ...}}")
    for n, dep in enumerate(models, 1):
        where = f"router: {source}: deployment {n}"
        if not isinstance(dep, Mapping):
            raise LLMError(f"{where} is a {type(dep).__name__}, not a mapping")
        if not isinstance(dep.get("model_name"), str) or not dep["model_name"]:
            raise LLMError(f"{where} has no model_name")
        params = dep.get("litellm_params")
        if not isinstance(params, Mapping) or not isinstance(params.get("model"), str):
            raise LLMError(f"{where} ({dep['model_name']}) needs litellm_params with a "
                           "model (a litellm model string such as openai/<name>)")
        if "model_info" in dep and not isinstance(dep["model_info"], Mapping):
            raise LLMError(f"{where} ({dep['model_name']}): model_info must be a mapping")
        for key, value in params.items():
            if isinstance(value, str) and value.startswith(_ENV_PREFIX) \
                    and value[len(_ENV_PREFIX):] not in os.environ:
                raise LLMError(f"{where} ({dep['model_name']}): {key} reads "
                               f"{value[len(_ENV_PREFIX):]} from the environment, which "
                               "is not set")
    settings = data.get("router_settings") or {}
    if not isinstance(settings, Mapping):
        raise LLMError(f"router: {source}: router_settings must be a mapping")
    fleet = Fleet([_plain(d) for d in models], _plain(settings), source)
    remember_settings([fleet.model_list, fleet.router_settings])
    return fleet


def _plain(value: Any) -> Any:
    """``value`` with every mapping a ``dict`` (a fresh copy: the Router may edit it)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def get_router(fleet: Fleet) -> Any:
    """The process's one ``litellm.Router`` for ``fleet`` (built on first use).

    ``cache_responses`` defaults to True so that calls asking for the cache
    (``cache={"use-cache": True}``, sub-calls with ``c.RLM.cache``) may use litellm's
    cache; which calls do is decided per call (:mod:`rlm_kernel.models.cache`), and
    ``litellm.cache`` is left as it was.

    Raises:
        LLMError: litellm refuses the fleet (an unknown router setting, a bad
            deployment); the message is litellm's.
    """
    key = fleet.key
    with _routers_lock:
        router = _routers.get(key)
        if router is None:
            litellm = import_litellm()
            settings = {"cache_responses": True, **fleet.router_settings}
            cache = litellm.cache
            try:
                router = litellm.Router(model_list=_plain(fleet.model_list), **settings)
            except Exception as exc:  # TypeError for an unknown setting, litellm's own
                detail = redact_text(" ".join(str(exc).split()))[:300]
                raise LLMError(f"router: {fleet.source}: litellm refused the fleet: "
                               f"{type(exc).__name__}: {detail}") from exc
            finally:
                # With no cache set, Router(cache_responses=True) installs one that
                # answers every call (root turns too); the calls read litellm.cache
                # when made, so the cache stays the one c.RLM.cache configured.
                litellm.cache = cache
            log.info("router for %s: %d deployment(s) of %s", fleet.source,
                     len(fleet.model_list), ", ".join(fleet.model_names))
            _routers[key] = router
        return router


class RouterClient(LiteLLMClient):
    """A :class:`LiteLLMClient` for a fleet's ``model_name``: each request goes through
    the fleet's one Router (:func:`get_router`), which picks the deployment, retries and
    fails over; its ``num_retries`` governs (this client adds no retries of its own).

    Each :class:`~rlm_kernel.models.usage.LLMCall` has ``deployment``: the answering
    deployment's ``model_info.id`` when the fleet gives one, else
    ``<litellm model>@<api_base>``.  ``model`` stays the model_name.

    Args:
        model: a ``model_name`` of the fleet.
        fleet: the fleet (see :func:`load_fleet` for what it may be).
        **kwargs: as for :class:`LiteLLMClient` (``temperature``, ``max_tokens``,
            ``cache`` ...); ``api_base``/``api_key`` belong in the fleet, and
            ``num_retries`` to its ``router_settings``.

    Raises:
        LLMError: the fleet cannot be read, or ``model`` is none of its model_names.
    """

    def __init__(self, model: str, fleet: Any, **kwargs: Any) -> None:
        kwargs.pop("num_retries", None)
        super().__init__(model, **kwargs)
        self.fleet = load_fleet(fleet)
        if model not in self.fleet.model_names:
            raise self.fleet.unknown(model)
        self._ids = self.fleet.deployment_ids()

    @property
    def context_window(self) -> int | None:
        """The smallest input limit (tokens) among the model_name's deployments, from
        their ``model_info.max_input_tokens`` or litellm's model map; None if unknown."""
        if self._context_window is False:
            limits = []
            for dep in self.fleet.deployments(self.model):
                info = dep.get("model_info") or {}
                limit = info.get("max_input_tokens")
                if not limit:
                    try:
                        limit = import_litellm().get_model_info(
                            dep["litellm_params"]["model"]).get("max_input_tokens")
                    except Exception:  # unmapped model: litellm raises
                        limit = None
                if limit:
                    limits.append(int(limit))
            self._context_window = min(limits) if limits else None
        return self._context_window

    def check(self) -> None:
        """Build the fleet's Router now, so a fleet litellm refuses fails before a run.

        Raises:
            LLMError: litellm refuses the fleet.
        """
        get_router(self.fleet)

    def _request(self, litellm: Any, messages: list[Message], kwargs: dict[str, Any]) -> Any:
        """One ``router.completion`` request: the Router picks the deployment and
        retries on the others."""
        return get_router(self.fleet).completion(model=self.model, messages=messages,
                                                 **kwargs)

    def _note_response(self, call: LLMCall, response: Any) -> None:
        """The deployment that answered, on ``call`` (from the response's hidden
        parameters; a streamed response has them before it is read)."""
        call.deployment = self._deployment(response)

    def _deployment(self, response: Any) -> str | None:
        """The answering deployment's name from the response's hidden parameters."""
        hidden = getattr(response, "_hidden_params", None) or {}
        model_id = hidden.get("model_id")
        if model_id is not None and str(model_id) in self._ids:
            return str(model_id)
        model = hidden.get("litellm_model_name") or hidden.get("model")
        base = hidden.get("api_base")
        if model and base:
            return f"{model}@{base}"
        return str(model_id) if model_id is not None else None


def fleet_yaml(model_name: str, api_bases: list[str], *, model: str, api_key: str = "local",
               max_parallel_requests: int | None = 1,
               router_settings: Mapping[str, Any] | None = None) -> str:
    """The fleet file (YAML) of one model served at several OpenAI-compatible URLs.

    Args:
        model_name: the name runs ask for (``RLM(model=model_name, router=...)``).
        api_bases: each server's ``.../v1`` URL, one deployment each (ids
            ``<model_name>-1``, ``-2`` ...).
        model: the litellm model string each server answers to (``openai/<alias>``).
        api_key: the key sent (a placeholder for servers that check none).
        max_parallel_requests: requests one deployment takes at once (1 for a
            llama.cpp server with one slot); None: no limit.
        router_settings: the Router's settings (default: least-busy routing, one
            retry per call, a failing deployment cooled down for 30 s).

    Returns:
        The YAML text.
    """
    import yaml

    deployments = []
    for n, base in enumerate(api_bases, 1):
        params: dict[str, Any] = {"model": model, "api_base": base, "api_key": api_key}
        if max_parallel_requests:
            params["max_parallel_requests"] = max_parallel_requests
        deployments.append({"model_name": model_name, "litellm_params": params,
                            "model_info": {"id": f"{model_name}-{n}"}})
    settings = dict(router_settings) if router_settings is not None else {
        "routing_strategy": "least-busy", "num_retries": 1, "allowed_fails": 1,
        "cooldown_time": 30}
    return yaml.safe_dump({"model_list": deployments, "router_settings": settings},
                          sort_keys=False)
