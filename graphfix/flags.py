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


# graphfix variables that are not patch flags (the logging level, the test/demo harness)
OTHER_VARIABLES = frozenset({"GRAPHFIX_LOG", "GRAPHFIX_ENGINE_CACHE", "GRAPHFIX_SKIP_ENGINES",
                             "GRAPHFIX_HARNESS_RELEASE", "GRAPHFIX_TEST_WORKERS"})


def unknown_variables(patch_ids) -> list[tuple[str, str | None]]:
    """``(variable, closest known name or None)`` for each set ``GRAPHFIX_*`` variable graphfix does not know."""
    import difflib

    known = {MASTER} | set(OTHER_VARIABLES) | {flag_name(p) for p in patch_ids}
    out = []
    for name in sorted(os.environ):
        if name.upper().startswith(MASTER + "_") and name not in known:
            close = difflib.get_close_matches(name.upper(), sorted(known), n=1, cutoff=0.6)
            out.append((name, close[0] if close else None))
    return out


def describe_unknown(name: str, closest: str | None) -> str:
    hint = f"; did you mean {closest}?" if closest else ""
    return f"{name} is not a graphfix variable (ignored){hint}"
