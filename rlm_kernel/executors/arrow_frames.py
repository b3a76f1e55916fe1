"""Arrow IPC streams from the worker: what the host checks before it builds a pandas frame.

A pandas ``DataFrame`` crosses the isolated executor's channel as an `Arrow IPC stream
<https://arrow.apache.org/docs/format/Columnar.html#serialization-and-interprocess-communication-ipc>`_
(:mod:`~rlm_kernel.executors.wire`, extension type 18).  The stream is untrusted (model code
shares the worker's address space) and its size on the host is *not* bounded by its bytes:
a column of type ``null`` has no buffers, so a 224-byte stream can declare 120 million rows
that ``to_pandas()`` turns into gigabytes; a compressed body (LZ4, ZSTD) inflates when it is
read; view and run-end encoded layouts, and dictionaries inside nested values, let many
rows share one long value that conversion copies out for each.  So, before anything is
converted:

1. every message's metadata (a flatbuffer, ``Message.fbs`` and ``Schema.fbs`` of the
   format) is read *without reading its body*: a compressed body is refused, and the
   logical length of every array node (each column of each record batch, every nested
   child, every dictionary) is summed with the rows, the fields (:data:`FIELD_ITEMS`
   each) and the messages into the item count that :func:`stream_items` returns and the
   decoder charges to its cap;
2. the schema may hold only the types :meth:`pyarrow.Table.from_pandas` makes for the
   frames the encoder sends (:func:`check_schema`): no views, unions, run-end encoding or
   foreign extension types, dictionaries only as a column's own type;
3. the table is fully validated (``Table.validate(full=True)``: offsets inside their
   buffers, counts that add up) before ``to_pandas()``.

The flatbuffer layout (root offset, vtables, union, struct vectors) follows the
FlatBuffers "Internals" document; the field numbers are those of Arrow's ``Message.fbs``.
"""

from __future__ import annotations

import struct
from typing import Any

__all__ = ["ArrowRefused", "stream_items", "check_schema", "read_frame"]

FIELD_ITEMS = 64
"""Items one field of a schema counts for: a column costs the host about 64 items' worth
(pandas makes an array, an index entry and a block for each: some 200k empty columns in
9 MB of stream took 180 MB and 4 s to convert here)."""
MAX_TYPE_DEPTH = 64
"""Deepest nesting of types (struct in list in struct ...) accepted in a stream."""
_PANDAS_EXTENSIONS = ("pandas.period", "pandas.interval")
"""Arrow extension types pandas registers (Period and Interval columns): allowed, on
the same terms as their storage type."""

# Message.fbs: MessageHeader union members, and the fields used below
_SCHEMA, _DICTIONARY_BATCH, _RECORD_BATCH = 1, 2, 3
_MESSAGE_HEADER_TYPE, _MESSAGE_HEADER = 1, 2
_BATCH_LENGTH, _BATCH_NODES, _BATCH_COMPRESSION = 0, 1, 3
_DICTIONARY_DATA = 1
_FIELD_NODE_BYTES = 16  # struct FieldNode { length: long; null_count: long; }


class ArrowRefused(ValueError):
    """An Arrow stream the host does not convert (the message says why)."""


# -- flatbuffers ---------------------------------------------------------------------------
class _Flatbuffer:
    """Bounds-checked reads of one flatbuffer (little-endian, as the format says)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, fmt: str, at: int) -> int:
        size = struct.calcsize(fmt)
        if at < 0 or at + size > len(self.data):
            raise ArrowRefused("a message whose metadata points outside itself")
        return struct.unpack_from(fmt, self.data, at)[0]

    def root(self) -> int:
        return self.read("<I", 0)

    def field(self, table: int, index: int) -> int | None:
        """The position of field ``index`` of the table at ``table``, or None (absent)."""
        vtable = table - self.read("<i", table)
        size = self.read("<H", vtable)
        slot = 4 + 2 * index
        if slot + 2 > size:
            return None
        offset = self.read("<H", vtable + slot)
        return table + offset if offset else None

    def target(self, at: int) -> int:
        """Follow the offset stored at ``at`` (to a table or a vector)."""
        return at + self.read("<I", at)


def _batch_items(fb: _Flatbuffer, batch: int) -> int:
    """Rows plus the length of every array node of a RecordBatch table."""
    if fb.field(batch, _BATCH_COMPRESSION) is not None:
        raise ArrowRefused("a compressed Arrow stream (the encoder never compresses)")
    at = fb.field(batch, _BATCH_LENGTH)
    rows = fb.read("<q", at) if at is not None else 0
    total = rows
    at = fb.field(batch, _BATCH_NODES)
    if at is not None:
        vector = fb.target(at)
        count = fb.read("<I", vector)
        if vector + 4 + count * _FIELD_NODE_BYTES > len(fb.data):
            raise ArrowRefused("a message whose metadata points outside itself")
        for k in range(count):
            length = fb.read("<q", vector + 4 + k * _FIELD_NODE_BYTES)
            if length < 0:
                raise ArrowRefused("an array of negative length")
            total += length
    if rows < 0:
        raise ArrowRefused("a batch of negative length")
    return total


def stream_items(data: bytes) -> int:
    """The items an Arrow IPC stream declares, read from its messages' metadata only.

    Args:
        data: the stream's bytes (untrusted).

    Returns:
        messages + :data:`FIELD_ITEMS` a schema field (nested ones too) + rows + the
        logical length of every array node of every record batch and dictionary batch
        (nested children and dictionaries included): an upper bound of the Python
        objects and array cells that ``to_pandas()`` makes from it.

    Raises:
        ArrowRefused: not a stream, a compressed body, a message other than a schema,
            a dictionary batch or a record batch, or metadata that does not hold together.
    """
    import pyarrow as pa

    total = 0
    try:
        reader = pa.ipc.MessageReader.open_stream(pa.py_buffer(data))
        for message in reader:
            fb = _Flatbuffer(message.metadata.to_pybytes())
            table = fb.root()
            kind_at = fb.field(table, _MESSAGE_HEADER_TYPE)
            kind = fb.read("<B", kind_at) if kind_at is not None else 0
            header_at = fb.field(table, _MESSAGE_HEADER)
            total += 1
            if kind == _SCHEMA:
                total += FIELD_ITEMS * _field_count(pa.ipc.read_schema(message))
                continue
            if header_at is None or kind not in (_RECORD_BATCH, _DICTIONARY_BATCH):
                raise ArrowRefused(f"an Arrow message of type {kind} (not a table's)")
            header = fb.target(header_at)
            if kind == _DICTIONARY_BATCH:
                data_at = fb.field(header, _DICTIONARY_DATA)
                if data_at is None:
                    raise ArrowRefused("a dictionary batch without data")
                header = fb.target(data_at)
            total += _batch_items(fb, header)
    except ArrowRefused:
        raise
    except (pa.ArrowException, ValueError, TypeError, struct.error) as exc:
        raise ArrowRefused(f"not an Arrow stream ({type(exc).__name__}: {exc})"[:300]) \
            from None
    return total


def _field_count(schema: Any) -> int:
    count, todo = 0, [f.type for f in schema]
    while todo:
        kind = todo.pop()
        count += 1
        todo += [kind.field(i).type for i in range(getattr(kind, "num_fields", 0))]
    return count


# -- types ---------------------------------------------------------------------------------
def _leaf(kind: Any) -> bool:
    import pyarrow.types as t

    return any(test(kind) for test in (
        t.is_null, t.is_boolean, t.is_integer, t.is_floating, t.is_decimal, t.is_string,
        t.is_large_string, t.is_binary, t.is_large_binary, t.is_fixed_size_binary,
        t.is_date, t.is_time, t.is_timestamp, t.is_duration))


def _check_type(kind: Any, depth: int, column: bool) -> None:
    import pyarrow as pa
    import pyarrow.types as t

    if depth > MAX_TYPE_DEPTH:
        raise ArrowRefused(f"Arrow types nested deeper than {MAX_TYPE_DEPTH} levels")
    if isinstance(kind, pa.ExtensionType):
        if kind.extension_name not in _PANDAS_EXTENSIONS:
            raise ArrowRefused(f"the Arrow extension type {kind.extension_name[:80]!r}")
        _check_type(kind.storage_type, depth + 1, column)
        return
    if _leaf(kind):
        return
    if t.is_dictionary(kind):
        if not column or not t.is_integer(kind.index_type) or not _leaf(kind.value_type):
            raise ArrowRefused("an Arrow dictionary that is not a categorical column")
        return
    if t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind) \
            or t.is_struct(kind) or t.is_map(kind):
        for i in range(kind.num_fields):
            _check_type(kind.field(i).type, depth + 1, False)
        return
    raise ArrowRefused(f"the Arrow type {str(kind)[:80]} (not one a pandas frame is sent as)")


def check_schema(schema: Any) -> None:
    """Refuse a schema with a type the encoder never sends (see the module docstring).

    Raises:
        ArrowRefused: the first such type, named.
    """
    for field in schema:
        _check_type(field.type, 0, True)


def read_frame(data: bytes, charge: Any) -> Any:
    """A pandas ``DataFrame`` from an untrusted Arrow IPC stream, checked first.

    Args:
        data: the stream's bytes.
        charge: ``callable(items)`` that raises when the value is over its item cap
            (called with :func:`stream_items` before anything is converted).

    Raises:
        ArrowRefused: see :func:`stream_items`, :func:`check_schema`, or a stream that
            fails full validation.
        Whatever ``charge`` raises.
    """
    import pyarrow as pa

    charge(stream_items(data))
    try:
        with pa.ipc.open_stream(pa.py_buffer(data)) as reader:
            check_schema(reader.schema)
            table = reader.read_all()
        table.validate(full=True)
    except ArrowRefused:
        raise
    except (pa.ArrowException, ValueError, TypeError) as exc:
        raise ArrowRefused(f"an Arrow stream that is not valid ({type(exc).__name__}: "
                           f"{exc})"[:300]) from None
    return table.to_pandas()
