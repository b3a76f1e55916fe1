"""The package's log records carry no secret (:func:`rlm_kernel.redaction.redact_log_records`):
whichever handler writes a record of an ``rlm_kernel.*`` logger, its message, its
traceback (frames kept, for a maintainer) and its stack hold ``[redacted NAME]`` where a
key was.  Real litellm against a local server that answers 401 quoting the key it was
sent (as providers do); the engine's own error log; records of other loggers untouched."""

from __future__ import annotations

import io
import logging

import pytest

from rlm_kernel.engine import RLM
from rlm_kernel.executors import PlainExecutor
from rlm_kernel.models import LiteLLMClient, LLMError
from rlm_kernel.models.scripted import ScriptedModel
from rlm_kernel.redaction import redact_log_record, redact_log_records, remember_secret
from tests.faults.test_fault_t5_secrets import fresh_key, key_echo
from tests.replies import block


def written(record: logging.LogRecord) -> str:
    """What a stock handler writes for ``record`` (message, traceback, stack)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    handler.emit(record)
    return stream.getvalue()


def everything(record: logging.LogRecord) -> str:
    """Every attribute of ``record`` as text, its exception's too."""
    return repr(vars(record)) + written(record)


def test_the_engines_error_log_keeps_the_frames_and_loses_the_key(caplog, monkeypatch):
    """An error of the loop quoting the key (here the executor's, as a provider's error
    quotes the key it was sent): the record logged with its traceback."""
    key = fresh_key("log")
    monkeypatch.setenv("PROVIDER_API_KEY", key)

    class Broken(PlainExecutor):
        def execute(self, code, **kwargs):
            raise RuntimeError(f"Incorrect API key provided: {key}")

    lm = ScriptedModel([block("x = 1")])
    with caplog.at_level("ERROR", logger="rlm_kernel"):
        res = RLM(root_client=lm, sub_client=lm).run("q", context="c", executor=Broken())
    assert res.stopped_by == "error" and key not in res.error
    [record] = [r for r in caplog.records if r.name == "rlm_kernel.engine.run"]
    text = written(record)
    assert key not in everything(record) and key not in caplog.text
    assert "internal error in the RLM loop (step 0)" in text
    # the maintainer's traceback: the frames, the error's type, the key's name
    assert "Traceback (most recent call last)" in text and "in execute" in text
    assert "RuntimeError: Incorrect API key provided: [redacted PROVIDER_API_KEY]" in text
    assert record.exc_info is None  # no handler can format the original exception


def test_litellms_error_logged_by_the_client_loses_the_key(caplog):
    """The client's warning and its debug record of litellm's exception (the chain,
    with the provider's 401 message quoting the key it was sent)."""
    key = fresh_key("client-log")
    with key_echo() as server, caplog.at_level("DEBUG", logger="rlm_kernel"):
        client = LiteLLMClient("openai/gpt-4o-mini", api_base=server.api_base, api_key=key,
                               num_retries=0)
        with pytest.raises(LLMError):
            client.complete([{"role": "user", "content": "hi"}])
    assert key in server.seen  # the provider got it, and quoted it back
    records = [r for r in caplog.records if r.name.startswith("rlm_kernel.")]
    [debug] = [r for r in records if r.getMessage() == "litellm's exception"]
    assert "Traceback (most recent call last)" in written(debug)
    assert "[redacted " in written(debug)
    assert not [r.getMessage() for r in records if key in everything(r)]
    assert key not in caplog.text


def test_a_record_without_a_secret_is_left_whole(caplog):
    with caplog.at_level("WARNING", logger="rlm_kernel"):
        try:
            raise ValueError("nothing secret")
        except ValueError:
            logging.getLogger("rlm_kernel.test").warning("step %d failed", 3, exc_info=True)
    [record] = caplog.records
    assert record.args == (3,) and record.exc_info is not None
    assert "ValueError: nothing secret" in written(record)


def test_the_message_args_and_stack_are_redacted_other_loggers_are_not(caplog):
    key = fresh_key("args")
    remember_secret(key, "ARGS_TOKEN")
    with caplog.at_level("WARNING"):
        logging.getLogger("rlm_kernel.models.x").warning("sent %s to %s", key, "host",
                                                         stack_info=True)
        logging.getLogger("rlm_kernel").warning(f"plain {key}")
        logging.getLogger("rlm_kernelish").warning("other %s", key)
    ours, package, other = caplog.records
    assert written(ours).startswith("rlm_kernel.models.x WARNING sent [redacted "
                                    "ARGS_TOKEN] to host")
    assert key not in everything(ours) and "Stack (most recent call last)" in written(ours)
    assert package.getMessage() == "plain [redacted ARGS_TOKEN]"
    assert key in other.getMessage()  # not the package's logger: not ours to change


def test_arguments_that_do_not_fit_are_not_written_raw():
    key = fresh_key("badargs")
    remember_secret(key, "BAD_TOKEN")
    record = logging.LogRecord("rlm_kernel.x", logging.WARNING, __file__, 1,
                               "one %s %s", (key,), None)
    redact_log_record(record)
    assert key not in everything(record) and "[redacted BAD_TOKEN]" in record.getMessage()


def test_installing_twice_redacts_once():
    before = logging.getLogRecordFactory()
    redact_log_records()
    assert logging.getLogRecordFactory() is before  # the package installed it already
