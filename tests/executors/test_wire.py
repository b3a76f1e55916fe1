"""The isolated executor's channel (``executors/wire.py``): data forms that round-trip,
caps that hold against forged input, frames read whole by a deadline or refused."""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import pathlib
import pickle
import socket
import struct
import time
import uuid

import msgpack
import pytest

from rlm_kernel.executors.wire import (
    MAX_ITEMS,
    Channel,
    ChannelClosed,
    NotData,
    ProtocolError,
    decode_value,
    encode_value,
    pack,
)


@pytest.mark.parametrize("value", [
    None, True, 0, -1, 2**64 + 5, -(10**300), 1.5, float("inf"), "text", "a\udc80",
    b"\x00bytes", bytearray(b"ba"), [1, [2, [3]]], (1, (2, "x")), {1, 2}, frozenset({"a"}),
    {"k": [1, 2], 3: "int key", (1, 2): "tuple key"}, 3 + 4j,
    datetime.datetime(2026, 11, 26, 8, 5, tzinfo=datetime.timezone.utc),
    datetime.date(2026, 1, 2), datetime.time(1, 2, 3), datetime.timedelta(days=2, seconds=3),
    decimal.Decimal("1.10"), fractions.Fraction(3, 7), uuid.UUID(int=7),
    pathlib.PurePosixPath("/a/b"), collections.OrderedDict([("b", 1), ("a", 2)]),
    collections.Counter("abca"), collections.deque([1, 2]),
])
def test_plain_data_round_trips_with_its_type(value):
    back = decode_value(encode_value(value))
    assert back == value and type(back) is type(value) or (
        isinstance(value, pathlib.PurePath) and str(back) == str(value))


def test_numpy_arrays_and_scalars_cross_as_data():
    np = pytest.importorskip("numpy")
    array = np.arange(12, dtype=np.int32).reshape(3, 4)
    back = decode_value(encode_value({"a": array, "s": np.float64(2.5)}))
    assert (back["a"] == array).all() and back["a"].dtype == np.int32
    assert back["s"] == 2.5 and type(back["s"]) is float
    with pytest.raises(NotData):
        encode_value(np.array([object()]))


@pytest.mark.parametrize("value, why", [
    (type("Model", (), {})(), "has no data form"),
    (lambda: 1, "has no data form"),
    ({[1]: 2} if False else {1: {2}}, None),
])
def test_what_has_no_data_form_says_why(value, why):
    if why is None:
        assert decode_value(encode_value(value)) == value
        return
    with pytest.raises(NotData, match=why):
        encode_value(value)


def test_a_shared_reference_dag_stops_at_the_item_cap_quickly():
    """x21: [a, a] nested 23 times is 8 million leaves; the walk stops at the cap."""
    a: list = []
    for _ in range(23):
        a = [a, a]
    start = time.monotonic()
    with pytest.raises(NotData, match="item limit"):
        encode_value(a)
    assert time.monotonic() - start < 10
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(NotData):
        encode_value(cyclic)


def test_forged_data_forms_are_refused():
    with pytest.raises(ProtocolError):  # a pickle is never read
        decode_value(pickle.dumps(bytearray(10)))
    with pytest.raises(ProtocolError):  # more items than the cap, in a few bytes each
        decode_value(msgpack.packb([0] * (MAX_ITEMS + 1)))
    with pytest.raises(ProtocolError):  # an unknown extension type
        decode_value(msgpack.packb(msgpack.ExtType(99, b"x")))
    with pytest.raises(ProtocolError):  # an array whose bytes are not its shape
        decode_value(msgpack.packb(msgpack.ExtType(14, msgpack.packb(["<i4", [1000], b"x"]))))
    with pytest.raises(ProtocolError):  # nested deeper than msgpack's stack
        decode_value(b"\x91" * 5000 + b"\x90")
    with pytest.raises(ProtocolError):  # a set holding a list
        decode_value(msgpack.packb(msgpack.ExtType(2, msgpack.packb([[1]]))))


def _pair(max_frame: int = 1 << 20) -> tuple[Channel, socket.socket]:
    host, worker = socket.socketpair()
    return Channel(host, max_frame), worker


def test_a_frame_over_the_cap_is_refused_before_its_body_is_read():
    channel, worker = _pair(max_frame=1000)
    worker.sendall(struct.pack(">I", 4 << 30 - 1))
    with pytest.raises(ProtocolError, match="over the limit"):
        channel.receive(time.monotonic() + 5)


def test_a_header_with_no_body_ends_at_the_deadline():
    """x03: the reader never waits past its deadline for a frame that does not come."""
    channel, worker = _pair()
    worker.sendall(struct.pack(">I", 500))
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        channel.receive(time.monotonic() + 0.3)
    assert time.monotonic() - start < 2


def test_junk_and_messages_without_an_op_are_protocol_errors():
    channel, worker = _pair()
    worker.sendall(struct.pack(">I", 4) + b"junk")
    with pytest.raises(ProtocolError):
        channel.receive(time.monotonic() + 5)
    worker.sendall(pack({"no": "op"}))
    with pytest.raises(ProtocolError):
        channel.receive(time.monotonic() + 5)
    worker.sendall(pack({"op": "reply", "tail": 10}) + b"0123456789")  # only the host sends tails
    with pytest.raises(ProtocolError):
        channel.receive(time.monotonic() + 5)


def test_a_message_and_its_tail_arrive_whole_and_a_closed_peer_is_told():
    host, worker = socket.socketpair()
    sender, receiver = Channel(host, 1 << 20), Channel(worker, 1 << 40, accept_tails=True)
    payload = b"x" * 3_000_000
    import threading

    thread = threading.Thread(target=sender.send, args=({"op": "set", "id": 1},),
                              kwargs={"tail": payload})
    thread.start()
    message = receiver.receive(time.monotonic() + 10)
    thread.join()
    assert message["op"] == "set" and bytes(message["payload"]) == payload
    host.close()
    with pytest.raises(ChannelClosed):
        receiver.receive(time.monotonic() + 5)
