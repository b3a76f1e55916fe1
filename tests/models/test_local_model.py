"""Weights verification of the embedded model."""

from __future__ import annotations

import hashlib

import pytest

from rlm_kernel.models.local.weights import (
    MODELS,
    LocalModelError,
    ModelIntegrityError,
    get_spec,
    is_prepared,
    verify_file,
)


def test_verify_accepts_matching_file(tmp_path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"abc" * 1000)
    verify_file(f, 3000, hashlib.sha256(b"abc" * 1000).hexdigest())


def test_verify_names_both_hashes(tmp_path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"abc" * 1000)
    actual = hashlib.sha256(b"abc" * 1000).hexdigest()
    with pytest.raises(ModelIntegrityError) as err:
        verify_file(f, 3000, "0" * 64)
    assert "0" * 64 in str(err.value) and actual in str(err.value)


def test_verify_rejects_wrong_size(tmp_path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"x")
    with pytest.raises(ModelIntegrityError, match="expected 2 bytes"):
        verify_file(f, 2, "0" * 64)


def test_unknown_embedded_model():
    with pytest.raises(LocalModelError, match="qwen2.5-coder-1.5b"):
        get_spec("gpt-17")


def test_default_weights_are_prepared_and_verified():
    """`make setup` runs `rlm model prepare`; the default model must be ready after it."""
    spec = get_spec()
    assert spec is MODELS["qwen2.5-coder-1.5b"]
    assert is_prepared(spec)
