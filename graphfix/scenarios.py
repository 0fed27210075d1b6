"""Observable scenarios: drive the installed engine's real code on CPU and report what a patch changes.

A scenario module (``<engine>_graphfix/scenarios/<name>.py``) registers one function per patch with
:func:`scenario`. :func:`observe` runs it with the patch off, then on, in this process, and is what
``graphfix verify`` and the upstream-parity tests (through ``python -m graphfix.observe``) use.
"""

from __future__ import annotations

import contextlib
import importlib
import traceback
from dataclasses import dataclass, field
from typing import Callable

from .registry import APPLIED, ENGINE_PACKAGES, REGISTRY

_SCENARIOS: dict[str, "Scenario"] = {}


@dataclass
class Scenario:
    patch_id: str
    fn: Callable[..., dict]
    cases: dict = field(default_factory=lambda: {"default": {}})
    fixed: Callable[[dict], bool] | None = None
    describe: Callable[[dict], str] | None = None
    controls: tuple = ()  # cases the patch must leave exactly as they were
    additions: tuple = ()  # cases that check graphfix's own additions (no upstream counterpart)

    def kind(self, case: str) -> str:
        return CONTROL if case in self.controls else ADDITION if case in self.additions else FIX


FIX, CONTROL, ADDITION = "fix", "control", "addition"
# what `graphfix verify` says about one case of an applied patch
FIXED, NOT_FIXED, UNCHANGED, CHANGED = "FIXED", "NOT FIXED", "unchanged", "CHANGED"
ADDED, ADDITION_FAILED, STILL_FIXED, UNOBSERVABLE = (
    "graphfix addition", "ADDITION FAILED", "fixed before and after", "not observable")


def scenario(patch_id: str, cases=None, fixed=None, describe=None, controls=(), additions=()):
    """Register ``fn(**case) -> dict`` (JSON-serialisable) as the observable scenario of ``patch_id``.

    ``fixed(observation)`` says whether an observation shows the upstream-fixed behaviour;
    ``describe(observation)`` renders it in one short line for ``graphfix verify``. ``controls`` name the
    cases the patch must not change; ``additions`` the cases that check behaviour graphfix adds beyond
    upstream (reported as such, never as a fix).
    """

    def deco(fn):
        _SCENARIOS[patch_id] = Scenario(patch_id, fn, cases or {"default": {}}, fixed, describe,
                                        tuple(controls), tuple(additions))
        return fn

    return deco


@contextlib.contextmanager
def replaced(target, **values):
    """``target``'s attributes (a module's globals) set to ``values`` for the block; on exit each is put
    back, or removed where ``target`` had none of its own. The one way a scenario may change a global it
    does not own, and only where the engine's code reads it without taking it as an argument: each use
    says which global and why."""
    missing = object()
    saved = {name: vars(target).get(name, missing) for name in values}
    try:
        for name, value in values.items():
            setattr(target, name, value)
        yield target
    finally:
        for name, old in saved.items():
            if old is not missing:
                setattr(target, name, old)
            elif name in vars(target):
                delattr(target, name)


def load(engine: str) -> dict[str, Scenario]:
    package = ENGINE_PACKAGES[engine]
    for name in importlib.import_module(package).SCENARIO_MODULES:
        importlib.import_module(f"{package}.scenarios.{name}")
    return {pid: s for pid, s in _SCENARIOS.items() if pid.split(".")[0] == engine}


def _run(sc: Scenario, case: dict):
    try:
        return sc.fn(**case)
    except Exception as exc:  # noqa: BLE001 - reported, not raised: one broken scenario must not hide others
        return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=-3)}


def observe(engine: str, only=None, modes=("off", "on")) -> dict:
    """``{patch_id: {"state", "reason", "cases": {case: {"off": obs, "on": obs|None}}}}``.

    "off" runs with every graphfix wrapper removed; "on" after ``graphfix.apply(only=[patch_id])``
    (flags honoured) and only when that leaves the patch ``applied``.
    """
    REGISTRY.load(engine)
    out = {}
    for pid, sc in load(engine).items():
        if only is not None and pid not in only:
            continue
        REGISTRY.remove()
        result = {"cases": {name: {} for name in sc.cases}}
        if "off" in modes:
            for name, case in sc.cases.items():
                result["cases"][name]["off"] = _run(sc, case)
        REGISTRY.apply(engine, only=[pid])
        rec = REGISTRY.record(pid)
        result["state"], result["reason"] = rec.state, rec.reason
        if "on" in modes:
            for name, case in sc.cases.items():
                result["cases"][name]["on"] = _run(sc, case) if rec.state == APPLIED else None
        REGISTRY.remove()
        out[pid] = result
    return out


def is_fixed(patch_id: str, observation) -> bool | None:
    sc = _SCENARIOS[patch_id]
    if observation is None or "error" in observation or sc.fixed is None:
        return None
    verdict = sc.fixed(observation)
    return None if verdict is None else bool(verdict)


def render(patch_id: str, observation) -> str:
    sc = _SCENARIOS[patch_id]
    if observation is None:
        return "-"
    if "error" in observation:
        return "error: " + observation["error"]
    return sc.describe(observation) if sc.describe else repr(observation)


def judge(patch_id: str, case: str, before, after) -> tuple[str, bool | None]:
    """``(verdict, ok)`` for one case of an applied patch: ``FIXED`` only where ``before`` shows the bug
    and ``after`` the fixed behaviour; ``ok`` is False where verify must fail, None where it cannot tell."""
    kind = _SCENARIOS[patch_id].kind(case)
    after_fixed, before_fixed = is_fixed(patch_id, after), is_fixed(patch_id, before)
    if kind == CONTROL:
        return (UNCHANGED, True) if before == after and before is not None else (CHANGED, False)
    if kind == ADDITION:
        return (ADDED, True) if after_fixed else (ADDITION_FAILED, False)
    if after is None or "error" in after or after_fixed is False:
        return NOT_FIXED, False
    if after_fixed is None:
        return UNOBSERVABLE, None
    if before_fixed is False:
        return FIXED, True
    return (UNCHANGED, True) if before == after else (STILL_FIXED, True)


def judge_patch(verdicts: dict) -> tuple[str, bool]:
    """One verdict for a patch from its cases' ``{case: (verdict, ok)}``."""
    if any(ok is False for _, ok in verdicts.values()):
        return NOT_FIXED, False
    if any(v == FIXED for v, _ in verdicts.values()):
        return FIXED, True
    return "NO BUG SHOWN", False  # applied, yet no case shows the bug it is said to fix
