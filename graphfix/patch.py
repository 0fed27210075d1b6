"""What a patch declares: identity, affected releases, targets with their wrappers, and a probe."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import wrapt
from packaging.specifiers import SpecifierSet

from .flags import flag_name

BUGGY, FIXED, DRIFTED = "buggy", "fixed", "drifted"
UNAFFECTED = "unaffected"  # the installed code never had the bug (state not-affected)


class Verdict(NamedTuple):
    """A probe's answer about the installed target code."""

    kind: str
    reason: str

    @classmethod
    def buggy(cls, reason: str) -> "Verdict":
        return cls(BUGGY, reason)

    @classmethod
    def fixed(cls, reason: str) -> "Verdict":
        return cls(FIXED, reason)

    @classmethod
    def drifted(cls, reason: str) -> "Verdict":
        return cls(DRIFTED, reason)

    @classmethod
    def unaffected(cls, reason: str) -> "Verdict":
        return cls(UNAFFECTED, reason)


class Refusal(RuntimeError):
    """Raised on purpose by a wrapper (a guard graphfix adds): passes through the call-time fallback."""


@dataclass(frozen=True)
class Target:
    module: str
    qualname: str
    wrapper: Callable | None = None
    optional: bool = False


def lookup(module: str, qualname: str):
    """The object at ``module:qualname`` as stored (wrapt's own path resolution: class attributes read from
    the defining class's ``__dict__``, so methods come back as plain functions), or ``None`` if absent."""
    try:
        return wrapt.resolve_path(sys.modules[module], qualname)[2]
    except wrapt.PathResolutionError:
        return None


MARK = "_self_graphfix"  # set on every wrapper graphfix installs: the patch id


def wrapped_by(obj, patch_id: str | None = None) -> bool:
    """Whether ``obj`` is, or wraps somewhere inside, a wrapper graphfix installed (for ``patch_id``,
    or for any patch when it is ``None``)."""
    def ours(w):
        mark = getattr(w, MARK, None)
        return mark is not None and patch_id in (None, mark)

    return obj is not None and wrapt.find_wrapper(obj, predicate=ours) is not None


def receiver(instance, args):
    """The object a method wrapper works on: wrapt's ``instance``, or the first argument when the method
    was called through its class (``Class.method(obj)``, as upstream tests do with stand-in objects)."""
    return instance if instance is not None else args[0]


class Targets:
    """What a probe sees: the original (unwrapped) target objects and the modules they live in."""

    def __init__(self, originals: dict[str, object]):
        self._originals = originals

    def __getitem__(self, qualname: str):
        return self._originals[qualname]

    @staticmethod
    def module(name: str):
        return sys.modules[name]


@dataclass
class Patch:
    id: str
    engine: str
    affected: str
    fixed_in: str
    upstream: str
    summary: str
    default: str = "auto"  # what flag value ``auto`` means: "auto" (range + probe) or "off" (opt-in)
    targets: list[Target] = field(default_factory=list)
    _needs: list[str] = field(default_factory=list)
    registry: object = field(default=None, repr=False)  # the process registry unless a test passes its own
    _probe: Callable[[Targets], Verdict] | None = None
    _on_remove: list[Callable[[], None]] = field(default_factory=list)

    def __post_init__(self):
        self.specifier = SpecifierSet(self.affected)
        if self.registry is None:
            from .registry import REGISTRY

            self.registry = REGISTRY
        self.registry.add(self)

    @property
    def flag(self) -> str:
        return flag_name(self.id)

    @property
    def modules(self) -> list[str]:
        names = [t.module for t in self.targets] + list(self._needs)
        return list(dict.fromkeys(names))

    def wraps(self, module: str, qualname: str, optional: bool = False):
        """Decorator: install the decorated wrapt wrapper on ``module:qualname``."""

        def deco(wrapper):
            self.targets.append(Target(module, qualname, wrapper, optional))
            return wrapper

        return deco

    def needs(self, module: str) -> None:
        """Declare a module the probe or the wrapper uses that holds no target (decided once it is imported)."""
        self._needs.append(module)

    def reads(self, module: str, qualname: str, optional: bool = False) -> None:
        """Declare an object the probe inspects without wrapping it."""
        self.targets.append(Target(module, qualname, None, optional))

    def probe(self, fn: Callable[[Targets], Verdict]):
        self._probe = fn
        return fn

    def on_remove(self, fn: Callable[[], None]):
        self._on_remove.append(fn)
        return fn

    def fall_back(self, exc: Exception) -> None:
        """For graphfix code that runs *inside* the engine's call (a proxy, a lazy mapping), where the
        registry's guard around the wrapper cannot see it: that code caught ``exc`` from its own work and
        uses the shipped value instead. Like a guarded wrapper's failure: one WARNING, state ``failed``,
        and every later call of this patch runs as shipped."""
        self.registry.fall_back(self.id, exc)
