"""Runs INSIDE a real engine release (through the harness): load the engine's plugins the way the engine
does, import every patch target, and print each patch's state and what sits at each target as JSON.

usage: python tests/inside/plugin_state.py sglang|vllm [--no-loader]
"""

import importlib
import json
import sys
import types


engine = sys.argv[1]
if "--no-loader" not in sys.argv:
    if engine == "sglang":
        from sglang.srt.plugins import load_plugins

        load_plugins()
    else:
        from vllm.plugins import load_general_plugins

        load_general_plugins()

import graphfix  # noqa: E402  (after the loader: the loader must be what applies the patches)
from graphfix.patch import lookup, wrapped_by  # noqa: E402
from graphfix.registry import REGISTRY  # noqa: E402

out = {}
patches = REGISTRY.load(engine)
for patch in patches:
    for module in patch.modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - reported below as "absent"
            sys.stderr.write(f"cannot import {module}: {exc}\n")
for patch in patches:
    targets = {}
    for t in patch.targets:
        obj = lookup(t.module, t.qualname) if t.module in sys.modules else None
        if obj is None:
            kind = "absent"
        elif wrapped_by(obj, patch.id):
            kind = "graphfix"
        elif isinstance(obj, (types.FunctionType, staticmethod, classmethod, type)):
            kind = "shipped"
        else:
            kind = type(obj).__name__
        targets[f"{t.module}:{t.qualname}"] = kind
    out[patch.id] = {"targets": targets}
for row in graphfix.status(engine):
    out[row.id].update(state=row.state, reason=row.reason, flag=row.flag, flag_value=row.flag_value)
print(json.dumps(out, sort_keys=True))
