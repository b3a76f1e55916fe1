"""The isolated executor's channel: length-prefixed msgpack frames and the data form of values.

Everything the worker sends is untrusted: model code shares the worker's address space,
so it can forge any frame.  The host therefore reads only data, never code:

* a **frame** is a 4-byte big-endian length and that many bytes of msgpack
  (`msgpack <https://msgpack.org>`_, the ``msgpack`` package); the reader refuses a
  length over its cap before reading the body, and every read has a deadline
  (:meth:`Channel.receive`);
* a **message** is a msgpack map with string keys (``op`` names it; see
  ``docs/protocol.md``, "The isolated executor's channel");
* a **value** crosses in its *data form* (:func:`encode_value` in the worker,
  :func:`decode_value` on the host): msgpack's own types (``None``, ``bool``, ``int``,
  ``float``, ``str``, ``bytes``, lists, maps) plus extension types for tuples, sets,
  ``complex``, big integers, ``datetime`` values, ``Decimal``, ``Fraction``, ``UUID``,
  paths, the ``collections`` containers and numeric numpy arrays, and Arrow IPC for
  pandas frames when ``pyarrow`` is installed on both sides.  A value with no data
  form (a compiled pattern, a model-made class, a DAG that expands past the item cap)
  stays in the worker and the host gets its description.

Decoding builds only the types listed above, with caps on bytes (the frame), nesting
depth (msgpack's own stack limit inside one container tree, :data:`MAX_DEPTH` extension
types one inside the other, and when encoding) and items (:data:`MAX_ITEMS`), so a
40-byte message cannot make the host allocate gigabytes.  Items are counted before
they are built wherever a value's size on the host is not bounded by its bytes: an
Arrow stream's declared rows, columns, nested children and dictionaries
(:mod:`~rlm_kernel.executors.arrow_frames`, which also refuses compressed bodies and
the layouts a frame is never sent as), a numpy array's elements; an int or a
``Decimal`` past :data:`_MAX_DIGITS` digits (before its point) has no data form.
The host's own messages to the worker use the same frames; inputs may carry pickles
there (the worker trusts its host).
"""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import pathlib
import select
import socket
import struct
import time
import uuid
from collections.abc import Callable
from typing import Any

import msgpack

from .arrow_frames import ArrowRefused, check_schema, read_frame, stream_items

__all__ = ["Channel", "ChannelClosed", "ProtocolError", "NotData", "encode_value",
           "decode_value", "decode_counted", "pack", "unpack", "MAX_ITEMS", "MAX_DEPTH", "MAX_VALUE_BYTES",
           "HEADER"]

HEADER = struct.Struct(">I")
"""A frame's length prefix: 4 bytes, big-endian (so no frame is over 4 GiB)."""
MAX_ITEMS = 1_000_000
"""Most containers' items and scalars one value may hold in its data form."""
MAX_DEPTH = 100
"""Deepest nesting of containers in a value's data form."""
MAX_VALUE_BYTES = 32 << 20
"""Largest data form of one value (bytes); a larger value stays in the worker."""
_MAX_DIGITS = 10_000  # an int past this many digits has no data form
_C_STACK_LEVELS = 8  # nested extension types decoded by unpackb (see _Decoder.loads)

# extension type codes (msgpack reserves negative codes for itself)
_TUPLE, _SET, _FROZENSET, _COMPLEX, _BIGINT, _DATETIME, _DATE, _TIME, _TIMEDELTA = range(1, 10)
_DECIMAL, _FRACTION, _UUID, _PATH, _NDARRAY, _ORDEREDDICT, _COUNTER, _DEQUE, _ARROW = \
    range(10, 19)
_BYTEARRAY, _DEFAULTDICT = 19, 20


class ProtocolError(Exception):
    """The peer sent bytes that are not a message of the protocol (a forged or broken
    frame, a frame over the cap, data over a cap, a type that is not data)."""


class ChannelClosed(Exception):
    """The peer closed the channel (its process is gone)."""


class NotData(Exception):
    """A value has no data form (its type, or a cap); the message says why."""


# -- values --------------------------------------------------------------------------------
class _Encoder:
    """One value's walk to its data form, counting items against :data:`MAX_ITEMS`."""

    def __init__(self, max_items: int) -> None:
        self.left = max_items

    def walk(self, value: Any, depth: int = 0) -> Any:
        self.left -= 1
        if self.left < 0:
            raise NotData("more than the item limit (shared references count each time)")
        if depth > MAX_DEPTH:
            raise NotData(f"nested deeper than {MAX_DEPTH} levels")
        kind = type(value)
        if value is None or kind in (bool, float, str, bytes):
            return value
        if kind is int:
            if -(1 << 63) <= value < 1 << 64:
                return value
            text = _int_text(value)
            return msgpack.ExtType(_BIGINT, text.encode())
        if kind is list:
            return [self.walk(v, depth + 1) for v in value]
        if kind is dict:
            return {self.key(k, depth): self.walk(v, depth + 1) for k, v in value.items()}
        if kind is tuple:
            return self.ext(_TUPLE, [self.walk(v, depth + 1) for v in value])
        if kind is set or kind is frozenset:
            items = [self.key(v, depth) for v in value]
            return self.ext(_SET if kind is set else _FROZENSET, items)
        return self.other(value, depth)

    def key(self, value: Any, depth: int) -> Any:
        if isinstance(value, (list, dict, set, bytearray)):
            raise NotData(f"a {type(value).__name__} cannot be a key")
        return self.walk(value, depth + 1)

    def ext(self, code: int, tree: Any) -> msgpack.ExtType:
        return msgpack.ExtType(code, _packb(tree))

    def other(self, value: Any, depth: int) -> Any:
        kind = type(value)
        if kind is complex:
            return self.ext(_COMPLEX, [value.real, value.imag])
        if kind is bytearray:
            return msgpack.ExtType(_BYTEARRAY, bytes(value))
        if kind is datetime.datetime:
            return self.ext(_DATETIME, value.isoformat())
        if kind is datetime.date:
            return self.ext(_DATE, value.isoformat())
        if kind is datetime.time:
            return self.ext(_TIME, value.isoformat())
        if kind is datetime.timedelta:
            return self.ext(_TIMEDELTA, [value.days, value.seconds, value.microseconds])
        if kind is decimal.Decimal:
            if value.is_finite() and value.adjusted() >= _MAX_DIGITS:
                raise NotData(f"a Decimal of over {_MAX_DIGITS} digits before its point")
            return self.ext(_DECIMAL, str(value))
        if kind is fractions.Fraction:
            return self.ext(_FRACTION, [_int_text(value.numerator),
                                        _int_text(value.denominator)])
        if kind is uuid.UUID:
            return msgpack.ExtType(_UUID, value.bytes)
        if kind in (pathlib.PurePosixPath, pathlib.PosixPath):
            return self.ext(_PATH, str(value))
        if kind is collections.OrderedDict:
            return self.ext(_ORDEREDDICT, [[self.key(k, depth), self.walk(v, depth + 1)]
                                           for k, v in value.items()])
        if kind is collections.defaultdict:
            return self.ext(_DEFAULTDICT, [[self.key(k, depth), self.walk(v, depth + 1)]
                                           for k, v in value.items()])
        if kind is collections.Counter:
            return self.ext(_COUNTER, [[self.key(k, depth), self.walk(v, depth + 1)]
                                       for k, v in value.items()])
        if kind is collections.deque:
            return self.ext(_DEQUE, [self.walk(v, depth + 1) for v in value])
        module = getattr(kind, "__module__", "") or ""
        if module == "numpy" and hasattr(value, "item") and getattr(value, "shape", None) == ():
            return self.walk(value.item(), depth)  # a numpy scalar: the Python one
        if module == "numpy" and kind.__name__ == "ndarray":
            return self.array(value)
        if module.startswith("pandas") and kind.__name__ == "DataFrame":
            return self.frame(value)
        raise NotData(f"{kind.__module__}.{kind.__qualname__} has no data form")

    def array(self, value: Any) -> msgpack.ExtType:
        if value.dtype.kind not in "biufcSU" or value.dtype.hasobject:
            raise NotData(f"a numpy array of {value.dtype} has no data form")
        self.left -= value.size
        if self.left < 0:
            raise NotData("more than the item limit")
        return self.ext(_NDARRAY, [value.dtype.str, list(value.shape), value.tobytes()])

    def frame(self, value: Any) -> msgpack.ExtType:
        try:
            import pyarrow as pa
        except ImportError:
            raise NotData("a pandas DataFrame crosses as Arrow IPC: pyarrow is not "
                          "installed") from None
        self.left -= int(value.size)
        if self.left < 0:
            raise NotData("more than the item limit")
        try:
            table = pa.Table.from_pandas(value)
            check_schema(table.schema)
        except ArrowRefused as exc:
            raise NotData(f"this DataFrame has no data form: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - columns Arrow cannot hold
            raise NotData(f"this DataFrame has no Arrow form ({exc})") from None
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        data = sink.getvalue().to_pybytes()
        # the host counts what the stream declares (nested values too): the same here
        self.left -= stream_items(data) - int(value.size)
        if self.left < 0:
            raise NotData("more than the item limit")
        return msgpack.ExtType(_ARROW, data)


def _int_text(value: int) -> str:
    try:
        text = str(value)
    except ValueError:  # over sys.int_info's digit limit
        raise NotData("an int with too many digits") from None
    if len(text) > _MAX_DIGITS:
        raise NotData(f"an int of over {_MAX_DIGITS} digits")
    return text


def _packb(tree: Any) -> bytes:
    # lone surrogates (text decoded with surrogateescape ...) are data too
    return msgpack.packb(tree, use_bin_type=True, unicode_errors="surrogatepass")


def encode_value(value: Any, *, max_items: int = MAX_ITEMS,
                 max_bytes: int = MAX_VALUE_BYTES) -> bytes:
    """The data form of ``value`` as msgpack bytes (in the worker).

    Args:
        value: any object; shared references are written out each time they occur.
        max_items: most items and scalars in all (see :data:`MAX_ITEMS`).
        max_bytes: most bytes of the result.

    Raises:
        NotData: ``value`` (or something in it) has no data form, or is over a cap.
    """
    try:
        data = _packb(_Encoder(max_items).walk(value))
    except RecursionError:
        raise NotData(f"nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, OverflowError, TypeError) as exc:
        raise NotData(str(exc)) from None
    if len(data) > max_bytes:
        raise NotData(f"its data form is {len(data):,} bytes, over the limit of "
                      f"{max_bytes:,}")
    return data


class _Decoder:
    """One value's decoding (on the host), counting items against a cap."""

    def __init__(self, max_items: int, max_bytes: int) -> None:
        self.left, self.max_bytes = max_items, max_bytes
        self.depth = 0  # extension types being decoded, one inside the other

    def count(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise ProtocolError("a value with more items than the limit")

    def list_hook(self, items: list[Any]) -> list[Any]:
        self.count(len(items) + 1)
        return items

    def pairs_hook(self, pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
        self.count(len(pairs) + 1)
        return dict(pairs)

    def loads(self, data: bytes) -> Any:
        options = {"raw": False, "use_list": True, "strict_map_key": False,
                   "unicode_errors": "surrogatepass", "list_hook": self.list_hook,
                   "object_pairs_hook": self.pairs_hook, "ext_hook": self.ext_hook,
                   "max_array_len": max(self.left, 0), "max_map_len": max(self.left, 0)}
        if self.depth < _C_STACK_LEVELS:
            return msgpack.unpackb(data, **options)
        # unpackb keeps its ~40 KB parse stack on the C stack, once per nested extension
        # type: past a few levels an Unpacker (its stack on the heap) decodes instead
        unpacker = msgpack.Unpacker(None, max_buffer_size=max(len(data), 1), **options)
        unpacker.feed(data)
        value = unpacker.unpack()
        if unpacker.tell() != len(data):
            raise ProtocolError("a value with bytes after its end")
        return value

    def ext_hook(self, code: int, data: bytes) -> Any:  # noqa: PLR0911, PLR0912 - one per type
        self.count(1)
        if self.depth > MAX_DEPTH:
            raise ProtocolError(f"a value nested deeper than {MAX_DEPTH} levels")
        self.depth += 1
        try:
            return self.ext_value(code, data)
        finally:
            self.depth -= 1

    def ext_value(self, code: int, data: bytes) -> Any:  # noqa: PLR0911, PLR0912 - one per type
        if code == _BIGINT:
            text = data.decode("ascii")
            if len(text) > _MAX_DIGITS + 1:
                raise ProtocolError("an int with too many digits")
            return int(text)
        if code == _BYTEARRAY:
            return bytearray(data)
        if code == _UUID:
            return uuid.UUID(bytes=data)
        if code == _ARROW:
            return _arrow_frame(data, self.count)
        tree = self.loads(data)
        if code == _TUPLE:
            return tuple(tree)
        if code == _SET:
            return set(tree)
        if code == _FROZENSET:
            return frozenset(tree)
        if code == _COMPLEX:
            return complex(float(tree[0]), float(tree[1]))
        if code == _DATETIME:
            return datetime.datetime.fromisoformat(str(tree))
        if code == _DATE:
            return datetime.date.fromisoformat(str(tree))
        if code == _TIME:
            return datetime.time.fromisoformat(str(tree))
        if code == _TIMEDELTA:
            return datetime.timedelta(days=int(tree[0]), seconds=int(tree[1]),
                                      microseconds=int(tree[2]))
        if code == _DECIMAL:
            return _decimal(tree)
        if code == _FRACTION:
            return fractions.Fraction(_int(tree[0]), _int(tree[1]))
        if code == _PATH:
            return pathlib.PurePosixPath(str(tree))
        if code in (_ORDEREDDICT, _DEFAULTDICT, _COUNTER):
            kinds: dict[int, Callable[[dict[Any, Any]], Any]] = {
                _ORDEREDDICT: collections.OrderedDict, _COUNTER: collections.Counter,
                _DEFAULTDICT: lambda pairs: collections.defaultdict(None, pairs)}
            return kinds[code]({k: v for k, v in tree})
        if code == _DEQUE:
            return collections.deque(tree)
        if code == _NDARRAY:
            return _array(tree, self.count)
        raise ProtocolError(f"unknown extension type {code}")


def _int(text: Any) -> int:
    """An int from its decimal text, refused past :data:`_MAX_DIGITS` digits."""
    text = str(text)
    if len(text) > _MAX_DIGITS + 1:
        raise ProtocolError("an int with too many digits")
    return int(text)


def _decimal(text: Any) -> decimal.Decimal:
    """A Decimal from its text, refused past :data:`_MAX_DIGITS` digits (its
    coefficient, or the integer digits its exponent gives it: ``int()`` of it would
    cost the host what an int that long costs)."""
    text = str(text)
    if len(text) > _MAX_DIGITS + 32:
        raise ProtocolError("a Decimal with too many digits")
    value = decimal.Decimal(text)
    if value.is_finite() and value.adjusted() >= _MAX_DIGITS:
        raise ProtocolError("a Decimal with too many digits")
    return value


def _array(tree: Any, charge: Callable[[int], None]) -> Any:
    import numpy as np

    dtype, shape, data = np.dtype(str(tree[0])), tuple(int(n) for n in tree[1]), tree[2]
    if dtype.kind not in "biufcSU" or dtype.hasobject:
        raise ProtocolError(f"a numpy array of {dtype} is not data")
    count = 1
    for n in shape:
        if n < 0:
            raise ProtocolError("a numpy array of negative shape")
        count *= n
    if not isinstance(data, bytes) or count * dtype.itemsize != len(data):
        raise ProtocolError("a numpy array whose bytes do not match its shape")
    charge(count)
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def _arrow_frame(data: bytes, charge: Callable[[int], None]) -> Any:
    """A pandas frame from an Arrow IPC stream, its declared items charged first
    (:func:`~rlm_kernel.executors.arrow_frames.read_frame`)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ProtocolError("an Arrow table, and pyarrow is not installed") from None
    try:
        return read_frame(data, charge)
    except ArrowRefused as exc:
        raise ProtocolError(str(exc)) from None


def decode_value(data: bytes, *, max_items: int = MAX_ITEMS,
                 max_bytes: int = MAX_VALUE_BYTES) -> Any:
    """Build a value from its data form (on the host; ``data`` is untrusted).

    Args:
        data: msgpack bytes made by :func:`encode_value` (or forged).
        max_items: most items and scalars accepted in all.
        max_bytes: most bytes accepted.

    Raises:
        ProtocolError: ``data`` is not a data form, or is over a cap.
    """
    return decode_counted(data, max_items=max_items, max_bytes=max_bytes)[0]


def decode_counted(data: bytes, *, max_items: int = MAX_ITEMS,
                   max_bytes: int = MAX_VALUE_BYTES) -> tuple[Any, int]:
    """:func:`decode_value`, and the items it counted against ``max_items`` (containers
    and their members, extension values, Arrow cells): with ``len(data)``, a measure of
    what the value holds on the host.

    Raises:
        ProtocolError: as :func:`decode_value`.
    """
    if not isinstance(data, bytes) or len(data) > max_bytes:
        raise ProtocolError("a value that is not bytes, or over the byte limit")
    decoder = _Decoder(max_items, max_bytes)
    try:
        return decoder.loads(data), max_items - decoder.left
    except ProtocolError:
        raise
    except Exception as exc:  # noqa: BLE001 - msgpack's and the types' errors alike
        raise ProtocolError(f"a value that is not data ({type(exc).__name__}: {exc})") \
            from None


# -- messages ----------------------------------------------------------------------------
def pack(message: dict[str, Any]) -> bytes:
    """A message as one frame (length prefix included).

    Raises:
        ValueError / TypeError: the message holds something msgpack cannot write.
    """
    body = _packb(message)
    return HEADER.pack(len(body)) + body


_MESSAGE_LIMITS = {"max_str_len": 64 << 20, "max_bin_len": 1 << 31, "max_array_len": 1 << 20,
                   "max_map_len": 1 << 20, "max_ext_len": 0}


def unpack(body: bytes | bytearray) -> dict[str, Any]:
    """A message from a frame's body (the host reads untrusted ones).

    Raises:
        ProtocolError: not a msgpack map with an ``op`` string.
    """
    try:
        message = msgpack.unpackb(body, raw=False, strict_map_key=True,
                                  unicode_errors="surrogatepass", **_MESSAGE_LIMITS)
    except Exception as exc:  # noqa: BLE001 - anything malformed
        raise ProtocolError(f"a frame that is not a message ({type(exc).__name__})") \
            from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ProtocolError("a frame that is not a message (no op)")
    return message


class Channel:
    """One end of the worker's socket: whole frames out, whole frames in, each with a
    deadline.  The socket is put in non-blocking mode; every wait is a ``select``, so
    one thread may read while others write.

    Args:
        sock: a connected stream socket.
        max_frame: the largest frame body accepted (bytes).
        accept_tails: whether a message may announce raw bytes after its frame
            (``tail``: only the worker accepts them, from its trusted host).
    """

    def __init__(self, sock: socket.socket, max_frame: int, accept_tails: bool = False
                 ) -> None:
        self.sock, self.max_frame, self.accept_tails = sock, max_frame, accept_tails
        sock.setblocking(False)

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: dict[str, Any], *, tail: bytes | None = None,
             deadline: float | None = None) -> None:
        """Write one message (and ``tail``, raw bytes the message announces).

        Args:
            deadline: ``time.monotonic()`` by which the peer must have read it (None:
                no limit).

        Raises:
            ChannelClosed: the peer is gone.
            TimeoutError: the peer did not read it by the deadline.
        """
        if tail is not None:
            message = {**message, "tail": len(tail)}
        self._write(memoryview(pack(message)), deadline)
        if tail is not None:
            self._write(memoryview(tail).cast("B"), deadline)

    def _write(self, view: memoryview, deadline: float | None) -> None:
        while view:
            if not self._ready(False, deadline):
                raise TimeoutError("the peer did not read the message in time")
            try:
                sent = self.sock.send(view[: 1 << 24])
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as exc:
                raise ChannelClosed(str(exc)) from None
            view = view[sent:]

    def _ready(self, read: bool, deadline: float | None) -> bool:
        """Wait until the socket can be read (or written); False at the deadline."""
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            try:
                r, w, _ = select.select([self.sock] if read else [],
                                        [] if read else [self.sock], [], left)
            except InterruptedError:
                continue
            except (OSError, ValueError) as exc:  # closed
                raise ChannelClosed(str(exc)) from None
            if r or w:
                return True

    def wait(self, deadline: float | None) -> bool:
        """Whether something arrived (or the peer closed) by ``deadline``."""
        return self._ready(True, deadline)

    def receive(self, deadline: float | None) -> dict[str, Any]:
        """Read one whole message by ``deadline`` (``time.monotonic()`` seconds; None:
        wait for ever).

        Raises:
            TimeoutError: nothing, or only part of a frame, came by the deadline (after
                part of one the channel is out of step: the caller must drop the peer).
            ChannelClosed: the peer closed the socket (mid-frame too).
            ProtocolError: a frame over ``max_frame`` bytes, or not a message.
        """
        head = self._read(HEADER.size, deadline)
        (size,) = HEADER.unpack(head)
        if size > self.max_frame:
            raise ProtocolError(f"a frame of {size:,} bytes, over the limit of "
                                f"{self.max_frame:,}")
        message = unpack(self._read(size, deadline))
        if "tail" in message:
            size = message.pop("tail")
            if not self.accept_tails or not isinstance(size, int) or size < 0:
                raise ProtocolError("a message with raw bytes after it")
            message["payload"] = self._read(size, deadline)
        return message

    def _read(self, size: int, deadline: float | None) -> bytes | bytearray:
        buf = bytearray(size)
        view, got = memoryview(buf), 0
        while got < size:
            if not self._ready(True, deadline):
                raise TimeoutError("no whole message by the deadline")
            try:
                n = self.sock.recv_into(view[got:], min(size - got, 1 << 24))
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as exc:
                raise ChannelClosed(str(exc)) from None
            if n == 0:
                raise ChannelClosed("the peer closed the channel")
            got += n
        return bytes(buf) if size < 1 << 20 else buf  # a large one is not copied

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
