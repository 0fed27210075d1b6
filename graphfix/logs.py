"""Where graphfix's log lines go, and how loud they are.

graphfix logs on the ``graphfix`` logger. Inside an engine the operator reads the engine's log, which
nothing routes ``graphfix`` into: SGLang loads plugins before it configures logging, vLLM gives only
its ``vllm`` logger a handler. So the engine entry points call :func:`route`, which gives the
``graphfix`` logger one handler that, at each record, hands it on as if the engine's own top logger
had logged it: to that logger's handlers and, where it propagates, root's (same level, same format:
vLLM's ``vllm`` handler, SGLang's root handler from ``configure_logger``); while that chain has no
handler yet (SGLang before ``configure_logger``), to stderr in a format like the engine's. Deciding at
emit time makes the host's order irrelevant (``basicConfig`` before or after the plugin loader), and
the ``graphfix`` logger stops propagating, so each line arrives once. A handler the host attaches to
``graphfix`` itself takes over: the route then stands aside.

``graphfix.apply()`` alone (library code, scripts) attaches nothing: its lines follow the host's own
logging configuration, and warnings reach stderr through Python's last-resort handler.

``GRAPHFIX_LOG``: ``info`` (default) or ``warning`` (decisions and the summary drop to debug; drifted,
failed and every other warning stay visible).
"""

from __future__ import annotations

import copy
import logging
import os
import sys

from .flags import FlagError

log = logging.getLogger("graphfix")

LOG = "GRAPHFIX_LOG"
LOG_VALUES = ("info", "warning")
WARN_STATES = ("drifted", "failed")  # registry states that are always warnings
QUIET_STATES = ("pending",)  # not a decision yet: apply()'s summary line covers it

# stderr format used while the engine's log has no handler: the engine's own, minus what it fills in later
ENGINE_FORMATS = {
    "sglang": ("[%(asctime)s] %(message)s", "%Y-%m-%d %H:%M:%S"),
    "vllm": ("%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s", "%m-%d %H:%M:%S"),
}

_announced: set = set()  # (pid, engine) that printed apply()'s summary line


def verbosity() -> str:
    """``GRAPHFIX_LOG`` as ``info`` or ``warning``; raises :class:`FlagError` on anything else."""
    raw = os.environ.get(LOG, "info")
    value = raw.strip().lower()
    if value not in LOG_VALUES:
        raise FlagError(LOG, raw, LOG_VALUES)
    return value


def _info() -> int:
    try:
        return logging.INFO if verbosity() == "info" else logging.DEBUG
    except FlagError:  # apply() has already refused it; never fail while logging
        return logging.INFO


def decision(patch_id: str, state: str, reason: str) -> None:
    """Log one patch decision: drifted/failed as warnings, pending as debug, the rest at info."""
    level = logging.WARNING if state in WARN_STATES else logging.DEBUG if state in QUIET_STATES else _info()
    log.log(level, "%s: %s (%s)", patch_id, state, reason)


def summary(engine: str | None, rows) -> None:
    """Once per process and engine: one line with every patch's state as apply() left it."""
    key = (os.getpid(), engine)
    if key in _announced:
        return
    _announced.add(key)
    from . import __version__

    states: dict[str, list[str]] = {}
    for row in rows:
        states.setdefault(row.state, []).append(row.id)
    engines = sorted({f"{r.engine} {r.engine_version}" for r in rows if r.engine_version}) or ["no engine"]
    parts = [f"{s}{' (decided when imported)' if s == 'pending' else ''}: {', '.join(ids)}"
             for s, ids in states.items()]
    log.log(_info(), "graphfix %s on %s: %s", __version__, ", ".join(engines), "; ".join(parts))


def route(engine: str) -> None:
    """Give the ``graphfix`` logger a way into ``engine``'s log (see the module docstring). Idempotent."""
    if log.handlers:
        return  # routed already, or the host configured the graphfix logger itself
    log.addHandler(_Route(engine))
    log.propagate = False
    if log.level == logging.NOTSET:
        log.setLevel(logging.INFO)


class _Route(logging.Handler):
    def __init__(self, engine: str):
        super().__init__()
        self.engine = engine
        self.setFormatter(logging.Formatter(*ENGINE_FORMATS.get(engine, ENGINE_FORMATS["vllm"])))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if len(log.handlers) > 1:
                return  # the host attached its own handler to graphfix: that one speaks
            floor = logging.WARNING if _info() == logging.DEBUG else logging.NOTSET
            owner = node = logging.getLogger(self.engine)
            handlers = []
            while node is not None:
                handlers += node.handlers
                node = node.parent if node.propagate else None
            if not handlers:
                if record.levelno >= max(logging.INFO, floor):
                    sys.stderr.write(self.format(_marked(record)) + "\n")
                    sys.stderr.flush()
                return
            if record.levelno < max(owner.getEffectiveLevel(), floor):
                return
            for handler in handlers:
                if record.levelno >= handler.level:
                    handler.handle(record if _shows_name(handler) else _marked(record))
        except Exception:  # noqa: BLE001 - logging must never break the engine
            self.handleError(record)


def _marked(record: logging.LogRecord) -> logging.LogRecord:
    """A copy whose message starts with "graphfix", for formats that do not print the logger name."""
    message = record.getMessage()
    if message.startswith("graphfix"):
        return record
    marked = copy.copy(record)
    marked.msg, marked.args = f"graphfix: {message}", None
    return marked


def _shows_name(handler: logging.Handler) -> bool:
    fmt = getattr(getattr(handler.formatter, "_style", None), "_fmt", "") or ""
    return any(token in fmt for token in ("%(name)", "{name", "$name", "${name}"))
