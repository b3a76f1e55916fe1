"""Typed answers: the type a run's ``FINAL`` value must have, told to the model and
checked by the host.

``RLM.run(..., output_type=int)``, ``%%rlm --returns "list[str]"`` and ``rlm run
--returns TYPE`` make an :class:`AnswerType`.  The model is told the type
(:meth:`AnswerType.prompt_line`); a ``FINAL`` value is validated and coerced with
pydantic's :class:`~pydantic.TypeAdapter` (lax mode: ``"42"`` -> ``42``, a tuple -> a
list, a dict -> a dataclass or model), or, for a JSON Schema, with ``jsonschema``; a
value that fails comes back to the model as its own step with the validation errors
(:class:`AnswerTypeError`), after fast-rlm's ``output_schema`` retry and DSPy's typed
signatures.

Types can be given as Python objects (``int``, ``list[str]``, ``dict[str, int]``,
``Literal["a", "b"]``, a dataclass, a ``TypedDict``, a pydantic model) or as text
(:func:`parse_type`): a type expression over builtins, ``typing`` names and names the
caller supplies (the notebook's classes), or the path of a JSON Schema file.
"""

from __future__ import annotations

import ast
import json
import time
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...executors import RemoteValue, guarded_repr, time_limit, user_interrupts_kept
from ..prompts import answer_type_line
from .nesting import MAX_DEPTH, nesting_problem

__all__ = ["AnswerType", "AnswerTypeError", "as_answer_type", "parse_type"]

VALIDATE_SECONDS = 5.0
"""Seconds one validation may take: the value is the model's object, and validating it
runs its code (``__iter__``, ``__len__`` ...)."""

MAX_ERRORS = 5
"""Validation errors shown to the model (the first ones)."""

_TYPE_NAMES: dict[str, Any] = {
    **{t.__name__: t for t in (int, float, bool, str, bytes, list, dict, tuple, set,
                               frozenset)},
    "None": None,
    **{name: getattr(typing, name) for name in ("Any", "Optional", "Union", "Literal",
                                                "List", "Dict", "Tuple", "Set")},
}
"""Names a type written as text may use, besides those the caller supplies."""


class AnswerTypeError(ValueError):
    """A ``FINAL`` value is not of the asked type; the message lists why (for the model
    and the user), e.g. ``"expected list[str]: [1]: Input should be a valid string"``."""


class AnswerType:
    """The type a run's answer must have.

    Args:
        spec: a Python type or type expression (``int``, ``list[str]``, a dataclass, a
            ``TypedDict``, a pydantic model ...), or a JSON Schema as a dict.
        name: how the type is written for the model and in records (default: from the
            spec: ``list[str]``, the class name, the schema's ``title``).

    Raises:
        TypeError: pydantic cannot build a validator for ``spec``.
        ValueError: ``spec`` is a dict that is not a valid JSON Schema.
    """

    def __init__(self, spec: Any, name: str | None = None) -> None:
        self.spec = spec
        self.name = name or _type_name(spec)
        self._adapter: Any = None
        self._validator: Any = None
        if isinstance(spec, dict):
            import jsonschema

            try:
                cls = jsonschema.validators.validator_for(spec)
                cls.check_schema(spec)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
            self._validator = cls(spec)
            self.schema: dict[str, Any] = spec
        else:
            from pydantic import PydanticUserError, TypeAdapter

            try:
                self._adapter = TypeAdapter(spec)
            except (PydanticUserError, TypeError, AttributeError) as exc:
                # PydanticSchemaGenerationError is a PydanticUserError; so is a
                # typing.TypedDict on Python < 3.12 (the message says to use
                # typing_extensions.TypedDict)
                reason = str(exc).split("\n\n", 1)[0]
                raise TypeError(f"cannot check answers of type {self.name}: {reason}") \
                    from None
            try:
                self.schema = self._adapter.json_schema()
            except Exception:  # noqa: BLE001 - a type with no JSON form still validates
                self.schema = {}

    def __repr__(self) -> str:
        return f"AnswerType({self.name})"

    # -- what the model is told -------------------------------------------------------
    def prompt_line(self) -> str:
        """The task message's line about the answer's type: the type as written, and
        the JSON Schema when the type has fields (a model, a dataclass, a schema)."""
        schema = json.dumps(self.schema, separators=(",", ":")) \
            if isinstance(self.spec, dict) or _has_fields(self.schema) else None
        return answer_type_line(self.name, schema)

    # -- checking a value ---------------------------------------------------------------
    def validate(self, value: Any) -> Any:
        """``value`` as the type: coerced where lax validation allows, or parsed from a
        text (JSON, then a Python literal) when the text itself does not validate.

        Raises:
            AnswerTypeError: the value (and its text's parse) fails; the message gives
                the type and the first :data:`MAX_ERRORS` errors.  A value that stayed in
                an isolated REPL (no data form: a model-made class, more than a million
                items) fails with the reason it could not leave; one nested deeper than
                :data:`~rlm_kernel.engine.answer.nesting.MAX_DEPTH` levels, or that
                holds itself, with that reason (it has no JSON form), before any
                validator walks it.
        """
        if isinstance(value, RemoteValue):
            raise AnswerTypeError(
                f"expected {self.name}: the value (a {value.type_name}) could not leave the "
                f"isolated REPL ({value.note}); FINAL a value made of plain data")
        first = self._attempt(value)
        if not isinstance(first, AnswerTypeError):
            return first
        if type(value) is str:
            for parse in (json.loads, ast.literal_eval):
                try:
                    parsed = parse(value.strip())
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    continue
                again = self._attempt(parsed)
                if not isinstance(again, AnswerTypeError):
                    return again
        raise first

    def holders(self, variables: Mapping[str, Any], *, limit: int = 3,
                seconds: float = 1.0) -> list[str]:
        """The names among ``variables`` whose values are of this type, newest first
        (a namespace keeps names in the order they were first bound), for a refused
        ``FINAL``'s message: a small model that keeps passing the wrong variable is
        told which of its own variables would do.

        Args:
            variables: name -> value, oldest first (e.g. the run's data variables).
            limit: at most this many names.
            seconds: the names are checked until this much time (seconds) is spent.
        """
        found: list[str] = []
        deadline = time.monotonic() + seconds
        for name, value in reversed(list(variables.items())):
            if len(found) >= limit or time.monotonic() > deadline:
                break
            if not isinstance(self._attempt(value), AnswerTypeError):
                found.append(name)
        return found

    def _attempt(self, value: Any) -> Any:
        """The validated value, or the :class:`AnswerTypeError` (returned, not raised)."""
        try:
            with time_limit(VALIDATE_SECONDS):
                problem = nesting_problem(value)
                if problem is not None:
                    return self._too_deep(problem)
                if self._adapter is not None:
                    return self._adapter.validate_python(value)
                self._check_schema(value)
                return value
        except AnswerTypeError as exc:
            return exc
        except RecursionError:  # a part the walk does not enter (an object's own repr)
            return self._too_deep("the answer is nested too deep to check")
        except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError, or the value's code
            return AnswerTypeError(f"expected {self.name}: {_errors(exc)}")
        except BaseException as exc:  # noqa: BLE001 - SystemExit etc. raised by the value's code
            return AnswerTypeError(f"expected {self.name}: validating the value raised "
                                   f"{type(exc).__name__}")

    def _check_schema(self, value: Any) -> None:
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            shown = "; ".join(f"{_path(e.path)}{e.message}" for e in errors[:MAX_ERRORS])
            more = f" (and {len(errors) - MAX_ERRORS} more)" if len(errors) > MAX_ERRORS else ""
            raise AnswerTypeError(f"expected {self.name}: {shown}{more}")

    def _too_deep(self, problem: str) -> AnswerTypeError:
        """The refusal of a value whose nesting has no JSON form (``problem``: what
        :func:`~rlm_kernel.engine.answer.nesting.nesting_problem` said)."""
        return AnswerTypeError(
            f"expected {self.name}: {problem}; FINAL a value of at most {MAX_DEPTH} "
            "levels of lists, dicts and objects, made of plain data")

    def to_json(self, value: Any) -> Any:
        """A validated value as JSON-ready data (models and dataclasses as dicts, sets
        as lists); a value with no JSON form of its type's (an object ``object`` or
        ``Any`` took) as its guarded text (:func:`~rlm_kernel.executors.guarded_repr`).

        Raises:
            AnswerTypeError: the value is nested deeper than
                :data:`~rlm_kernel.engine.answer.nesting.MAX_DEPTH` levels or holds
                itself (the JSON form cannot be built: the answer is refused).
        """
        problem = None
        with user_interrupts_kept():
            try:
                with time_limit(VALIDATE_SECONDS):
                    problem = nesting_problem(value)
                    if problem is None:
                        if self._adapter is not None:
                            return self._adapter.dump_python(value, mode="json")
                        return json.loads(json.dumps(value, default=str))
            except RecursionError:  # deeper than the walk saw (past its node budget)
                problem = "the answer is nested too deep for its JSON form"
            except BaseException:  # noqa: BLE001 - no JSON form, or the value's code failed
                pass
        if problem is not None:
            raise self._too_deep(problem)
        return guarded_repr(value)


def _path(path: Any) -> str:
    parts = "".join(f"[{p!r}]" for p in path)
    return f"{parts}: " if parts else ""


def _errors(exc: Exception) -> str:
    """pydantic's errors as one short line each (``[0]: Input should be ...``)."""
    listing = getattr(exc, "errors", None)
    if not callable(listing):
        return f"{type(exc).__name__}: {exc}"
    try:
        errors = listing(include_url=False)
    except Exception:  # noqa: BLE001
        return str(exc)
    shown = [f"{_path(e.get('loc', ()))}{e.get('msg', '')} (got {_short(e.get('input'))})"
             for e in errors[:MAX_ERRORS]]
    more = f" (and {len(errors) - MAX_ERRORS} more)" if len(errors) > MAX_ERRORS else ""
    return "; ".join(shown) + more


def _short(value: Any) -> str:
    from ...executors import guarded_repr

    return guarded_repr(value, max_chars=60)


def _has_fields(schema: Mapping[str, Any]) -> bool:
    return bool(schema.get("properties") or schema.get("$defs"))


def _type_name(spec: Any) -> str:
    if isinstance(spec, dict):
        return str(spec.get("title") or "JSON Schema")
    if isinstance(spec, type) and not typing.get_args(spec):
        return spec.__name__
    text = repr(spec)
    return text.replace("typing.", "")


def parse_type(text: str, names: Mapping[str, Any] | None = None) -> AnswerType:
    """An :class:`AnswerType` from its text: a JSON Schema file's path (``*.json``), or a
    type expression such as ``int``, ``list[str]``, ``dict[str, int]``, ``str | None``,
    ``Literal["yes", "no"]``, ``tuple[str, int]`` or the name of a class in ``names``.

    The expression is read with :mod:`ast` and only names, subscripts, ``|``, tuples,
    lists and constants are allowed (no calls, no attributes): names come from
    ``names`` first (e.g. the notebook's namespace), then builtins' types and
    ``typing``'s ``Any``, ``Optional``, ``Union``, ``Literal``, ``List`` ...

    Raises:
        ValueError: unreadable text, an unknown name, a file that is not a JSON
            Schema; the message says which.
        TypeError: a type pydantic cannot validate.
    """
    text = text.strip()
    if not text:
        raise ValueError("no type given")
    if text.endswith(".json") or Path(text).suffix == ".json":
        path = Path(text).expanduser()
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"cannot read the JSON Schema {text}: {exc.strerror}") from None
        except ValueError as exc:
            raise ValueError(f"{text} is not JSON: {exc}") from None
        if not isinstance(schema, dict):
            raise ValueError(f"{text} is not a JSON Schema (not an object)")
        return AnswerType(schema, name=str(schema.get("title") or path.stem))
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError(f"cannot read the type {text!r}") from None
    scope = {**_TYPE_NAMES, **(names or {})}
    return AnswerType(_build(tree.body, scope, text), name=text)


def _build(node: ast.AST, scope: Mapping[str, Any], text: str) -> Any:
    """The type a whitelisted expression node stands for."""
    if isinstance(node, ast.Name):
        if node.id not in scope:
            raise ValueError(f"unknown type name {node.id!r} in {text!r}")
        return scope[node.id]
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Subscript):
        base = _build(node.value, scope, text)
        inner = node.slice
        args = tuple(_build(e, scope, text) for e in inner.elts) \
            if isinstance(inner, ast.Tuple) else (_build(inner, scope, text),)
        try:
            return base[args] if len(args) > 1 else base[args[0]]
        except TypeError as exc:
            raise ValueError(f"cannot read the type {text!r}: {exc}") from None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _build(node.left, scope, text), _build(node.right, scope, text)
        return typing.Union[left, right]  # noqa: UP007 - None | int is not valid Python
    if isinstance(node, (ast.Tuple, ast.List)):
        return [_build(e, scope, text) for e in node.elts]
    raise ValueError(f"cannot read the type {text!r}: only names, [], | and constants "
                     "are allowed")


def as_answer_type(spec: Any, names: Mapping[str, Any] | None = None) -> AnswerType | None:
    """An :class:`AnswerType` from what a caller gave: None (no type), an
    :class:`AnswerType`, a text (:func:`parse_type`, with ``names``), a JSON Schema
    dict, or a Python type.

    Raises:
        ValueError, TypeError: as :func:`parse_type` and :class:`AnswerType`.
    """
    if spec is None or isinstance(spec, AnswerType):
        return spec
    if isinstance(spec, str):
        return parse_type(spec, names)
    return AnswerType(spec)
