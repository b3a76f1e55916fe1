"""The host's side of the worker's values: :class:`RemoteValue` (a value of the worker's
with no data form: its description), :class:`RemoteFunction`, the proxied namespace
(:class:`IsolatedNamespace`, what :attr:`IsolatedExecutor.namespace
<rlm_kernel.executors.isolated.IsolatedExecutor.namespace>` is) and the checks of what
the worker's replies say about its values (untrusted: every field coerced and capped).
How values cross: :mod:`rlm_kernel.executors.isolated`.
"""

from __future__ import annotations

import collections
import itertools
import logging
import pickle
import sys
import types
import weakref
from collections.abc import ItemsView, Iterator, Mapping, MutableMapping, ValuesView
from typing import TYPE_CHECKING, Any

from ...repl_types import REPLVariable
from ..redaction import Redactor
from ..sandbox import WorkerError
from ..wire import ProtocolError, decode_counted, decode_value
from ..workfolder import PORTABLE

if TYPE_CHECKING:  # pragma: no cover
    from .executor import IsolatedExecutor

__all__ = ["RemoteValue", "RemoteFunction", "IsolatedNamespace", "LateRead", "COPIES_BYTES",
           "ITEM_BYTES", "remote_value", "from_worker", "reply_variables", "reply_snapshot",
           "reply_bindings"]

log = logging.getLogger(__name__)

COPIES_BYTES = 64 << 20
"""Most the host keeps of decoded copies of the worker's values, all names together
(bytes: each copy's data form plus :data:`ITEM_BYTES` an item), the least recently read
dropped first: one object bound under 40 names is not 40 copies on the host."""
ITEM_BYTES = 64
"""What one item of a decoded value (a list's member, a dict's pair) is counted as on
the host, bytes (a Python object and its reference)."""
_MISSING = object()


class LateRead(WorkerError):
    """A request outside a step that the worker was not asked, or did not answer, by the
    run's deadline plus :data:`~rlm_kernel.executors.isolated.LATE_SECONDS` (a worker slow or silent then is killed,
    and restarted at the next step).  Reading a name then gives a :class:`RemoteValue`
    that says so, not this error."""



class RemoteValue:
    """A value of the worker's that has no data form: its description.

    Attributes:
        type_name: the type's name in the worker; text: the guarded repr; note: why
            it is not here; ref: the worker's reference (binding this object to a name
            of the namespace binds the worker's own object, while that worker lives);
        generation: the worker it lives in; name: the variable it was read from;
        length: its ``len`` where it has one, else None.
    """

    def __init__(self, type_name: str, text: str, note: str, ref: int | None = None,
                 generation: int = -1, name: str | None = None,
                 length: int | None = None) -> None:
        self.type_name, self.text, self.note = type_name, text, note
        self.ref, self.generation, self.name, self.length = ref, generation, name, length

    def __repr__(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text

    def __reduce__(self) -> tuple[Any, ...]:
        return (str, (self.text,))


class RemoteFunction(RemoteValue):
    """A callable of the worker's (a function model code defined): it lives in the
    worker; calling it on the host raises."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self.text} lives in the isolated REPL; call it from model code")


def remote_value(info: Mapping[str, Any], generation: int, name: str | None = None,
            ref: Any = None) -> RemoteValue:
    """A :class:`RemoteValue` (or :class:`RemoteFunction`) from a worker's description
    (untrusted: every field is coerced)."""
    cls = RemoteFunction if info.get("callable") is True else RemoteValue
    length = info.get("length")
    return cls(str(info.get("type", "object"))[:200], str(info.get("repr", "<?>"))[:4000],
               str(info.get("reason", "no data form"))[:1000],
               ref if isinstance(ref, int) else None, generation, name,
               length if isinstance(length, int) else None)


def from_worker(packed: Any, generation: int) -> Any:
    """A value the worker sent as ``{"data": ...}`` or ``{"description": ...}``."""
    if isinstance(packed, dict) and isinstance(packed.get("data"), bytes):
        try:
            return decode_value(packed["data"])
        except ProtocolError as exc:
            return RemoteValue("object", "<malformed value>", str(exc), None, generation)
    if isinstance(packed, dict) and isinstance(packed.get("description"), dict):
        return remote_value(packed["description"], generation)
    return RemoteValue("object", "<malformed value>", "malformed", None, generation)



class IsolatedNamespace(MutableMapping[str, Any]):
    """The host's view of the worker's namespace (see
    :mod:`rlm_kernel.executors.isolated`).

    Args:
        executor: the executor whose worker holds the values.
    """

    def __init__(self, executor: IsolatedExecutor) -> None:
        self._ex = weakref.proxy(executor)
        self._functions: dict[int, Any] = {}
        self._keys: dict[int, int] = {}  # id(host callable) -> key
        self._host_values: dict[str, tuple[Any, int]] = {}
        # name -> (decoded copy, digest, cost in bytes), least recently used first
        self._copies: collections.OrderedDict[str, tuple[Any, str, int]] = \
            collections.OrderedDict()
        self._copies_bytes = 0
        self._bindings: dict[str, tuple[Any, ...]] = {}
        self._versions = itertools.count(1)
        self._key_numbers = itertools.count(1)

    # -- MutableMapping -------------------------------------------------------------------
    def __getitem__(self, name: str) -> Any:
        if not self._ex.in_step:
            token = self._bindings.get(name)
            if token is None:
                raise KeyError(name)
            local = self._local(name, token)
            if local is not _MISSING:
                return local
        try:
            reply = self._ex.request("get", name=name,
                                     known=self._copies.get(name, (None, None))[1],
                                     seconds=self._ex.work_seconds())
        except LateRead as exc:  # the run's time is up: told as such, not a failure
            return RemoteValue("object", f"<{name}: not read, {exc}>", str(exc), None,
                               self._ex.generation, name)
        if reply.get("missing"):
            raise KeyError(name)
        return self._value(name, reply)

    def __setitem__(self, name: str, value: Any) -> None:
        if not isinstance(name, str):
            raise TypeError(f"namespace names are str, not {type(name).__name__}")
        version = next(self._versions)
        kind, payload = self._encode(name, value)
        self._ex.request("set", name=name, kind=kind, payload=payload, version=version,
                         check=True)
        self._drop_copy(name)
        if kind == "stub":
            self._bindings[name] = ("stub", payload[0])
            self._host_values.pop(name, None)
        elif kind in ("ref", "keep"):
            self._bindings[name] = ("child",)
            self._host_values.pop(name, None)
        else:
            self._host_values[name] = (value, version)
            self._bindings[name] = ("host", version)

    def __delitem__(self, name: str) -> None:
        reply = self._ex.request("del", name=name)
        self._bindings.pop(name, None)
        self._host_values.pop(name, None)
        self._drop_copy(name)
        if reply.get("missing"):
            raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        if self._ex.in_step:
            return iter(list(reply_bindings(self._ex.request("keys"))))
        return iter(list(self._bindings))

    def __len__(self) -> int:
        return len(list(iter(self)))

    def items(self) -> _LiveItems:
        return _LiveItems(self)

    def values(self) -> _LiveValues:
        return _LiveValues(self)

    def __contains__(self, name: object) -> bool:
        if not self._ex.in_step:
            return name in self._bindings
        return isinstance(name, str) and not self._ex.request("has", name=name).get("missing")

    # -- helpers ----------------------------------------------------------------------------
    def _local(self, name: str, token: tuple[Any, ...]) -> Any:
        """The value of ``name`` known on the host for ``token``, or ``_MISSING``."""
        if token[0] == "stub" and token[1] in self._functions:
            return self._functions[token[1]]
        if token[0] == "host":
            held = self._host_values.get(name)
            if held is not None and held[1] == token[1]:
                return held[0]
        return _MISSING

    def _value(self, name: str, reply: dict[str, Any]) -> Any:
        """The host's object for a ``get`` reply (untrusted)."""
        generation = self._ex.generation
        token = reply.get("token")
        if isinstance(token, list) and token:
            local = self._local(name, tuple(token))
            if local is not _MISSING:
                return local
            return RemoteValue("object", f"<{name}: a value of the host's no longer held>",
                               "unknown host binding", None, generation, name)
        if reply.get("same") is True and name in self._copies:
            self._copies.move_to_end(name)
            return self._copies[name][0]
        kind = reply.get("kind")
        if kind == "module":
            module = sys.modules.get(str(reply.get("module")))  # never imported on request
            return module if module is not None else types.ModuleType(str(reply.get("module")))
        if kind == "value" and isinstance(reply.get("data"), bytes):
            try:
                value, items = decode_counted(reply["data"])
            except ProtocolError as exc:
                return remote_value({**reply, "reason": str(exc)}, generation, name, reply.get("ref"))
            self._keep_copy(name, value, str(reply.get("digest")),
                            len(reply["data"]) + ITEM_BYTES * items)
            return value
        return remote_value(reply, generation, name, reply.get("ref"))

    def _encode(self, name: str, value: Any) -> tuple[str, Any]:
        """How ``value`` goes to the worker: (kind, payload) for the worker's ``set``."""
        if isinstance(value, RemoteValue):
            if value.ref is not None and value.generation == self._ex.generation:
                return "ref", value.ref
            lost = (f"<{value.type_name} object: it lived in a REPL process that was "
                    "restarted, and is lost>")
            # the same name, read before a restart: the restarted worker's own (from the
            # snapshot) stands; never the description's text in its place
            return ("keep" if value.name == name else "placeholder"), lost
        if isinstance(value, types.ModuleType):
            return "module", value.__name__
        if callable(value) and getattr(value, PORTABLE, False) is True:
            try:  # runs in the worker (behind its wall), not served from the host
                return "value", pickle.dumps(value, protocol=5)
            except Exception as exc:  # noqa: BLE001 - served from the host instead
                log.warning("%r cannot be copied into the isolated REPL (%s); the host "
                            "serves it", value, exc)
        if callable(value) and not isinstance(value, type):
            key = self._keys.get(id(value))
            if key is None or self._functions.get(key) is not value:
                key = next(self._key_numbers)
                self._functions[key] = value
                self._keys[id(value)] = key
            return "stub", [key, getattr(value, "__name__", name),
                            getattr(value, "__doc__", None)]
        try:
            data = pickle.dumps(value, protocol=5)
        except Exception as exc:  # noqa: BLE001 - the worker gets a stand-in
            log.warning("variable %r (%s) cannot be copied into the isolated REPL: %s",
                        name, type(value).__name__, exc)
            return "placeholder", (f"<{type(value).__name__} object: could not be copied "
                                   f"into the isolated REPL ({type(exc).__name__})>")
        self._ex.check_size(name, len(data))
        return "value", data

    def resend(self) -> None:
        """Bind the host's own values and functions again (in a new worker)."""
        for name, token in list(self._bindings.items()):
            if token[0] == "stub" and token[1] in self._functions:
                fn = self._functions[token[1]]
                self._ex.request("set", name=name, kind="stub",
                                 payload=[token[1], getattr(fn, "__name__", name),
                                          getattr(fn, "__doc__", None)],
                                 version=0, check=True)
            elif token[0] == "host" and name in self._host_values:
                value, version = self._host_values[name]
                kind, payload = self._encode(name, value)
                self._ex.request("set", name=name, kind=kind, payload=payload,
                                 version=version, check=True)
        self._copies.clear()
        self._copies_bytes = 0

    def bindings(self) -> dict[str, tuple[Any, ...]]:
        """How each name was bound after the last step or request (``{name: token}``:
        ``("host", version)``, ``("stub", key)`` or ``("child",)``), without asking
        the worker."""
        return dict(self._bindings)

    def function(self, key: Any) -> Any:
        """The host callable registered as ``key``, or None."""
        return self._functions.get(key) if isinstance(key, int) else None

    def update_bindings(self, bindings: Mapping[str, tuple[Any, ...]]) -> None:
        self._bindings = dict(bindings)
        for name in [n for n in self._host_values if self._bindings.get(n, ("",))[0] != "host"]:
            del self._host_values[name]
        for name in [n for n in self._copies if n not in self._bindings]:
            self._drop_copy(name)

    def _keep_copy(self, name: str, value: Any, digest: str, cost: int) -> None:
        """Keep the decoded copy of ``name``'s value (its worker value unchanged, the
        next read answers ``same`` and gets it back), the least recently read copies
        dropped past :data:`COPIES_BYTES` in all; one over it alone is not kept."""
        self._drop_copy(name)
        if cost > COPIES_BYTES:
            return
        self._copies[name] = (value, digest, cost)
        self._copies_bytes += cost
        while self._copies_bytes > COPIES_BYTES:
            _, (_, _, dropped) = self._copies.popitem(last=False)
            self._copies_bytes -= dropped

    def _drop_copy(self, name: str) -> None:
        held = self._copies.pop(name, None)
        if held is not None:
            self._copies_bytes -= held[2]


class _LiveItems(ItemsView[str, Any]):
    """The namespace's items, skipping a name gone since it was listed (a worker
    restarted in between, from a snapshot that could not hold it)."""

    def __init__(self, namespace: IsolatedNamespace) -> None:
        super().__init__(namespace)
        self._namespace = namespace

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        for name in list(self._namespace):
            try:
                yield name, self._namespace[name]
            except KeyError:
                continue


class _LiveValues(ValuesView[Any]):
    """The namespace's values (see :class:`_LiveItems`)."""

    def __init__(self, namespace: IsolatedNamespace) -> None:
        super().__init__(namespace)
        self._namespace = namespace

    def __iter__(self) -> Iterator[Any]:
        for _, value in _LiveItems(self._namespace):
            yield value


_UNITS = ("characters", "items", "rows", "bytes")


def reply_variables(raw: Any, preview_length: int, skip: set[str]) -> list[REPLVariable]:
    """A ``describe`` reply's variables (untrusted: every field coerced and capped,
    previews redacted)."""
    redact = Redactor()
    found: list[REPLVariable] = []
    for entry in raw if isinstance(raw, list) else ():
        if not isinstance(entry, list) or len(entry) != 6 or not isinstance(entry[0], str) \
                or entry[0].startswith("_") or entry[0] in skip:
            continue
        name, kind, total, preview, unit, _ = entry
        text = str(preview)[:preview_length + 3]
        found.append(REPLVariable(
            name[:1000], str(kind)[:200], total_length=total if type(total) is int else 0,
            preview=redact(text) if redact else text,
            length_unit=unit if unit in _UNITS else "characters"))
    return found


def reply_snapshot(raw: list[Any]) -> list[list[Any]]:
    """A step reply's ``snapshot`` (``[[names], pickle], ...``), checked: the host
    keeps the pickles as bytes and only sends them back to a new worker."""
    return [[[str(n) for n in entry[0]], entry[1]] for entry in raw
            if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], list)
            and entry[0] and all(isinstance(n, str) for n in entry[0])
            and isinstance(entry[1], bytes)]


def reply_bindings(reply: Mapping[str, Any]) -> dict[str, tuple[Any, ...]]:
    """The ``bindings`` of a worker's reply, checked: ``{name: token}``."""
    raw = reply.get("bindings")
    if not isinstance(raw, dict):
        return {}
    found: dict[str, tuple[Any, ...]] = {}
    for name, token in raw.items():
        if isinstance(name, str) and isinstance(token, list) and token \
                and token[0] in ("host", "stub", "child"):
            found[name] = tuple(token)
    return found
