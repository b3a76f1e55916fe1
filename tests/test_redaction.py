"""The process's secrets and their redaction (:mod:`rlm_kernel.redaction`): which values
settings make secret, and :func:`redact_data` over plain data and this package's
dataclasses."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from rlm_kernel.engine import RLMResult
from rlm_kernel.engine.events import RunStarted
from rlm_kernel.models import LLMCall
from rlm_kernel.redaction import (
    MIN_SECRET_CHARS,
    Redactor,
    redact_data,
    redact_text,
    remember_secret,
    remember_settings,
)


def fresh(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex}"


def test_a_remembered_secret_stays_secret_and_short_values_are_not_secrets():
    key = fresh("sk")
    assert remember_secret(key, "GIVEN_KEY")
    assert not remember_secret("x" * (MIN_SECRET_CHARS - 1), "SHORT")
    assert not remember_secret(12345678901, "NOT_TEXT")
    assert redact_text(f"a {key} b") == "a [redacted GIVEN_KEY] b"
    remember_secret(key, "ANOTHER_NAME")  # the first name stays
    assert Redactor()(key) == "[redacted GIVEN_KEY]"


def test_settings_make_secret_the_values_under_credential_keys_at_any_depth():
    literal, header, env_value, plain = (fresh("lit"), fresh("hdr"), fresh("env"),
                                         fresh("plain"))
    settings = {"model_list": [{"model_name": "m", "litellm_params": {
        "model": "openai/x", "api_base": plain, "api_key": literal,
        "extra_headers": {"Authorization": f"Bearer {header}"},
        "aws_secret_access_key": "os.environ/LLM_CREDS_T"}}],
        "router_settings": {"redis_password": "short"}}
    count = remember_settings(settings, environ={"LLM_CREDS_T": env_value})
    assert count == 3
    redact = Redactor()
    assert redact(literal) == "[redacted api_key]"
    assert redact(f"Bearer {header}") == "[redacted Authorization]"
    assert redact(env_value) == "[redacted LLM_CREDS_T]"  # whatever the variable is called
    assert redact(plain) == plain  # an api_base is no secret


def test_an_unset_variable_named_by_a_setting_is_no_secret():
    assert remember_settings({"api_key": "os.environ/NOT_SET_ANYWHERE_T5"}, environ={}) == 0


def test_redact_data_copies_what_changes_and_keeps_what_does_not():
    key = fresh("data")
    remember_secret(key, "DATA_KEY")
    data = {"a": [f"x {key}", (key, 1)], key: {"n": 2}, "same": ["ok", {"k": "v"}]}
    out = redact_data(data)
    assert out == {"a": ["x [redacted DATA_KEY]", ("[redacted DATA_KEY]", 1)],
                   "[redacted DATA_KEY]": {"n": 2}, "same": ["ok", {"k": "v"}]}
    assert out["same"] is data["same"] and data["a"][0] == f"x {key}"  # the input unchanged
    clean = {"a": [1, "b"]}
    assert redact_data(clean) is clean


def test_redact_data_walks_deep_and_cyclic_data_without_recursion():
    key = fresh("deep")
    remember_secret(key, "DEEP_KEY")
    deep: list = [key]
    for _ in range(200_000):
        deep = [deep]
    out = redact_data(deep)
    for _ in range(200_000):
        out = out[0]
    assert out == ["[redacted DEEP_KEY]"]
    loop: list = ["a"]
    loop.append(loop)
    loop.append(key)
    assert redact_data(loop)[2] == "[redacted DEEP_KEY]"


def test_subclasses_from_model_code_are_left_alone():
    key = fresh("sub")
    remember_secret(key, "SUB_KEY")

    class Sneaky(dict):
        def items(self):  # would run on the host if walked
            raise AssertionError("walked")

    class Text(str):
        pass

    value = [Sneaky(k=key), Text(key)]
    assert redact_data(value) is value


def test_this_package_s_dataclasses_are_redacted_in_place_or_copied_when_frozen():
    key = fresh("dc")
    remember_secret(key, "DC_KEY")
    call = LLMCall(model="m", role="sub", error=f"refused {key}")
    result = RLMResult(question=f"q {key}", error=f"e {key}", answer_value=[key],
                       calls=[call])
    assert result.redact() is result
    assert result.question == "q [redacted DC_KEY]" and result.error == "e [redacted DC_KEY]"
    assert call.error == "refused [redacted DC_KEY]"  # the call record itself
    assert result.answer_value == [key]  # the user's value is data, not text
    event = RunStarted(question=f"q {key}", variables=[], max_iterations=1, model="m",
                       inputs=[], no_data=True)
    redacted = redact_data(event)
    assert redacted is not event and redacted.question == "q [redacted DC_KEY]"
    assert event.question == f"q {key}"  # frozen: a copy

    @dataclass
    class Foreign:
        text: str

    foreign = Foreign(key)  # not this package's: left alone
    assert redact_data([foreign])[0].text == key
