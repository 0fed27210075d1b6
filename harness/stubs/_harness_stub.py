"""Shared machinery for the harness's CPU stand-in packages (never shipped).

``make_package(name, populate)`` turns the package ``name`` (already being
imported) into a permissive stand-in:

* every ``name.*`` submodule imports (a meta-path finder creates it on demand);
* capitalised attributes are real classes, one per (module, name), so
  ``isinstance`` checks and subclassing work; attributes looked up on those
  classes (``InterpolationMode.BILINEAR``) are inert values;
* other attributes are inert callables; called with a single function they
  return it unchanged, so they work as decorators with or without arguments
  (``@triton.jit``, ``@triton.autotune(configs=..., key=...)``).

``populate(module)`` may then set real values on any module it creates.
"""

import importlib.abc
import importlib.machinery
import sys


class Inert:
    """Placeholder value: a pass-through decorator, else returns another Inert."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return Inert(self._name + "()")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return attribute(self._name, name)

    def __getitem__(self, item):
        return self

    def __repr__(self):
        return f"<stand-in {self._name}>"


class _StubMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Inert(f"{cls.__module__}.{cls.__name__}.{name}")


class StubClass(metaclass=_StubMeta):
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


_CLASSES = {}


def attribute(owner, name):
    if name[:1].isupper():
        key = (owner, name)
        if key not in _CLASSES:
            _CLASSES[key] = _StubMeta(name, (StubClass,), {"__module__": owner})
        return _CLASSES[key]
    return Inert(f"{owner}.{name}")


def _module_getattr(modname):
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = attribute(modname, name)
        setattr(sys.modules[modname], name, value)
        return value

    return __getattr__


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, root, populate):
        self.root, self.populate = root, populate

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith(self.root + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__path__ = []
        module.__getattr__ = _module_getattr(module.__name__)
        if self.populate:
            self.populate(module)


def make_package(name, populate=None):
    """Make the package ``name`` and all its submodules permissive stand-ins."""
    module = sys.modules[name]
    module.__getattr__ = _module_getattr(name)
    finder = _Finder(name, populate)
    # After the path finders: real files in the stand-in package win.
    sys.meta_path.append(finder)
    if populate:
        populate(module)
