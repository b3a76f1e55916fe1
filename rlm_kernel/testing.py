"""Moved to :mod:`rlm_kernel.models.scripted`; this name is kept for old imports."""

from __future__ import annotations

from .models.scripted import ScriptedModel

__all__ = ["ScriptedModel"]
