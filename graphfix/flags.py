"""Environment flags: the master switch ``GRAPHFIX`` and one ``GRAPHFIX_<ID>`` per patch."""

from __future__ import annotations

import os

MASTER = "GRAPHFIX"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
MASTER_VALUES = _TRUE + _FALSE
PATCH_VALUES = ("auto",) + _TRUE + _FALSE


class FlagError(ValueError):
    """A graphfix environment variable holds a value it does not accept."""

    def __init__(self, variable: str, value: str, allowed: tuple[str, ...]):
        super().__init__(
            f"{variable}={value!r} is not a valid value; allowed values: {', '.join(allowed)} "
            "(case-insensitive)"
        )
        self.variable, self.value, self.allowed = variable, value, allowed


def flag_name(patch_id: str) -> str:
    """``sglang.graph_pool`` -> ``GRAPHFIX_SGLANG_GRAPH_POOL``."""
    return "GRAPHFIX_" + patch_id.upper().replace(".", "_").replace("-", "_")


def master_enabled() -> bool:
    raw = os.environ.get(MASTER, "1")
    value = raw.strip().lower()
    if value not in MASTER_VALUES:
        raise FlagError(MASTER, raw, MASTER_VALUES)
    return value in _TRUE


def patch_mode(patch_id: str) -> str:
    """The patch's flag as one of ``auto``, ``on``, ``off``."""
    variable = flag_name(patch_id)
    raw = os.environ.get(variable, "auto")
    value = raw.strip().lower()
    if value not in PATCH_VALUES:
        raise FlagError(variable, raw, PATCH_VALUES)
    if value == "auto":
        return "auto"
    return "on" if value in _TRUE else "off"
