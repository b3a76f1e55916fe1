"""StreamTee: a step's stdout/stderr kept capped (head, marker, tail), forwarded live in
coalesced chunks, redacted on the way out."""

from __future__ import annotations

import time

import pytest

from rlm_kernel.executors import PlainExecutor
from rlm_kernel.executors.redaction import Redactor
from rlm_kernel.executors.streams import MAX_KEPT_CHARS, StreamTee
from rlm_kernel.text import cut_marker

NO_SECRETS = Redactor({})


def text(n: int) -> str:
    """``n`` characters, each one telling its position (a cut shows where it fell)."""
    return "".join(chr(ord("a") + i % 26) for i in range(n))


def test_the_marker_counts_with_separators_and_says_print_less():
    assert cut_marker(1234567) == "[... 1,234,567 characters cut: print less ...]"


def test_output_under_the_cap_is_kept_whole():
    tee = StreamTee("stdout", None, max_chars=100, redact=NO_SECRETS)
    assert tee.write("hello ") == 6 and tee.write("world\n") == 6
    assert tee.getvalue() == "hello world\n"
    assert tee.writable()


def test_output_over_the_cap_keeps_two_thirds_head_and_a_third_tail():
    s = text(300)
    tee = StreamTee("stdout", None, max_chars=100, redact=NO_SECRETS)
    tee.write(s)
    assert tee.getvalue() == s[:66] + " " + cut_marker(200) + " " + s[-34:]


def test_output_with_lines_has_the_marker_on_a_line_of_its_own():
    s = "".join(f"line {i}\n" for i in range(100))
    tee = StreamTee("stdout", None, max_chars=100, redact=NO_SECRETS)
    tee.write(s)
    cut = len(s) - 100
    assert tee.getvalue() == s[:66] + "\n" + cut_marker(cut) + "\n" + s[-34:]


def test_many_small_writes_keep_the_same_head_and_tail_as_one_big_one():
    s = text(1000)
    tee = StreamTee("stdout", None, max_chars=100, redact=NO_SECRETS)
    for i in range(0, len(s), 7):
        tee.write(s[i:i + 7])
    assert tee.getvalue() == s[:66] + " " + cut_marker(900) + " " + s[-34:]


def test_exactly_at_the_cap_nothing_is_dropped():
    s = text(100)
    tee = StreamTee("stdout", None, max_chars=100, redact=NO_SECRETS)
    tee.write(s)
    assert tee.getvalue() == s


def test_only_text_can_be_written():
    tee = StreamTee("stdout", None, redact=NO_SECRETS)
    with pytest.raises(TypeError, match="must be str, not bytes"):
        tee.write(b"bytes")
    assert tee.write("") == 0 and tee.getvalue() == ""


def test_writes_are_coalesced_into_one_chunk_until_flushed():
    chunks = []
    tee = StreamTee("stderr", lambda name, t: chunks.append((name, t)), redact=NO_SECRETS,
                    flush_seconds=60)
    tee.write("a")
    tee.write("b\n")
    assert chunks == []  # within the window: nothing forwarded yet
    tee.flush()
    assert chunks == [("stderr", "ab\n")]
    tee.flush()
    assert chunks == [("stderr", "ab\n")]  # nothing pending, nothing sent


def test_the_window_closing_forwards_what_is_pending():
    chunks = []
    tee = StreamTee("stdout", lambda name, t: chunks.append(t), redact=NO_SECRETS,
                    flush_seconds=0.05)
    tee.write("x")
    deadline = time.monotonic() + 5
    while not chunks and time.monotonic() < deadline:
        time.sleep(0.01)
    assert chunks == ["x"]


def test_a_zero_window_forwards_every_write():
    chunks = []
    tee = StreamTee("stdout", lambda name, t: chunks.append(t), redact=NO_SECRETS,
                    flush_seconds=0)
    tee.write("a")
    tee.write("b")
    assert chunks == ["a", "b"]


def test_live_text_stops_at_the_cap_with_one_note():
    chunks = []
    tee = StreamTee("stdout", lambda name, t: chunks.append(t), max_chars=10,
                    redact=NO_SECRETS, flush_seconds=0)
    tee.write("x" * 25)
    tee.write("y")
    tee.write("z")
    tee.flush()
    assert chunks == ["x" * 10, "\n[output beyond 10 characters is not shown live]\n"]


def test_close_forwards_what_is_pending():
    chunks = []
    tee = StreamTee("stdout", lambda name, t: chunks.append(t), redact=NO_SECRETS,
                    flush_seconds=60)
    tee.write("last words")
    tee.close()
    assert chunks == ["last words"] and tee.closed


def test_secrets_are_redacted_in_what_is_kept_and_what_is_forwarded():
    chunks = []
    redact = Redactor({"MY_TOKEN": "supersecret123"})
    tee = StreamTee("stdout", lambda name, t: chunks.append(t), redact=redact,
                    flush_seconds=60)
    tee.write("key: super")  # a secret split across two writes is still one secret
    tee.write("secret123\n")
    tee.flush()
    assert tee.getvalue() == "key: [redacted MY_TOKEN]\n"
    assert chunks == ["key: [redacted MY_TOKEN]\n"]


def test_a_secret_written_across_two_live_chunks_is_forwarded_whole():
    """Shared fault case kr03_kernel_split_secret.py, for the live view (the kernel's
    step cell, and so the saved notebook): the chunk that ends with the start of a
    secret holds that start back until the next write shows the rest."""
    chunks = []
    redact = Redactor({"MY_TOKEN": "supersecret123"})
    tee = StreamTee("stdout", lambda name, t: chunks.append(t), redact=redact,
                    flush_seconds=0)  # every write is a chunk of its own
    tee.write("key: super")
    tee.write("secret123\n")
    tee.write("not a key: sup")
    tee.write("per\n")
    tee.write("trailing su")
    tee.flush()  # the step's end: nothing more is coming
    assert chunks == ["key: ", "[redacted MY_TOKEN]\n", "not a key: ", "supper\n",
                      "trailing ", "su"]
    assert "".join(chunks) == tee.getvalue()


# Through the plain executor, as a step writes:

def test_a_print_flood_is_a_handful_of_live_chunks_and_a_capped_record():
    chunks = []
    ex = PlainExecutor()
    res = ex.execute("for i in range(200_000):\n    print(i)",
                     on_output=lambda stream, text: chunks.append(text))
    assert res.success
    assert len(chunks) < 200, f"{len(chunks)} live chunks for one flood"
    assert sum(map(len, chunks)) <= MAX_KEPT_CHARS + 200
    assert len(res.stdout) <= MAX_KEPT_CHARS + 100
    assert "characters cut: print less ...]" in res.stdout
    assert res.stdout.startswith("0\n1\n2\n") and res.stdout.endswith("199999\n")


def test_one_print_arrives_as_one_chunk():
    chunks = []
    PlainExecutor().execute("print('a', 'b', sep='-')",
                            on_output=lambda stream, text: chunks.append(text))
    assert chunks == ["a-b\n"]


@pytest.mark.parametrize("where", ["head", "tail"])
@pytest.mark.parametrize("kept_whole", [True, False])
def test_a_secret_across_a_cut_of_the_kept_output_is_redacted(where, kept_whole):
    """Shared fault case s03_cap_boundary_split.py: the secret straddles the end of the
    kept head (or the start of the kept tail), written in one piece or in many."""
    secret = "sk-test-0123456789abcdefSECRET"
    tee = StreamTee("stdout", None, max_chars=1000, redact=Redactor({"OPENAI_API_KEY": secret}))
    head, tail = 666, 334
    extra = 10 if kept_whole else 5000  # past the cap by a little (all kept) or a lot
    if where == "head":
        text = "x" * (head - 15) + secret + "y" * (tail + extra)
    else:
        text = "x" * (head + extra) + secret + "z" * (tail - 15)  # the tail starts in it
    for i in range(0, len(text), 7):
        tee.write(text[i:i + 7])
    kept = tee.getvalue()
    assert "characters cut: print less" in kept
    assert secret[:10] not in kept and secret[-10:] not in kept
    assert "[redacted OPENAI_API_KEY]" in kept
    shown = kept.replace("[redacted OPENAI_API_KEY]", secret)
    before, marker, after = shown.partition(" [... ")
    count = int(after.split(" characters")[0].replace(",", ""))
    after = after.split("print less ...] ", 1)[1]
    assert text.startswith(before) and text.endswith(after)
    assert count == len(text) - len(before) - len(after)
