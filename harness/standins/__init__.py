"""Stand-ins for packages that cannot be installed where graphfix's tests and benchmarks run.

This directory has two roles. As the package ``harness.standins`` it is the one stand-in toolkit
(``standin_toolkit.py``, re-exported here). As a ``PYTHONPATH`` entry of every harness CPU
environment of SGLang it provides the top-level stand-in packages ``triton`` and ``torchvision``
(which import the toolkit as ``standin_toolkit``; this file is not read there).
"""

import sys
from pathlib import Path

# A CPU environment's triton/torchvision stand-in may have loaded the toolkit as ``standin_toolkit``
# already: use that module object, so there is one class cache per process.
_loaded = sys.modules.get("standin_toolkit")
if _loaded is not None and Path(_loaded.__file__).resolve() == Path(__file__).resolve().with_name("standin_toolkit.py"):
    sys.modules[__name__ + ".standin_toolkit"] = _loaded

from harness.standins.standin_toolkit import (  # noqa: E402
    MARKER,
    StandIn,
    StandInClass,
    attribute,
    install_missing,
    is_standin,
    make_package,
    tolerant_register_fake,
)

__all__ = ["MARKER", "StandIn", "StandInClass", "attribute", "install_missing", "is_standin", "make_package",
           "tolerant_register_fake"]
