"""graphfix: CUDA-graph fixes for released vLLM and SGLang, applied as wrapt wrappers.

Public API: :func:`apply`, :func:`remove`, :func:`status`; patch modules use :class:`Patch`,
:class:`Verdict` and the probe helpers :func:`code_refs`, :func:`params`, :func:`attr_reads`.
"""

from __future__ import annotations

from . import logs
from .flags import FlagError, flag_name
from .patch import Patch, Refusal, Targets, Verdict, receiver, wrapped_by
from .probes import attr_reads, code_refs, params
from .registry import REGISTRY, STATES, PatchStatus

__all__ = [
    "FlagError", "Patch", "PatchStatus", "Refusal", "STATES", "Targets", "Verdict",
    "apply", "attr_reads", "code_refs", "flag_name", "params", "receiver", "remove", "status", "wrapped_by",
]
__version__ = "0.1.0"


def apply(engine: str | None = None, only=None) -> list[PatchStatus]:
    """Install every applicable patch of ``engine`` ("sglang", "vllm", or ``None`` for both).

    Targets not imported yet are patched by a post-import hook the moment they are imported.
    Idempotent. Raises :class:`FlagError` when a graphfix environment variable is invalid.
    Logs one summary line per process (see :mod:`graphfix.logs`; it attaches no handler).
    """
    logs.verbosity()  # a bad GRAPHFIX_LOG stops start-up like any other bad flag
    REGISTRY.apply(engine, only)
    rows = REGISTRY.status(engine)
    logs.summary(engine, rows)
    return rows


def remove(only=None) -> None:
    """Unwrap every patch (or the ids in ``only``): each target gets its very original object back."""
    REGISTRY.remove(only)


def status(engine: str | None = None) -> list[PatchStatus]:
    """One :class:`PatchStatus` per known patch, as decided in this process so far."""
    return REGISTRY.status(engine)
