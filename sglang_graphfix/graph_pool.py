"""sglang.graph_pool — prefill and decode graph backends share one process-wide graph memory pool.

Symptom: the prefill and decode graph backends (Full, Breakable, TcPiecewise) each call
``graph_pool_handle()`` when their ``_pool`` is unset, so every phase reserves its own CUDA-graph pool and
graph memory is the *sum* of the phases instead of the largest one.
Upstream fix: share the prefill and decode CUDA graph memory pool (seed 004), released in 0.5.15: all
three backends take ``runner_utils.pool.get_or_create_global_graph_memory_pool``.
Affected: ``==0.5.14``. Fixed in: 0.5.15.
Flag: ``GRAPHFIX_SGLANG_GRAPH_POOL`` (auto | on | off).
Wrapper: before a backend acquires its pool, pre-set ``backend._pool`` to the process-wide pool kept in
0.5.14's own ``runner_utils.pool`` global (created once, under a lock); the backend's own code then takes
the shared pool. NPU/XPU backends are separate classes and are not touched.
Probe, evidence and limits: patches.md, section ``sglang.graph_pool``.
"""

import sys
import threading

from graphfix import Patch, Verdict, code_refs

PATCH = Patch(
    id="sglang.graph_pool",
    engine="sglang",
    affected="==0.5.14",
    fixed_in="0.5.15",
    upstream="sgl-project/sglang: share the prefill and decode CUDA graph memory pool (seed 004)",
    summary="prefill and decode graph backends share one process-wide graph memory pool",
)
BACKENDS = "sglang.srt.model_executor.runner_backend."
POOL = "sglang.srt.model_executor.runner_utils.pool"
PATCH.needs(POOL)
_lock = threading.Lock()


def _preset_shared_pool(wrapped, instance, args, kwargs):
    if instance is not None and instance._pool is None:
        pool_module = sys.modules[POOL]
        with _lock:
            if pool_module.get_global_graph_memory_pool() is None:
                pool_module.set_global_graph_memory_pool(instance._device_module.graph_pool_handle())
            instance._pool = pool_module.get_global_graph_memory_pool()
    return wrapped(*args, **kwargs)


TARGETS = (
    ("full_cuda_graph_backend", "FullCudaGraphBackend.capture_session"),
    ("breakable_cuda_graph_backend", "BreakableCudaGraphBackend.capture_session"),
    ("tc_piecewise_cuda_graph_backend", "TcPiecewiseCudaGraphBackend._run_compile_pass"),
)
for module, qualname in TARGETS:
    PATCH.wraps(BACKENDS + module, qualname)(_preset_shared_pool)


@PATCH.probe
def probe(t):
    refs = [code_refs(t[qualname]) for _, qualname in TARGETS]
    if all("get_or_create_global_graph_memory_pool" in r for r in refs):
        return Verdict.fixed("every backend takes get_or_create_global_graph_memory_pool")
    if not all({"graph_pool_handle", "_pool"} <= r for r in refs):
        return Verdict.drifted("a backend acquires its pool in an unknown way")
    if not hasattr(t.module(POOL), "set_global_graph_memory_pool"):
        return Verdict.drifted("runner_utils.pool has no set_global_graph_memory_pool")
    return Verdict.buggy("each backend creates its own graph_pool_handle()")
