"""Stand-ins that let a released SGLang's pure-Python code import on a CUDA machine that lacks
SGLang's compiled dependencies (the lent H200 has torch 2.11 but no sglang-kernel, flashinfer or
xgrammar, and at most 64 MiB travels to it).

On a CUDA machine ``sglang.srt.utils.is_cuda()`` is true, so SGLang imports ``sgl_kernel`` at
module level and registers fake implementations for ``sgl_kernel::*`` custom ops. Neither works
without the real op library. From 0.5.16 the function-call parser also imports ``xgrammar`` at
module level (a 44 MB wheel). :func:`install` (call it before anything imports sglang):

* puts stand-in ``sgl_kernel`` and ``xgrammar`` packages into ``sys.modules`` when the real ones
  are not importable: every submodule exists, capitalised names are real (empty) classes, every
  other attribute is a stand-in that raises if it is ever *called* (the graph benchmark and the
  GPU tests never call an SGLang kernel or a grammar; they run their own toy model);
* makes ``torch.library.register_fake`` tolerant: registering a fake for an op that does not
  exist returns a no-op decorator instead of raising.

Nothing here changes SGLang's graph backends, runners or allocator behaviour.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import sys

STAND_IN = "stand-in module (graphfix benchmarks/gpu_env)"
ROOTS = ("sgl_kernel", "xgrammar")


class _MissingKernel:
    """A kernel (or kernel-side object such as ``scalar_types``) of the absent library: attribute
    access yields further stand-ins, so module-level tables build; calling one raises."""

    def __init__(self, qualname):
        self._qualname = qualname

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._qualname} called, but only the {STAND_IN} is present")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _MissingKernel(f"{self._qualname}.{name}")

    def __repr__(self):
        return f"<missing kernel {self._qualname}>"


def _any_schema(cls, source, handler):
    """Lets a stand-in class appear as a pydantic field type (SGLang's protocol models use some)."""
    from pydantic_core import core_schema

    return core_schema.any_schema()


def _module_getattr(modname):
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name[:1].isupper():  # classes/enums: a real class, so isinstance()/subclassing work
            cls = type(name, (), {"__init__": lambda self, *a, **k: None, "__module__": modname,
                                  "__get_pydantic_core_schema__": classmethod(_any_schema)})
            setattr(sys.modules[modname], name, cls)
            return cls
        return _MissingKernel(f"{modname}.{name}")

    return __getattr__


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, root):
        self.root = root

    def find_spec(self, fullname, path, target=None):
        if fullname == self.root or fullname.startswith(self.root + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__path__ = []
        module.__version__ = "0.0.0+standin"
        module.__doc__ = STAND_IN
        module.__getattr__ = _module_getattr(module.__name__)


def _tolerant_register_fake(original):
    """``register_fake(op)`` returns a decorator and ``register_fake(op, fn)`` registers at once;
    either may fail only because the op library is absent. Then the fake is not registered and the
    function is handed back unchanged."""

    @functools.wraps(original)
    def register_fake(op, *args, **kwargs):
        try:
            result = original(op, *args, **kwargs)
        except Exception:  # noqa: BLE001 - op library absent: registering its fake is moot
            if args and callable(args[0]):
                return args[0]
            return lambda fn: fn
        if args or not callable(result):
            return result

        def decorator(fn):
            try:
                return result(fn)
            except Exception:  # noqa: BLE001 - same: the op does not exist here
                return fn

        return decorator

    register_fake._graphfix_tolerant = True
    return register_fake


def install() -> dict:
    """Idempotent. Returns what was done, for the benchmark's JSON."""
    done = {}
    for root in ROOTS:
        try:
            real = root in sys.modules or importlib.util.find_spec(root) is not None
        except (ImportError, ValueError):
            real = False
        if not real:
            sys.meta_path.insert(0, _StandInFinder(root))
            importlib.import_module(root)
        done[root] = "stand-in" if getattr(sys.modules.get(root), "__doc__", None) == STAND_IN else "real"
    import torch.library

    if not getattr(torch.library.register_fake, "_graphfix_tolerant", False):
        torch.library.register_fake = _tolerant_register_fake(torch.library.register_fake)
    done["register_fake"] = "tolerant"
    return done


def describe_sglang() -> dict:
    """Version and location of the sglang that will be imported (without importing it)."""
    import importlib.metadata

    spec = importlib.util.find_spec("sglang")
    try:
        version = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {"version": version, "path": None if spec is None else list(spec.submodule_search_locations or [])}


if __name__ == "__main__":
    print(install(), describe_sglang())
