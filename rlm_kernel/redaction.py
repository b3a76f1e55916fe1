"""Secret values, and their redaction from everything that leaves the process.

**Which values are secret.**  This module keeps one registry per process, ``{value:
name}``, that only grows: a secret once seen stays secret, so model code that pops
``OPENAI_API_KEY`` out of ``os.environ`` in one step cannot print it in the next.  It
holds:

* the value of every environment variable whose name matches :data:`SECRET_NAME`
  (``OPENAI_API_KEY``, ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD`` ...),
  read when this module is imported and again whenever a :class:`Redactor` is made
  (:func:`remember_environment`);
* the values settings hand over (:func:`remember_settings`): a model fleet's keys
  (``rlm_kernel.models.router``: a literal ``api_key`` in ``litellm_params``, or
  ``os.environ/NAME`` whatever ``NAME`` is called, e.g. ``os.environ/LLM_CREDS``), and
  the ``api_key`` (and credential-like ``extra`` arguments) of a model client
  (``rlm_kernel.models.litellm_client``), whichever settings surface they came from;
* the password of every URL with credentials (``scheme://user:PASSWORD@host``: a
  server's ``api_base`` or ``base_url``, a proxy, a database URL), in any setting and in
  any environment variable whatever its name (:func:`url_passwords`), as written and
  percent-decoded;
* any value given to :func:`remember_secret`.

Values shorter than :data:`MIN_SECRET_CHARS` are never secret (``1``, ``true`` or
``local`` would redact half of any output).

**Redaction.**  A :class:`Redactor` replaces every secret value in a text by
``[redacted NAME]``; :func:`redact_data` does it for every text inside plain data (dicts,
lists, tuples) and inside this package's dataclasses (a run's result, its events, its
call records), so a new field of those is redacted without anyone naming it.  Where the
process's text leaves it (a run's result and events, ``summary()``, the command line's
output, the exported notebook and rlm log, the batch results file, the OpenTelemetry
spans), the boundary redacts it: docs/security.md lists them.

**Logs.**  The log records of this package's loggers (``rlm_kernel`` and every
``rlm_kernel.*``) are redacted where they are made, whatever handler writes them
(:func:`redact_log_records`, installed when the package is imported): a provider's
error quoting a key, logged with its traceback for a maintainer, keeps the traceback's
frames with the key replaced.

The pattern is built with ``re.escape`` and ``re.compile`` taken when the module is
imported: model code rebinding ``re.escape`` does not switch redaction off.  This module
imports only the standard library (every layer uses it, the isolated worker too).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["CREDENTIAL_KEY", "ENV_PREFIX", "LOGGER_NAME", "MIN_SECRET_CHARS",
           "RAW_VALUE_FIELDS", "Redactor", "SECRET_NAME", "known_secrets", "redact_data",
           "redact_log_record", "redact_log_records", "redact_text", "remember_environment",
           "remember_secret", "remember_settings", "url_passwords"]

SECRET_NAME = re.compile(
    r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)", re.IGNORECASE)
"""Names of environment variables whose values are secret (``OPENAI_API_KEY``,
``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD`` ...)."""
CREDENTIAL_KEY = re.compile(
    r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTHORIZATION)(_|$)",
    re.IGNORECASE)
"""Keys of settings whose values are secret: :data:`SECRET_NAME`'s words and
``authorization`` (litellm's ``api_key``, ``aws_secret_access_key``,
``aws_session_token``, ``azure_ad_token``, ``vertex_credentials``, ``client_secret``, a
header named ``Authorization``, ``redis_password`` of ``router_settings`` ...)."""
MIN_SECRET_CHARS = 8
"""The shortest value that is ever secret (characters)."""
ENV_PREFIX = "os.environ/"
"""How the litellm proxy's config (and a fleet file) names an environment variable's
value: ``os.environ/NAME``."""
RAW_VALUE_FIELDS = frozenset({"answer_value"})
"""Dataclass fields :func:`redact_data` leaves alone: the Python value model code handed
to ``FINAL`` is the user's data, not text (its text, ``answer``, is redacted, and so is
its JSON form wherever it is written)."""

_escape, _compile = re.escape, re.compile  # the functions as imported, not as rebound later
_seen: dict[str, str] = {}  # secret value -> name, every one seen by this process
_seen_lock = threading.Lock()
_pattern_cache: list[Any] = [-1, {}, None]  # [size of _seen, its copy, its pattern]


@functools.lru_cache(maxsize=4096)
def _secret_name(name: str) -> bool:
    """Whether a variable of this name holds a secret (:data:`SECRET_NAME`), cached: a
    redactor is made per event and per call, and the names rarely change."""
    return SECRET_NAME.search(name) is not None


_NETLOC = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^\s/?#]*)")


def url_passwords(text: str) -> list[str]:
    """The passwords of the URLs in ``text`` that carry credentials
    (``scheme://user:PASSWORD@host/...``, RFC 3986's userinfo, split as
    :func:`urllib.parse.urlsplit` does: the user ends at the first ``:``, the userinfo
    at the last ``@`` of the authority), each as written and, when it differs,
    percent-decoded; those shorter than :data:`MIN_SECRET_CHARS` left out.

    Args:
        text: any text (a setting's value, an environment variable's).
    """
    if "://" not in text or "@" not in text:
        return []
    from urllib.parse import unquote

    found: list[str] = []
    for match in _NETLOC.finditer(text):
        userinfo, at, _ = match.group(1).rpartition("@")
        _, colon, password = userinfo.partition(":")
        if not at or not colon:
            continue
        for form in (password, unquote(password)):
            if len(form) >= MIN_SECRET_CHARS and form not in found:
                found.append(form)
    return found


def _secrets(env: Mapping[str, str]) -> dict[str, str]:
    """``{value: name}`` of the secret variables of ``env``, and of the passwords of
    the URLs any variable holds (named ``NAME password``)."""
    found = {}
    for name in list(env):
        value = env.get(name)
        if not isinstance(value, str):
            continue
        if _secret_name(name):
            if len(value) >= MIN_SECRET_CHARS:
                found[value] = name
        elif "://" in value and "@" in value:
            for password in url_passwords(value):
                found.setdefault(password, f"{name} password")
    return found


def remember_secret(value: Any, name: str) -> bool:
    """Add ``value`` to the process's secrets, shown as ``[redacted name]``.

    Args:
        value: the secret; anything but a ``str`` of at least :data:`MIN_SECRET_CHARS`
            characters is ignored.
        name: what the redacted text calls it (a variable's name, a setting's key).

    Returns:
        True when ``value`` is (now) a secret.
    """
    if type(value) is not str or len(value) < MIN_SECRET_CHARS:
        return False
    with _seen_lock:
        _seen.setdefault(value, name)
    return True


def remember_settings(settings: Any, environ: Mapping[str, str] | None = None) -> int:
    """Remember the secrets a setting holds: every text under a credential-like key
    (:data:`CREDENTIAL_KEY`), in mappings and lists at any depth, and the password of
    every URL with credentials under any key (``api_base``, ``base_url``, a proxy's:
    :func:`url_passwords`).  A value ``os.environ/NAME`` stands for the variable
    ``NAME``'s value, whatever ``NAME`` is called (``os.environ/LLM_CREDS``).

    Args:
        settings: a mapping or list (a fleet's ``model_list`` and ``router_settings``,
            a client's arguments); other values are ignored.
        environ: where ``os.environ/NAME`` is read (default ``os.environ``).

    Returns:
        How many values were remembered (short ones are not secrets).
    """
    env = os.environ if environ is None else environ
    count, seen = 0, set()
    stack: list[tuple[str | None, Any]] = [(None, settings)]
    while stack:
        key, value = stack.pop()
        if type(value) is str:
            if value.startswith(ENV_PREFIX):
                variable = value[len(ENV_PREFIX):]
                value = env.get(variable)
                if not isinstance(value, str):
                    continue
                name: str | None = variable
            else:
                name = key
            for password in url_passwords(value):
                count += remember_secret(password, f"{name or 'url'} password")
            if key is not None and CREDENTIAL_KEY.search(key):
                count += remember_secret(value, name or key)
        elif isinstance(value, (Mapping, list, tuple)) and id(value) not in seen:
            seen.add(id(value))
            items = value.items() if isinstance(value, Mapping) else ((key, v) for v in value)
            stack.extend((str(k) if k is not None else None, v) for k, v in items)
    return count


def remember_environment() -> dict[str, str]:
    """Add the secrets of ``os.environ`` now to those seen before; return all of them
    (``{value: name}``)."""
    found = _secrets(os.environ)
    with _seen_lock:
        for value, name in found.items():
            _seen.setdefault(value, name)
        return dict(_seen)


def _known_pattern() -> tuple[dict[str, str], Any]:
    """The process's secrets after reading ``os.environ`` again, and their pattern
    (None when there is none), compiled once per set of secrets: the set only grows,
    so its size tells whether the last pattern still fits."""
    found = _secrets(os.environ)
    with _seen_lock:
        for value, name in found.items():
            _seen.setdefault(value, name)
        if _pattern_cache[0] != len(_seen):
            names = dict(_seen)
            _pattern_cache[:] = [len(names), names, _pattern(names)]
        return _pattern_cache[1], _pattern_cache[2]


def _pattern(secrets: Mapping[str, str]) -> Any:
    """One pattern of every value of ``secrets``, longest first (a value that holds
    another is replaced whole); None when there is none."""
    if not secrets:
        return None
    return _compile("|".join(_escape(v) for v in sorted(secrets, key=len, reverse=True)))


def known_secrets() -> dict[str, str]:
    """Every secret of the process (``{value: name}``): :func:`remember_environment`."""
    return remember_environment()


class Redactor:
    """Replaces secret values in text.

    Args:
        environ: None (the default): every secret the process knows
            (:func:`known_secrets`, read when the redactor is made); a mapping: only
            the secret-named variables of that mapping (tests, a given environment).

    Attributes:
        longest: characters of the longest secret value (0 when there is none).
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        if environ is None:
            secrets, self._pattern = _known_pattern()
        else:
            secrets = _secrets(environ)
            self._pattern = _pattern(secrets)
        self._names = secrets
        self._bytes_pattern: Any = None  # made at the first bytes :meth:`holds` reads
        self.longest = max(map(len, secrets), default=0)

    def __bool__(self) -> bool:
        return self._pattern is not None

    def outside_secrets(self, text: str, at: int, *, later: bool = True) -> int:
        """A place to cut ``text`` near ``at`` that splits no secret value: ``at``
        itself, or the end (``later``) or start of the secret value that spans it.  Each
        side of such a cut is then redacted whole.

        Args:
            text: the text to cut.
            at: the wanted cut (an index of ``text``).
            later: move a cut inside a secret to its end (True) or its start (False).
        """
        if self._pattern is None:
            return at
        for match in self._pattern.finditer(text):
            if match.start() >= at:
                break
            if at < match.end():
                return match.end() if later else match.start()
        return at

    def partial_at_end(self, text: str) -> int:
        """Characters at the end of ``text`` that begin a secret value without finishing
        it (0 when none do): a stream forwarding text in chunks holds them back until
        the next chunk shows whether the secret follows, so no chunk carries part of one.
        """
        best = 0
        for value in self._names:
            for size in range(min(len(value) - 1, len(text)), best, -1):
                if text.endswith(value[:size]):
                    best = size
                    break
        return best

    def holds(self, data: str | bytes) -> bool:
        """Whether ``data`` holds a secret value: in a text, or as its UTF-8 bytes in
        ``bytes`` (a pickle of an object that holds the secret as a ``str`` somewhere
        holds those bytes)."""
        if self._pattern is None or not data:
            return False
        if isinstance(data, str):
            return self._pattern.search(data) is not None
        if self._bytes_pattern is None:
            self._bytes_pattern = _compile(b"|".join(
                _escape(v.encode("utf-8", "surrogatepass"))
                for v in sorted(self._names, key=len, reverse=True)))
        return self._bytes_pattern.search(data) is not None

    def __call__(self, text: str) -> str:
        """``text`` with every secret value replaced by ``[redacted NAME]``."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda m: f"[redacted {self._names[m.group(0)]}]", text)


def redact_text(text: str) -> str:
    """``text`` with every secret the process knows replaced (a new :class:`Redactor`)."""
    return Redactor()(text) if text else text


def _ours(value: Any) -> bool:
    """A dataclass instance of this package (a result, an event, a call record)."""
    return dataclasses.is_dataclass(value) and not isinstance(value, type) \
        and type(value).__module__.startswith("rlm_kernel.")


def _parts(node: Any) -> list[Any] | None:
    """The parts of a container :func:`redact_data` walks into, or None for a leaf."""
    kind = type(node)
    if kind is list or kind is tuple:
        return list(node)
    if kind is dict:
        return [part for pair in node.items() for part in pair]
    if _ours(node):
        return [getattr(node, f.name) for f in dataclasses.fields(node)
                if f.name not in RAW_VALUE_FIELDS]
    return None


def _rebuilt(node: Any, parts: list[Any]) -> Any:
    """``node`` with its parts replaced (a new list, tuple or dict; a dataclass of this
    package changed in place, or copied when it is frozen)."""
    kind = type(node)
    if kind is list:
        return parts
    if kind is tuple:
        return tuple(parts)
    if kind is dict:
        return dict(zip(parts[0::2], parts[1::2], strict=True))
    names = [f.name for f in dataclasses.fields(node) if f.name not in RAW_VALUE_FIELDS]
    changed = {n: p for n, p in zip(names, parts, strict=True) if p is not getattr(node, n)}
    params = getattr(type(node), "__dataclass_params__", None)
    if params is not None and params.frozen:
        init = {f.name for f in dataclasses.fields(node) if f.init}
        copy = dataclasses.replace(node, **{n: p for n, p in changed.items() if n in init})
        for name, part in changed.items():
            if name not in init:
                object.__setattr__(copy, name, part)
        return copy
    for name, part in changed.items():
        setattr(node, name, part)
    return node


def redact_data(value: Any, redact: Redactor | None = None) -> Any:
    """``value`` with every secret replaced in every text it holds.

    Walks ``str``, ``list``, ``tuple`` and ``dict`` (exactly those types: a subclass
    from model code is left as it is, its methods never run on the host; dict keys
    too) and this package's dataclasses (results, events, call records; their
    :data:`RAW_VALUE_FIELDS` are left alone), at any depth, without recursion, and
    once per object on the path (a list that holds itself is not walked again).

    Args:
        value: the data.
        redact: the redactor (default: a new :class:`Redactor` of every known secret).

    Returns:
        ``value`` itself when nothing in it changed; else a copy in which each changed
        list, tuple and dict is new and each changed dataclass of this package is
        changed in place (a frozen one is copied).
    """
    redact = Redactor() if redact is None else redact
    if not redact:
        return value
    if type(value) is str:
        return redact(value)
    parts = _parts(value)
    if parts is None:
        return value
    # frames: [node, its parts, next index, whether a part changed]
    stack: list[list[Any]] = [[value, parts, 0, False]]
    active = {id(value)}
    done: Any = value
    while stack:
        frame = stack[-1]
        node, items, index, _ = frame
        if index == len(items):
            stack.pop()
            active.discard(id(node))
            done = _rebuilt(node, items) if frame[3] else node
            if stack:
                parent = stack[-1]
                if done is not parent[1][parent[2]]:
                    parent[1][parent[2]], parent[3] = done, True
                parent[2] += 1
            continue
        item = items[index]
        if type(item) is str:
            new = redact(item)
            if new != item:
                items[index], frame[3] = new, True
            frame[2] += 1
            continue
        inner = _parts(item) if id(item) not in active else None
        if inner is None:
            frame[2] += 1
            continue
        active.add(id(item))
        stack.append([item, inner, 0, False])
    return done


LOGGER_NAME = "rlm_kernel"
"""The package's logger: its records and those of its children (``rlm_kernel.engine.run``
...) are redacted (:func:`redact_log_records`)."""

_exception_text = logging.Formatter().formatException  # logging's own traceback text


def redact_log_record(record: logging.LogRecord, redact: Redactor | None = None) -> None:
    """Replace every secret in what ``record`` will print, in place.

    * Its message: when the text made of ``msg`` and ``args`` holds a secret, ``msg``
      becomes that text redacted and ``args`` empty (a message whose ``args`` do not
      fit it becomes its ``msg`` and ``args`` as text, redacted: logging would print
      them raw as a "Logging error").
    * Its exception: when the traceback's text (logging's own, with the chain of
      causes) holds a secret, ``exc_text`` becomes that text redacted and ``exc_info``
      is dropped, so a handler that formats the exception itself cannot print the
      secret; :class:`logging.Formatter` prints ``exc_text``, the frames included.  A
      record whose traceback holds none keeps its ``exc_info``.
    * Its ``exc_text`` and ``stack_info`` when already set.

    Args:
        record: a log record (from any logger).
        redact: the redactor (default: a new :class:`Redactor` of every known secret).
    """
    redact = Redactor() if redact is None else redact
    if not redact:
        return
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - arguments that do not fit the message
        message = f"{record.msg} (arguments: {record.args!r})"
    clean = redact(message)
    if clean != message:
        record.msg, record.args = clean, ()
    if record.exc_info and record.exc_info[1] is not None:
        text = _exception_text(record.exc_info)
        clean = redact(text)
        if clean != text:
            record.exc_text, record.exc_info = clean, None
    if record.exc_text:
        record.exc_text = redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redact(record.stack_info)


def redact_log_records(logger_name: str = LOGGER_NAME) -> None:
    """Make every log record of ``logger_name`` and its children redacted as it is
    made (:func:`redact_log_record`), whichever handlers write it (this package
    installs none; an application's, pytest's, ipykernel's ...).

    Uses logging's record factory (:func:`logging.setLogRecordFactory`), the hook
    every logger calls to make a record: the factory in place is kept and called first,
    and records of other loggers are left as they are.  A filter would not do: a
    logger's filters see only the records logged to that very logger, not those of its
    children (the package's modules log to ``rlm_kernel.<module>``).  Installed once
    per ``logger_name``; calling it again changes nothing.

    Args:
        logger_name: the logger whose records (and its children's) are redacted.
    """
    previous = logging.getLogRecordFactory()
    if logger_name in getattr(previous, "redacted_loggers", ()):
        return
    prefix = logger_name + "."

    def make_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if record.name == logger_name or record.name.startswith(prefix):
            redact_log_record(record)
        return record

    make_record.redacted_loggers = (  # type: ignore[attr-defined]
        *getattr(previous, "redacted_loggers", ()), logger_name)
    logging.setLogRecordFactory(make_record)


remember_environment()  # the secrets the process started with
