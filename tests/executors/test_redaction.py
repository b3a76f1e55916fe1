"""Redactor and redact_output: the values of secret environment variables replaced by
``[redacted NAME]`` in text and in notebook outputs."""

from __future__ import annotations

import pytest

from rlm_kernel.executors.redaction import (
    MIN_SECRET_CHARS,
    SECRET_NAME,
    Redactor,
    redact_output,
)

KEY = "sk-0123456789abcdef"


@pytest.mark.parametrize("name", [
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_API_KEY", "HF_TOKEN", "GITHUB_TOKEN",
    "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "FTP_PASSWD", "GOOGLE_CREDENTIALS",
    "SERVICE_CREDENTIAL", "MY_APIKEY", "api_key", "SECRET", "KEY_FILE_CONTENT",
])
def test_names_of_secrets(name):
    assert SECRET_NAME.search(name)


@pytest.mark.parametrize("name", [
    "HOME", "PATH", "KEYBOARD_LAYOUT", "MONKEY", "TOKENIZERS_PARALLELISM",
    "SECRETARY", "PASSWORDLESS", "XDG_SESSION_TYPE",
])
def test_names_that_are_not_secrets(name):
    assert not SECRET_NAME.search(name)


def test_a_secret_value_is_replaced_by_its_name():
    redact = Redactor({"OPENAI_API_KEY": KEY, "HOME": "/home/someone"})
    assert redact(f"key={KEY}; again {KEY}; home=/home/someone") == (
        "key=[redacted OPENAI_API_KEY]; again [redacted OPENAI_API_KEY]; home=/home/someone")
    assert redact
    assert redact("") == ""


def test_short_values_are_left_alone():
    short = "x" * (MIN_SECRET_CHARS - 1)
    redact = Redactor({"SHORT_TOKEN": short, "FLAG_SECRET": "true"})
    assert not redact
    assert redact(f"{short} is true") == f"{short} is true"
    assert Redactor({"EXACT_TOKEN": "y" * MIN_SECRET_CHARS})("y" * MIN_SECRET_CHARS) == (
        "[redacted EXACT_TOKEN]")


def test_the_longer_secret_wins_where_one_contains_another():
    redact = Redactor({"A_TOKEN": "abcdefgh", "B_TOKEN": "abcdefgh-12345"})
    assert redact("abcdefgh-12345 abcdefgh") == "[redacted B_TOKEN] [redacted A_TOKEN]"


def test_values_are_matched_literally_not_as_patterns():
    redact = Redactor({"ODD_SECRET": "a.b*c+d?(e)"})
    assert redact("a.b*c+d?(e)") == "[redacted ODD_SECRET]"
    assert redact("aXbbbcdd(e)") == "aXbbbcdd(e)"


def test_the_environment_is_read_when_the_redactor_is_made(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", KEY)
    redact = Redactor()
    monkeypatch.delenv("MY_SERVICE_TOKEN")
    later = "tok-abcdefghijkl"
    monkeypatch.setenv("LATER_TOKEN", later)
    assert redact(f"{KEY} {later}") == f"[redacted MY_SERVICE_TOKEN] {later}"


def test_an_output_is_redacted_in_text_evalue_traceback_and_data():
    redact = Redactor({"OPENAI_API_KEY": KEY})
    output = {"output_type": "error", "text": f"t {KEY}", "evalue": f"bad {KEY}",
              "traceback": [f"line {KEY}", 3],
              "data": {"text/plain": f"'{KEY}'", "application/json": {"k": KEY}}}
    out = redact_output(output, redact)
    assert out["text"] == "t [redacted OPENAI_API_KEY]"
    assert out["evalue"] == "bad [redacted OPENAI_API_KEY]"
    assert out["traceback"] == ["line [redacted OPENAI_API_KEY]", 3]
    assert out["data"]["text/plain"] == "'[redacted OPENAI_API_KEY]'"
    assert out["data"]["application/json"] == {"k": KEY}  # only text values are redacted
    assert out["output_type"] == "error"
    assert output["text"] == f"t {KEY}"  # the original is not changed


def test_an_output_with_no_secrets_to_hide_is_returned_as_it_is():
    output = {"output_type": "stream", "name": "stdout", "text": KEY}
    assert redact_output(output, Redactor({})) is output
