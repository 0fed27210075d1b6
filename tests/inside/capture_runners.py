"""Runs INSIDE a real SGLang release (through the harness): after SGLang's own plugin loader, which graph
runners capture through the ``graph_capture`` that ``sglang.capture_stream`` wraps. Prints JSON.

On the real 0.5.16 engine (H200, docs/benchmarks.md "Real engine") all 8 capture passes of adaptive EAGLE
decoding -- target verify, EAGLE draft and draft-extend runners, the adaptive states' target runners --
ran on the one shared stream, because every one of those runner classes inherits
``DecodeCudaGraphRunner.capture()``. This checks that premise in every release, without a GPU.

usage: python tests/inside/capture_runners.py
"""

import importlib
import json
import pkgutil

from graphfix import wrapped_by

from sglang.srt.plugins import load_plugins

load_plugins()

decode = importlib.import_module("sglang.srt.model_executor.runner.decode_cuda_graph_runner")
base = decode.DecodeCudaGraphRunner
spec = importlib.import_module("sglang.srt.speculative")
runners, failed = {}, {}
for info in pkgutil.iter_modules(spec.__path__, spec.__name__ + "."):
    if not info.name.endswith("cuda_graph_runner"):
        continue
    try:
        module = importlib.import_module(info.name)
    except Exception as exc:  # noqa: BLE001 - reported, the test decides
        failed[info.name] = repr(exc)[:300]
        continue
    for name, cls in vars(module).items():
        if isinstance(cls, type) and cls.__module__ == module.__name__ and issubclass(cls, base):
            owner = next(k for k in cls.__mro__ if "capture" in vars(k))
            runners[f"{info.name.rsplit('.', 1)[1]}.{name}"] = f"{owner.__module__}.{owner.__qualname__}"
# the graph_capture that the inherited capture() reads at call time (its module's global)
seen = base.capture.__globals__["graph_capture"]
wrapped = wrapped_by(seen, "sglang.capture_stream")
print(json.dumps({"runners": runners, "import_failed": failed,
                  "decode_graph_capture_wrapped_by_graphfix": wrapped}))
