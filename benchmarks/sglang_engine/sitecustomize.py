"""Benchmark-only hook for the real-engine runs (put first on PYTHONPATH of the engine process; its
spawned scheduler inherits PYTHONPATH and runs this too). Not part of graphfix; the library never needs it.

- BENCH_HOOK_OUT=<file>: after every ``graph_capture()`` context of SGLang's parallel state exits, append
  one JSON line: which runner captured, how long the pass took, the allocator's private-pool (CUDA graph)
  bytes from ``torch.cuda.memory_snapshot()`` by pool and stream, and free device memory. The module-level
  ``graph_capture`` is replaced by a function of the same signature *before* the runner modules import it,
  so graphfix (which wraps the runner modules' reference) and this hook compose.
- BENCH_LOG_GRAPHFIX=1: route the ``graphfix`` logger's INFO records to stderr (own handler, no propagation),
  for engines whose processes configure no handler for it when graphfix decides.
Any error here is reported once on stderr and otherwise ignored. Any other sitecustomize is chained.
"""

import contextlib
import importlib.util
import json
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_pass = [0]


def _say(msg):
    sys.stderr.write(f"[bench-hook pid={os.getpid()}] {msg}\n")
    sys.stderr.flush()


def _runner_of_caller():
    """Class name and capture shape of the graph runner whose capture() is on the stack."""
    frame = sys._getframe(3)
    while frame is not None:
        obj = frame.f_locals.get("self")
        if obj is not None and "GraphRunner" in type(obj).__name__:
            bs = list(getattr(obj, "capture_bs", None) or [])
            return {"runner": type(obj).__name__, "max_bs": max(bs, default=None), "n_bs": len(bs),
                    "req_width": getattr(obj, "captured_req_width", getattr(obj, "num_tokens_per_bs", None))}
        frame = frame.f_back
    return {"runner": None}


def _record(path, stream, t0, who):
    import torch

    t1 = time.perf_counter()
    dev = torch.cuda.current_device()
    groups = {}
    for seg in torch.cuda.memory_snapshot():
        pool = tuple(seg.get("segment_pool_id", (0, 0)))
        if pool == (0, 0) or seg.get("device", dev) != dev:
            continue
        g = groups.setdefault(f"{pool[0]}.{pool[1]}@{seg['stream']}", [0, 0])
        g[0] += seg["total_size"]
        g[1] += seg["allocated_size"]
    free, total = torch.cuda.mem_get_info(dev)
    _pass[0] += 1
    row = {
        "pid": os.getpid(), "pass": _pass[0], "t": time.time(), "capture_s": round(t1 - t0, 3),
        "stream": getattr(stream, "cuda_stream", None), **who,
        "graph_bytes": sum(g[0] for g in groups.values()),
        "graph_allocated": sum(g[1] for g in groups.values()),
        "pools": len({k.split("@")[0] for k in groups}), "streams": len({k.split("@")[1] for k in groups}),
        "groups": groups, "free_bytes": free, "total_bytes": total,
        "reserved": torch.cuda.memory_reserved(dev), "snapshot_ms": round((time.perf_counter() - t1) * 1e3, 2),
    }
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


def _install_capture_hook(module):
    path = os.environ["BENCH_HOOK_OUT"]
    original = module.graph_capture

    @contextlib.contextmanager
    def graph_capture(stream=None):  # same signature as SGLang's: graphfix's probe reads it
        who, t0 = _runner_of_caller(), time.perf_counter()
        with original(stream=stream) as context:
            yield context
        try:
            _record(path, getattr(context, "stream", None), t0, who)
        except Exception as exc:  # never let the benchmark disturb the engine
            _say(f"capture record failed: {exc!r}")

    graph_capture.__doc__, graph_capture.__wrapped_by_bench__ = original.__doc__, original
    module.graph_capture = graph_capture


def _mark_adaptive_builds(module):
    """Marker lines around each adaptive runtime-state build, so that the draft captures nested in it
    (logged by SGLang on their own) are not counted twice next to its "Built adaptive runtime state" line."""
    import wrapt

    def marked(wrapped, instance, args, kwargs):
        steps = kwargs.get("speculative_num_steps", args[0] if args else None)
        _say(f"adaptive state build begin steps={steps}")
        try:
            return wrapped(*args, **kwargs)
        finally:
            _say(f"adaptive state build end steps={steps}")

    for name, obj in list(vars(module).items()):
        if isinstance(obj, type) and obj.__module__ == module.__name__ and "build_adaptive_runtime_state" in vars(obj):
            wrapt.wrap_function_wrapper(module, f"{name}.build_adaptive_runtime_state", marked)


def _setup():
    if os.environ.get("BENCH_LOG_GRAPHFIX") == "1":
        import logging

        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(asctime)s %(processName)s pid=%(process)d] %(name)s %(levelname)s: %(message)s"))
        log = logging.getLogger("graphfix")
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    if os.environ.get("BENCH_HOOK_OUT"):
        import wrapt

        wrapt.register_post_import_hook(_install_capture_hook, "sglang.srt.distributed.parallel_state")
        for name in ("sglang.srt.speculative.eagle_worker_v2", "sglang.srt.speculative.eagle_worker"):
            wrapt.register_post_import_hook(_mark_adaptive_builds, name)


def _chain():
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == _HERE:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_chained_sitecustomize", candidate)
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


try:
    _setup()
except Exception as exc:
    _say(f"setup failed: {exc!r}")
try:
    _chain()
except Exception as exc:
    _say(f"chained sitecustomize failed: {exc!r}")
