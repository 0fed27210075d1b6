"""Runs INSIDE a real engine release (through the harness): the engine's own logging set-up and plugin
loader in the order its processes run them, then every patch target imported; prints the states as JSON.
The test reads graphfix's lines from this process's stdout/stderr.

usage: python tests/inside/log_lines.py sglang|vllm
  sglang: load_plugins() first, then configure_logger(server_args, prefix=" TP0"), as a scheduler rank does
  vllm:   load_general_plugins() (importing vllm configures its ``vllm`` logger first, as in every vLLM process)
"""

import importlib
import json
import sys
import types

engine = sys.argv[1]
if engine == "sglang":
    from sglang.srt.plugins import load_plugins
    from sglang.srt.utils import configure_logger

    load_plugins()
    # configure_logger reads only log_level from the server args (the scheduler passes its ServerArgs)
    configure_logger(types.SimpleNamespace(log_level="info"), prefix=" TP0")
else:
    from vllm.plugins import load_general_plugins

    load_general_plugins()

import graphfix  # noqa: E402  (after the loader: the loader must be what applies the patches)
from graphfix.registry import REGISTRY  # noqa: E402

for patch in REGISTRY.load(engine):
    for module in patch.modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - the patch's state says what that means
            sys.stderr.write(f"cannot import {module}: {exc}\n")
print(json.dumps({row.id: row.state for row in graphfix.status(engine)}, sort_keys=True))
