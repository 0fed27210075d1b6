"""The patch registry: per-process decisions (one state per patch) and the wrappers in place."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import logging
import os
import sys
import threading
import types
import weakref
from dataclasses import dataclass, field

import wrapt
from packaging.version import InvalidVersion, Version

from . import flags, logs
from .patch import BUGGY, FIXED, MARK, UNAFFECTED, Patch, Refusal, Targets, Verdict, lookup, wrapped_by

log = logging.getLogger("graphfix")

APPLIED, RETIRED, NOT_AFFECTED = "applied", "retired", "not-affected"
DISABLED, DRIFTED, FAILED = "disabled", "drifted", "failed"
PENDING, NOT_INSTALLED = "pending", "not-installed"
STATES = (APPLIED, RETIRED, NOT_AFFECTED, DISABLED, DRIFTED, FAILED, PENDING, NOT_INSTALLED)

# engine distribution -> package holding its patch modules (imported lazily)
ENGINE_PACKAGES = {"sglang": "sglang_graphfix", "vllm": "vllm_graphfix"}


@dataclass
class PatchStatus:
    id: str
    engine: str
    engine_version: str | None
    flag: str
    flag_value: str
    state: str
    reason: str
    affected: str = ""
    fixed_in: str = ""


@dataclass
class _Record:
    patch: Patch
    state: str = PENDING
    reason: str = "graphfix.apply() has not run in this process (plugin not loaded)"
    active: bool = False  # hooks registered by apply() and not undone by remove()
    hooked: bool = False  # post-import hooks registered (they cannot be unregistered)
    handles: list = field(default_factory=list)  # (module, qualname, wrapt handle)
    live: "_Live" = field(default_factory=lambda: _Live(False))  # the installed wrappers act while on


class _Live:
    """Shared by the wrappers of one installation: off after remove() or a call-time fallback."""

    def __init__(self, on: bool = True):
        self.on = on


def engine_version(engine: str) -> str | None:
    """The installed distribution's version; for a source checkout on ``PYTHONPATH`` (no dist-info),
    the package's own ``__version__``."""
    try:
        return importlib.metadata.version(engine)
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        package = sys.modules.get(engine)
        if package is None and importlib.util.find_spec(engine) is not None:
            package = importlib.import_module(engine)
        version = getattr(package, "__version__", None)
        return str(version) if version else None
    except Exception:  # noqa: BLE001 - an engine that cannot be imported is not installed for us
        return None


class Registry:
    def __init__(self):
        self._records: dict[str, _Record] = {}
        self._lock = threading.RLock()
        self._deferred: dict[str, set] = {}  # patch -> modules still mid-import its decision waits for
        self._local = threading.local()  # .registering: hooks fire right away (wrapt) inside apply()
        _REGISTRIES.add(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.RLock()  # another thread of the parent may have held it: it is gone here
        self._local = threading.local()

    # -- declaration -------------------------------------------------------------------------
    def add(self, patch: Patch) -> None:
        with self._lock:
            if patch.id in self._records and self._records[patch.id].patch is not patch:
                raise ValueError(f"duplicate patch id {patch.id!r}: a patch with this id is already registered")
            self._records[patch.id] = _Record(patch)

    def load(self, engine: str | None = None) -> list[Patch]:
        """Import the patch modules of ``engine`` (or of every engine); return their patches."""
        for eng, package in ENGINE_PACKAGES.items():
            if engine in (None, eng):
                pkg = importlib.import_module(package)
                for name in pkg.PATCH_MODULES:
                    importlib.import_module(f"{package}.{name}")
        return [r.patch for r in self._records.values() if engine in (None, r.patch.engine)]

    def record(self, patch_id: str) -> _Record:
        return self._records[patch_id]

    # -- decisions ---------------------------------------------------------------------------
    def _set(self, rec: _Record, state: str, reason: str) -> None:
        rec.state, rec.reason = state, reason
        logs.decision(rec.patch.id, state, reason)

    def unknown_variables(self) -> list[str]:
        """One message per set ``GRAPHFIX_*`` variable that names no flag, with the closest real one."""
        ids = set(self._records)
        try:  # every engine's flags are known, whichever engine this process applies
            ids |= {p.id for p in REGISTRY.load()}
        except Exception as exc:  # noqa: BLE001 - a report must not fail
            log.debug("cannot load every patch module: %s", exc)
        return [flags.describe_unknown(n, c) for n, c in flags.unknown_variables(ids)]

    def apply(self, engine: str | None = None, only=None) -> None:
        patches = self.load(engine)
        for message in self.unknown_variables():
            if message not in _warned:
                _warned.add(message)
                log.warning("%s", message)
        enabled = flags.master_enabled()
        modes = {p.id: flags.patch_mode(p.id) for p in patches}  # every bad value raises here
        for patch in patches:
            if only is not None and patch.id not in only:
                continue
            with self._lock:
                rec = self._records[patch.id]
                if rec.active:
                    continue  # idempotent: hooks registered and wrappers (if any) in place
                version = engine_version(patch.engine)
                if not enabled:
                    self._set(rec, DISABLED, f"{flags.MASTER}=0 turns every patch off")
                    continue
                if modes[patch.id] == "off":
                    self._set(rec, DISABLED, f"{patch.flag}=off")
                    continue
                if modes[patch.id] == "auto" and patch.default == "off":
                    self._set(rec, DISABLED, f"opt-in: applied only with {patch.flag}=on")
                    continue
                if version is None:
                    self._set(rec, NOT_INSTALLED, f"{patch.engine} is not installed")
                    continue
                rec.active = True
                self._set(rec, PENDING, f"waiting for {', '.join(patch.modules)} to be imported")
            self._local.registering = True  # a hook for a module already in sys.modules fires right now
            try:
                if not rec.hooked:
                    rec.hooked = True
                    for module in patch.modules:
                        wrapt.register_post_import_hook(self._hook_for(patch.id), module)
                else:
                    self._on_import(patch.id)
            finally:
                self._local.registering = False
        self._retry_deferred()

    def _hook_for(self, patch_id: str):
        def hook(module):
            self._on_import(patch_id, module.__name__)

        return hook

    def _on_import(self, patch_id: str, current: str | None = None) -> None:
        """Decide ``patch_id`` if all its modules are in. Never raises: it runs inside engine imports."""
        rec = self._records[patch_id]
        try:
            self._try_decide(rec, current)
        except Exception as exc:  # noqa: BLE001 - a decision must never break the engine's import
            try:
                self._unwrap(rec)
            except Exception:  # noqa: BLE001 - reported below; what is left is the engine's own code
                pass
            self._set(rec, DRIFTED, f"decision raised {type(exc).__name__}: {exc}; target left as shipped")

    def _try_decide(self, rec: _Record, current: str | None) -> None:
        patch_id = rec.patch.id
        with self._lock:
            if not rec.active or rec.state != PENDING:
                return
            absent = []
            registering = getattr(self._local, "registering", False)
            for module in rec.patch.modules:
                if _initializing(module) and (module != current or registering):
                    # mid-import (an import cycle, or apply() called from inside the import): decide once
                    # it is complete -- its own post-import hook, or the next import / status() / apply()
                    self._defer(patch_id, {module})
                    return
                if module not in sys.modules:
                    try:  # siblings of an imported target: bring them in so all wrappers land together
                        importlib.import_module(module)
                    except ModuleNotFoundError as exc:
                        if exc.name is None or not (module + ".").startswith(exc.name + "."):
                            return  # something it imports is missing: not this release's layout question
                        absent.append(module)  # this release has no such module
                    except Exception as exc:  # noqa: BLE001 - engine import order; retried by its own hook
                        log.debug("%s: %s not importable yet: %s", patch_id, module, exc)
                        return
            if rec.state == PENDING:  # a sibling's own hook may have decided while we imported it
                self._decide(rec, absent)

    def _defer(self, patch_id: str, waiting: set) -> None:
        self._deferred[patch_id] = set(waiting)
        _RetryFinder.install()

    def _retry_deferred(self, blocking: bool = True) -> None:
        if not self._deferred or getattr(self._local, "retrying", False):
            return
        if not self._lock.acquire(blocking=blocking):
            return  # another thread is deciding (an import inside it may be what calls us): next time
        self._local.retrying = True
        try:
            for patch_id, waiting in list(self._deferred.items()):
                if not any(_initializing(m) for m in waiting):
                    self._deferred.pop(patch_id, None)
                    self._on_import(patch_id)
        finally:
            self._local.retrying = False
            self._lock.release()

    def _wait_for_imports(self, rec: _Record, why: str) -> bool:
        """A negative answer while other modules are still mid-import (a probe's lazy import may be one
        of them) is not final: decide again once they are complete."""
        busy = {name for name, module in list(sys.modules.items())
                if name not in rec.patch.modules and _initializing_module(module)}
        if busy:
            self._defer(rec.patch.id, busy)
            rec.reason = f"decision deferred until {', '.join(sorted(busy)[:3])} finished importing ({why})"
        return bool(busy)

    def _decide(self, rec: _Record, absent=()) -> None:
        patch = rec.patch
        version = engine_version(patch.engine)
        in_range = _in_range(patch, version)
        if absent:
            kind = DRIFTED if in_range else NOT_AFFECTED
            self._set(rec, kind, f"module {absent[0]} does not exist in {patch.engine} {version}")
            return
        originals = {}
        for t in patch.targets:
            current = lookup(t.module, t.qualname)
            if current is not None and wrapped_by(current, patch.id):
                self._set(rec, APPLIED, "already wrapped in this process (inherited or loaded twice)")
                return
            if current is None and not t.optional:
                if self._wait_for_imports(rec, f"{t.module}:{t.qualname} not found"):
                    return
                kind = DRIFTED if in_range else NOT_AFFECTED
                self._set(rec, kind, f"{t.module}:{t.qualname} not found in {patch.engine} {version}")
                return
            if t.wrapper is not None and current is not None and not _plain_function(current):
                kind = DRIFTED if in_range else NOT_AFFECTED
                self._set(rec, kind, f"{t.module}:{t.qualname} is a {_kind(current)}, not a plain function: left alone")
                return
            originals[t.qualname] = current
        try:
            verdict = patch._probe(Targets(originals))
        except Exception as exc:  # noqa: BLE001 - a probe must never break the engine
            verdict = Verdict.drifted(f"probe raised {type(exc).__name__}: {exc}")
        kind, why = verdict
        if kind == FIXED:
            self._set(rec, RETIRED, f"{patch.engine} {version} already has the upstream fix: {why}")
            return
        if kind == UNAFFECTED:
            self._set(rec, NOT_AFFECTED, f"{patch.engine} {version}: {why}")
            return
        if kind != BUGGY:
            if self._wait_for_imports(rec, why):
                return
            self._set(rec, DRIFTED, f"target shape not recognised, left alone: {why}")
            return
        if not in_range and flags.patch_mode(patch.id) != "on":
            self._set(
                rec, NOT_AFFECTED,
                f"{patch.engine} {version} is outside {patch.affected} (probe: {why}); {patch.flag}=on forces it",
            )
            return
        rec.live = _Live()
        try:
            for t in patch.targets:
                if t.wrapper is not None and originals[t.qualname] is not None:
                    handle = wrapt.wrap_function_wrapper(t.module, t.qualname, self._guard(rec, t.wrapper))
                    setattr(handle, MARK, patch.id)  # recognised by any registry in this process
                    rec.handles.append((t.module, t.qualname, handle))
        except Exception as exc:  # noqa: BLE001 - leave the engine as shipped
            rec.live.on = False  # a wrapper that could not be taken out again passes every call through
            self._unwrap(rec)
            self._set(rec, FAILED, f"installer raised {type(exc).__name__}: {exc}; target left as shipped")
            return
        self._set(rec, APPLIED, f"{patch.engine} {version}: {why}")

    # -- call time ---------------------------------------------------------------------------
    def _guard(self, rec: _Record, wrapper):
        """``wrapper`` made fail-safe: graphfix's own failure falls back to the shipped call."""
        live = rec.live

        def graphfix_guard(wrapped, instance, args, kwargs):
            if not live.on:
                return wrapped(*args, **kwargs)
            ran = []  # what the engine's own call did: ("returned", value) or ("raised", exception)

            def original(*a, **kw):
                try:
                    result = wrapped(*a, **kw)
                except BaseException as exc:
                    ran.append(("raised", exc))
                    raise
                ran.append(("returned", result))
                return result

            try:
                return wrapper(original, instance, args, kwargs)
            except Exception as exc:
                if ran and ran[-1][0] == "raised":
                    if exc is ran[-1][1]:
                        raise  # the engine's own exception, unchanged
                    self._fell_back(rec, live, exc)
                    raise ran[-1][1] from None  # graphfix failed while the engine's exception passed through
                if isinstance(exc, Refusal):
                    raise
                self._fell_back(rec, live, exc)
                if ran:
                    return ran[-1][1]  # the original already ran: never call it twice
                return wrapped(*args, **kwargs)

        return graphfix_guard

    def fall_back(self, patch_id: str, exc: Exception) -> None:
        """graphfix's own code inside an engine call failed and used the shipped value (``Patch.fall_back``)."""
        rec = self._records[patch_id]
        self._fell_back(rec, rec.live, exc)

    def _fell_back(self, rec: _Record, live, exc: Exception) -> None:
        with self._lock:
            if not live.on:
                return
            live.on = False  # every later call of this patch runs as shipped
            self._set(rec, FAILED, f"fell back at call time: the wrapper raised {type(exc).__name__}: {exc}; "
                                   "calls run as shipped from now on")
        # the state change above is the one WARNING (graphfix.logs); the traceback is for debugging
        log.debug("%s: traceback of the wrapper failure", rec.patch.id, exc_info=exc)

    # -- removal -----------------------------------------------------------------------------
    def _unwrap(self, rec: _Record) -> list[str]:
        """Take every wrapper of ``rec`` out; return the targets where someone else's replacement sits
        (left as they set it: the wrapper inside it, if any, passes every call through from now on)."""
        rec.live.on = False
        kept = []
        while rec.handles:
            module, qualname, handle = rec.handles.pop()
            try:
                if wrapt.unwrap_object(sys.modules[module], qualname, handle, missing_ok=True) is None:
                    kept.append(f"{module}:{qualname}")
            except Exception as exc:  # noqa: BLE001 - e.g. a non-wrapt replacement on top of ours
                log.debug("%s: cannot take the wrapper off %s:%s: %s", rec.patch.id, module, qualname, exc)
                kept.append(f"{module}:{qualname}")
        return kept

    def remove(self, only=None) -> None:
        """Unwrap every patch; completes for all of them whatever a target looks like now."""
        with self._lock:
            for rec in reversed(list(self._records.values())):
                if only is not None and rec.patch.id not in only:
                    continue
                was_applied = bool(rec.handles)
                kept = self._unwrap(rec)
                for reset in rec.patch._on_remove:
                    try:
                        reset()
                    except Exception as exc:  # noqa: BLE001 - the other patches still get removed
                        log.warning("%s: on_remove hook raised %s: %s", rec.patch.id, type(exc).__name__, exc)
                self._deferred.pop(rec.patch.id, None)
                if rec.active or was_applied:
                    rec.active = False
                    note = (f"; replaced by someone else, left as they set it (graphfix's wrapper passes calls "
                            f"through): {', '.join(kept)}") if kept else ""
                    self._set(rec, DISABLED, "removed by graphfix.remove()" + note)

    def _in_place(self, rec: _Record) -> str | None:
        """``None`` if every wrapper of an applied patch is still reachable at its target, else what moved."""
        for module, qualname, handle in rec.handles:
            try:
                current = lookup(module, qualname) if module in sys.modules else None
                if current is None or wrapt.find_wrapper(current, handle) is None:
                    return f"{module}:{qualname}"
            except Exception:  # noqa: BLE001 - an unreadable target is not a wrapper in place
                return f"{module}:{qualname}"
        return None

    # -- reporting ---------------------------------------------------------------------------
    def status(self, engine: str | None = None) -> list[PatchStatus]:
        rows = []
        self._retry_deferred()
        for patch in self.load(engine):
            rec = self._records[patch.id]
            state, reason = rec.state, rec.reason
            moved = self._in_place(rec) if state == APPLIED else None
            if moved:
                state, reason = DRIFTED, (f"{moved} was replaced after graphfix wrapped it (reassigned or "
                                          "importlib.reload): the fix is not in place there")
            value = os.environ.get(patch.flag, "auto")
            try:
                flags.patch_mode(patch.id)
                if not flags.master_enabled() and state == PENDING:
                    state, reason = DISABLED, f"{flags.MASTER}=0 turns every patch off"
            except flags.FlagError as exc:
                state, reason = DISABLED, str(exc)
            version = engine_version(patch.engine)
            if version is None and state != DISABLED:
                state, reason = NOT_INSTALLED, f"{patch.engine} is not installed"
            rows.append(PatchStatus(patch.id, patch.engine, version, patch.flag, value, state, reason,
                                    patch.affected, patch.fixed_in))
        return rows


class _RetryFinder:
    """A meta-path entry that finds nothing: each import gives deferred decisions a chance to run."""

    installed = False

    @classmethod
    def install(cls) -> None:
        if not cls.installed:
            cls.installed = True
            sys.meta_path.insert(0, cls())

    def find_spec(self, name, path=None, target=None):
        for registry in list(_REGISTRIES):
            if registry._deferred:
                registry._retry_deferred(blocking=False)
        return None


_warned: set = set()  # unknown-variable warnings already logged by this process
_REGISTRIES: "weakref.WeakSet[Registry]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for registry in list(_REGISTRIES):
        registry._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _in_range(patch: Patch, version: str | None) -> bool:
    """In the affected range. A post release (or local build) counts as the release it follows; a pre- or
    dev release of an affected release, or of the first fixed one, is left to the probe (in range)."""
    try:
        v = Version(version) if version is not None else None
    except InvalidVersion:
        return False
    if v is None:
        return False
    if patch.specifier.contains(v, prereleases=True):
        return True
    base = Version(v.base_version)  # 0.5.14.post1 -> 0.5.14, 0.5.19rc1 / 0.5.19.dev12+gabc -> 0.5.19
    if v.is_postrelease and not v.is_prerelease:
        return patch.specifier.contains(base, prereleases=True)
    if v.is_prerelease:
        return patch.specifier.contains(base, prereleases=True) or base == Version(patch.fixed_in)
    return False


def _initializing(module: str) -> bool:
    return _initializing_module(sys.modules.get(module))


def _initializing_module(module) -> bool:
    try:
        return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))
    except Exception:  # noqa: BLE001 - a lazy module object that cannot answer is not being imported by us
        return False


def _kind(obj) -> str:
    if isinstance(obj, (staticmethod, classmethod, property)):
        return type(obj).__name__
    return f"{type(obj).__module__}.{type(obj).__qualname__} object"


def _plain_function(obj) -> bool:
    """A plain function, seen through graphfix's own wrappers (two patches may wrap one target)."""
    while isinstance(obj, wrapt.BaseObjectProxy) and getattr(obj, MARK, None):
        obj = obj.__wrapped__
    return type(obj) is types.FunctionType


REGISTRY = Registry()
