"""sglang.capture_stream — decode and prefill graph captures share one process-wide capture stream.

Symptom: CUDA-graph memory grows with every capture pass (most with adaptive speculative decoding): the
decode and prefill runners call ``graph_capture()`` without a stream, each pass gets a new one, and the
caching allocator, which keeps graph-pool segments per stream, reserves the scratch again for each.
Upstream fix: share one graph capture stream across capture passes (seed 000), released in 0.5.19: one
process-wide stream, kept in the runtime-context stream store as "cuda_graph_capture".
Affected: ``>=0.5.14,<0.5.19`` (0.5.14 - 0.5.18). Fixed in: 0.5.19.
Flag: ``GRAPHFIX_SGLANG_CAPTURE_STREAM`` (auto | on | off).
Wrapper: ``graph_capture`` as the two runner modules see it; a call without a stream gets the shared
stream (pdmux stream groups pass their own and are left alone), made on first use, under a lock, by the
group's device module and kept in the store (0.5.16+) or here. graphfix's own additions, beyond upstream:
a capture that starts while another one holds the shared stream raises ``CaptureOverlapError``; after
each capture pass one INFO line reports the CUDA-graph pools (never per step; a failure turns it off).
Evidence, measurements and limits: patches.md, section ``sglang.capture_stream``; docs/benchmarks.md.
"""

import contextlib
import importlib
import logging
import sys
import threading
import time

from graphfix import Patch, Refusal, Verdict, code_refs, params

PATCH = Patch(
    id="sglang.capture_stream",
    engine="sglang",
    affected=">=0.5.14,<0.5.19",
    fixed_in="0.5.19",
    upstream="sgl-project/sglang: share one graph capture stream across capture passes (seed 000)",
    summary="decode and prefill graph captures share one process-wide capture stream",
)
DECODE = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"
RUNNERS = {  # module -> the one function that calls graph_capture() there
    DECODE: "DecodeCudaGraphRunner.capture",
    "sglang.srt.model_executor.runner.prefill_cuda_graph_runner": "PrefillCudaGraphRunner.capture",
}
FIX = "get_or_create_global_graph_capture_stream"  # 0.5.19's accessor
RC, PS = "sglang.srt.runtime_context", "sglang.srt.distributed.parallel_state"  # imported by the runners
NAME = "cuda_graph_capture"  # 0.5.19's name in the runtime-context stream store
_lock = threading.Lock()
_held = {}  # device -> shared stream, where the release has no stream store (0.5.14, 0.5.15)
_busy = {}  # id(stream) -> the thread capturing on it
_created = []  # streams graphfix made (taken out of the store again by graphfix.remove())
_report = {"passes": 0, "bytes": 0, "broken": False}  # the per-pass graph-pool report's state
log = logging.getLogger("graphfix")


class CaptureOverlapError(Refusal):
    """Two CUDA-graph captures would run on the shared capture stream at the same time."""


def _shared_stream():
    group, rc = importlib.import_module(PS).get_tp_group(), importlib.import_module(RC)
    if hasattr(rc, "set_stream"):  # 0.5.16+: the runtime-context store, where 0.5.19 keeps it
        store, key = rc.get_resources().streams, NAME
    else:
        store, key = _held, str(getattr(group, "device", ""))
    if store.get(key) is None:
        store[key] = group.device_module.Stream()  # what graph_capture(stream=None) would make
        _created.append(store[key])
    return store[key]


def _refuse_overlap(stream):
    holder = _busy.get(id(stream))
    if holder is not None:
        raise CaptureOverlapError(
            "graphfix sglang.capture_stream: a CUDA graph capture started on the shared capture "
            + ("stream inside another capture on it (re-entry)" if holder is threading.current_thread() else
               f"stream while thread {holder.name!r} is still capturing on it")
            + "; captures sharing one stream must run strictly one after another. "
            "GRAPHFIX_SGLANG_CAPTURE_STREAM=off gives every capture its own stream again."
        )


@contextlib.contextmanager
def _exclusively(capture, stream):
    """``capture`` (the shipped context manager, given the shared stream), one capture at a time."""
    with _lock:
        _refuse_overlap(stream)
        _busy[id(stream)] = threading.current_thread()
    try:
        with capture as context:
            yield context
    finally:
        with _lock:
            _busy.pop(id(stream), None)
    report_graph_pools()


def report_graph_pools():
    """Log the private (CUDA-graph) pools' bytes, pool count and stream count after a capture pass.

    graphfix's own addition (upstream logs no such line). One allocator snapshot per capture pass; the
    first error turns the report off for the process, is logged once, and never reaches the engine."""
    if _report["broken"]:
        return
    try:
        import torch

        if not torch.cuda.is_initialized():  # no CUDA context (CPU stand-ins, NPU/XPU): no CUDA graph pools
            return
        t0 = time.perf_counter()
        device = torch.cuda.current_device()
        total, pools, streams = 0, set(), set()
        for seg in torch.cuda.memory_snapshot():
            pool = tuple(seg.get("segment_pool_id") or (0, 0))
            if pool != (0, 0) and seg.get("device", device) == device:
                total += seg["total_size"]
                pools.add(pool)
                streams.add(seg["stream"])
        added, _report["bytes"] = total - _report["bytes"], total
        _report["passes"] += 1
        log.info("sglang.capture_stream: capture pass %d: CUDA-graph pools hold %.3f GiB (%+.3f GiB this pass) "
                 "in %d pool(s) on %d stream(s) [report %.1f ms]", _report["passes"], total / 2**30,
                 added / 2**30, len(pools), len(streams), (time.perf_counter() - t0) * 1e3)
    except Exception as exc:  # the report must never disturb the engine
        _report["broken"] = True
        try:
            log.warning("sglang.capture_stream: graph-pool report turned off for this process: %r", exc)
        except Exception:
            pass


def _share_capture_stream(wrapped, instance, args, kwargs):
    if kwargs.get("stream", args[0] if args else None) is not None:  # pdmux groups, explicit streams
        return wrapped(*args, **kwargs)
    with _lock:  # graphfix's own work happens here, at call time, where a failure falls back to shipped
        stream = _shared_stream()
        _refuse_overlap(stream)
    return _exclusively(wrapped(stream=stream), stream)


for _module in RUNNERS:
    PATCH.wraps(_module, "graph_capture")(_share_capture_stream)
    PATCH.reads(_module, RUNNERS[_module])


@PATCH.on_remove
def _forget_streams():
    with _lock:
        rc = sys.modules.get(RC)
        store = rc.get_resources().streams if hasattr(rc, "get_resources") else {}
        if any(store.get(NAME) is s for s in _created):
            del store[NAME]
        for state in (_held, _busy, _created):
            state.clear()
        _report.update(passes=0, bytes=0, broken=False)


def _users(module, name):
    """{qualname: function} of the functions and methods defined in ``module`` that refer to ``name``."""
    found = {}
    for attr, obj in vars(module).items():
        if getattr(obj, "__module__", None) != module.__name__:
            continue
        members = vars(obj).items() if isinstance(obj, type) else [(None, obj)]
        for member, fn in members:
            fn = getattr(fn, "__func__", getattr(fn, "fget", fn))
            if name in code_refs(fn):
                found[attr if member is None else f"{attr}.{member}"] = fn
    return found


@PATCH.probe
def probe(t):
    users = {m: _users(t.module(m), "graph_capture") for m in RUNNERS}
    if all(u and all(FIX in code_refs(fn) for fn in u.values()) for u in users.values()):
        return Verdict.fixed(f"every graph_capture() call in both runner modules takes {FIX}()")
    for module_name, qualname in RUNNERS.items():
        if "stream" not in params(getattr(t.module(module_name), "graph_capture", None)):
            return Verdict.drifted(f"{module_name}.graph_capture takes no stream")
        if set(users[module_name]) != {qualname}:
            return Verdict.drifted(f"graph_capture is used outside {qualname}: {sorted(users[module_name])}")
    if not {"enable_pdmux", "stream_groups"} <= code_refs(t[RUNNERS[DECODE]]):
        return Verdict.drifted("decode capture() has no pdmux branch")
    return Verdict.buggy("capture() calls graph_capture() without a stream: a fresh stream per pass")
