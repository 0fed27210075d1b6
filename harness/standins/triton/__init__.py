"""CPU stand-in for ``triton`` (harness only; never shipped).

SGLang imports triton unconditionally and decorates hundreds of kernels at
import time.  Every ``triton.*`` import succeeds (see ``standin_toolkit``);
``@triton.jit`` / ``@triton.autotune(...)`` / ``@triton.heuristics(...)``
return the function unchanged; ``triton.runtime.jit.JITFunction`` and the other
capitalised names are real classes (torch runs ``isinstance`` against them).
Nothing can run: ``triton.backends.backends`` is empty and
``triton.runtime.driver.active.get_current_target()`` raises, so torch's
``has_triton()`` reports False on CPU.
"""

import importlib
import types

from standin_toolkit import make_package

__version__ = "3.6.0"
HARNESS_STAND_IN = True


class _NoDriver:
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError("triton stand-in: no GPU driver")

    def get_current_target(self):
        raise RuntimeError("triton stand-in: no GPU driver")


def _populate(module):
    if module.__name__ == "triton.backends":
        module.backends = {}
    elif module.__name__ == "triton.runtime":
        module.driver = types.SimpleNamespace(active=_NoDriver())


make_package(__name__, _populate)

# Import now, so that attribute access (triton.runtime.driver) finds the real values.
importlib.import_module(__name__ + ".backends")
importlib.import_module(__name__ + ".runtime")
