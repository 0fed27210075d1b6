"""The one stand-in toolkit of graphfix's test and benchmark tooling (never shipped; stdlib only).

Importable as ``harness.standins`` from the repository, and as the top-level module
``standin_toolkit`` inside a harness CPU environment (where ``harness/standins/`` is on
``PYTHONPATH`` and the repository is not). Two uses:

* ``make_package(name, populate)`` turns the package ``name`` (a real file, being imported) into a
  permissive stand-in, as ``harness/standins/triton`` and ``torchvision`` do on CPU: calling a
  function returns an inert value, and a function called with a single function returns it unchanged
  (``@triton.jit``, ``@triton.autotune(configs=..., key=...)``).
* ``install_missing(roots)`` puts stand-ins in for packages that are not importable at all, as a CUDA
  machine without SGLang's compiled dependencies needs (``sgl_kernel``, ``xgrammar``): every function
  raises ``RuntimeError`` when it is *called*, so nothing silently computes a wrong answer.

In both: every ``name.*`` submodule imports (a meta-path finder creates it on demand);
capitalised attributes are real classes, one per (module, name), so ``isinstance`` checks,
subclassing and pydantic field types work; attributes looked up on those classes
(``InterpolationMode.BILINEAR``) and on other stand-in values are stand-ins again.
``tolerant_register_fake()`` lets ``torch.library.register_fake`` skip ops whose library is absent.
"""

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

MARKER = "HARNESS_STAND_IN"  # True in the namespace of every stand-in module


class StandIn:
    """A stand-in value. Inert: a pass-through decorator, else returns another stand-in.
    Raising: calling it raises RuntimeError (a kernel of a library that is not there)."""

    def __init__(self, name, raising=False):
        self._name, self._raising = name, raising

    def __call__(self, *args, **kwargs):
        if self._raising:
            raise RuntimeError(f"{self._name} called, but only a stand-in of {self._name.split('.')[0]} is present")
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return StandIn(self._name + "()")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return attribute(self._name, name, self._raising)

    def __getitem__(self, item):
        return self

    def __repr__(self):
        return f"<stand-in {self._name}>"


class _StandInMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return StandIn(f"{cls.__module__}.{cls.__name__}.{name}", cls._standin_raising)


class StandInClass(metaclass=_StandInMeta):
    """Base of every capitalised stand-in name: takes any arguments, is any pydantic type."""

    _standin_raising = False

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        from pydantic_core import core_schema

        return core_schema.any_schema()


_CLASSES = {}


def attribute(owner, name, raising=False):
    """The stand-in for ``owner.name``: a class (one per owner and name) if capitalised, else a value."""
    if name[:1].isupper():
        key = (owner, name)
        if key not in _CLASSES:
            _CLASSES[key] = _StandInMeta(name, (StandInClass,), {"__module__": owner, "_standin_raising": raising})
        return _CLASSES[key]
    return StandIn(f"{owner}.{name}", raising)


def _permissive(module, raising):
    name = module.__name__

    def __getattr__(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        value = attribute(name, attr, raising)
        setattr(module, attr, value)
        return value

    module.__getattr__ = __getattr__
    setattr(module, MARKER, True)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, root, raising, populate=None, with_root=False):
        self.root, self.raising, self.populate, self.with_root = root, raising, populate, with_root

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith(self.root + ".") or (self.with_root and fullname == self.root):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__path__ = []
        if module.__name__ == self.root:
            module.__version__ = "0.0.0+standin"
        _permissive(module, self.raising)
        if self.populate:
            self.populate(module)


def make_package(name, populate=None):
    """Make the package ``name`` (being imported from a real file) and all its submodules inert
    stand-ins; ``populate(module)`` may then set real values on each module it creates."""
    module = sys.modules[name]
    _permissive(module, raising=False)
    # After the path finders: real files in the stand-in package win.
    sys.meta_path.append(_Finder(name, raising=False, populate=populate))
    if populate:
        populate(module)


def is_standin(module) -> bool:
    return vars(module).get(MARKER) is True


def install_missing(roots, force=False) -> dict:
    """Stand-ins whose functions raise when called, for each of ``roots`` that is not importable
    (``force``: also for those that are; only before anything imported them). Idempotent.
    Returns ``{root: "stand-in" | "real"}``."""
    done = {}
    for root in roots:
        if root not in sys.modules:
            try:
                present = importlib.util.find_spec(root) is not None
            except (ImportError, ValueError):
                present = False
            if force or not present:
                sys.meta_path.insert(0, _Finder(root, raising=True, with_root=True))
            importlib.import_module(root)
        done[root] = "stand-in" if is_standin(sys.modules[root]) else "real"
    return done


def tolerant_register_fake() -> str:
    """Make ``torch.library.register_fake`` hand the function back unchanged where registering
    fails because the op library is absent (``register_fake(op)`` returns a decorator,
    ``register_fake(op, fn)`` registers at once). Idempotent."""
    import torch.library

    original = torch.library.register_fake
    if getattr(original, "_standin_tolerant", False):
        return "tolerant"

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

    register_fake._standin_tolerant = True
    torch.library.register_fake = register_fake
    return "tolerant"
