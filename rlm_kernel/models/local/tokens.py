"""Token counts of the embedded model's requests, counted as its server counts them.

llama-cpp-python's server sends no ``usage`` with a streamed reply, and litellm's own
count (``stream_chunk_builder``'s, with an OpenAI tokenizer) misses the chat template's
tokens and differs from Qwen's: a prompt of 38 tokens was counted as 16.  Token budgets
and the counts a run reports need the server's numbers, so a streamed reply is counted
here with llama-cpp-python's own parts: the model's vocabulary (loaded with
``vocab_only``: no weights), its chat template from the GGUF metadata rendered by
``Jinja2ChatFormatter``, and ``tokenize`` as the server calls it.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["TokenCounter", "counter_for"]

_lock = threading.Lock()


class TokenCounter:
    """Counts tokens of one GGUF model as llama-cpp-python's server does.

    Made through llama.cpp's C API (``llama_model_load_from_file`` with
    ``vocab_only``): the ``Llama`` class would swap the process's ``sys.stdout`` and
    ``sys.stderr`` while it loads, losing what other threads print meanwhile (a kernel's
    cell output).

    Args:
        model_path: the GGUF file (only its vocabulary and metadata are read).

    Raises:
        ImportError: llama-cpp-python is not installed.
        ValueError: llama.cpp cannot read the file.
    """

    def __init__(self, model_path: Path) -> None:
        from llama_cpp import llama_cpp as capi
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self._capi = capi
        params = capi.llama_model_default_params()
        params.vocab_only = True
        model = _quietly(lambda: (capi.llama_backend_init(),
                                  capi.llama_model_load_from_file(str(model_path).encode(),
                                                                  params))[1])
        if not model:
            raise ValueError(f"llama.cpp cannot read {model_path}")
        self._model = model  # kept for the process's life: the vocabulary lives in it
        self._vocab = capi.llama_model_get_vocab(model)
        eos, bos = capi.llama_vocab_eos(self._vocab), capi.llama_vocab_bos(self._vocab)
        template = self._meta("tokenizer.chat_template")
        self.formatter: Any = Jinja2ChatFormatter(
            template=template, eos_token=self._token_text(eos),
            bos_token=self._token_text(bos), stop_token_ids=[eos]) if template else None

    def _meta(self, key: str) -> str | None:
        size = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self._capi.llama_model_meta_val_str(self._model, key.encode(), buf, size)
            if n < 0:
                return None
            if n < size:
                return buf.value.decode("utf-8", errors="replace")
            size = n + 1

    def _token_text(self, token: int) -> str:
        if token == -1:
            return ""
        return bytes(self._capi.llama_vocab_get_text(self._vocab, token)).decode(
            "utf-8", errors="replace")

    def _count(self, data: bytes, *, add_bos: bool, special: bool) -> int:
        size = len(data) + 8
        with _lock:
            buf = (self._capi.llama_token * size)()
            n = self._capi.llama_tokenize(self._vocab, data, len(data), buf, size, add_bos,
                                          special)
            if n < 0:  # more tokens than bytes (cannot happen for BPE; llama.cpp says so)
                buf = (self._capi.llama_token * -n)()
                n = self._capi.llama_tokenize(self._vocab, data, len(data), buf, -n,
                                              add_bos, special)
        return int(n)

    def prompt(self, messages: list[dict[str, str]]) -> int | None:
        """Tokens of ``messages`` as the server's chat completion evaluates them (the
        chat template applied, the reply's start included); None without a template."""
        if self.formatter is None:
            return None
        result = self.formatter(messages=messages)
        return self._count(result.prompt.encode("utf-8"), add_bos=not result.added_special,
                           special=True)

    def text(self, text: str) -> int:
        """Tokens of a reply's ``text``."""
        return self._count(text.encode("utf-8"), add_bos=False, special=False)


def _quietly(make: Any) -> Any:
    """``make()`` with llama.cpp's log held back: llama-cpp-python's log callback prints
    it to ``sys.stderr`` (a cell's output in a kernel) unless its logger
    (``llama-cpp-python``, standard ``logging``) is set above the message's level; the
    logger's level is put back after."""
    logger = logging.getLogger("llama-cpp-python")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        return make()
    finally:
        logger.setLevel(level)


def counter_for(model_path: Path) -> TokenCounter | None:
    """The :class:`TokenCounter` of ``model_path``, made once per process (about 0.8 s;
    None, logged, when it cannot be made: the caller keeps litellm's count)."""
    with _made:
        return _counter(model_path)


_made = threading.Lock()


@functools.lru_cache(maxsize=4)
def _counter(model_path: Path) -> TokenCounter | None:
    try:
        return TokenCounter(model_path)
    except Exception:  # noqa: BLE001 - a count is not worth a failed call
        log.warning("cannot count the embedded model's tokens from %s", model_path,
                    exc_info=True)
        return None
