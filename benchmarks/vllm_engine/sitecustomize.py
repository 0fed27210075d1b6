"""Benchmark-only hook for the real vLLM 0.25.1 runs (first on PYTHONPATH of the engine process; vLLM's
spawned engine-core process inherits PYTHONPATH and runs this too). Not part of graphfix.

With BENCH_HOOK_OUT=<file>, JSON lines are appended to it:
- ``capture_model``: around ``GPUModelRunner.capture_model`` (target + draft captures): wall seconds, free
  device memory before/after, caching-allocator graph-pool bytes (``memory_snapshot``), graphs per manager,
  the capture sizes.
- ``draft_prefill_warmup`` (the ``vllm.spec_prefill_metadata`` observable): inside
  ``PrefillSpeculatorCudaGraphManager.capture`` every FULL descriptor runs the draft prefill once eagerly
  (the warm-up) with the attention metadata it will be captured with. The hook gives that pass
  deterministic inputs (random token ids, hidden states, per-request positions, last-token indices; the
  draft layer's KV cache filled with seeded random values, since capture slots are padding and write
  nothing) and records the metadata the pass reads (query_start_loc, seq_lens against what a uniform
  batch of that descriptor has) and its outputs.
- ``draft_prefill_reference``: after the speculator's capture, the same draft prefill is run eagerly on
  the same inputs with freshly prepared metadata for that descriptor (``prepare_inputs_to_capture`` over
  the target runner's input buffers and attention groups: what 0.26.0 captures with); outputs compared.
- ``dispatch``: counts of (manager, tokens, mode) from ``CudaGraphManager.dispatch`` while serving
  (rewritten to ``<file>.dispatch.json`` every 50 calls).
Any error here is reported on stderr and otherwise ignored. Any other sitecustomize is chained.
"""

import importlib.util
import json
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_S = {"runner": None, "spec": None, "in_prefill_capture": False, "records": [], "dispatch": {}, "calls": 0}
CG = "vllm.v1.worker.gpu.cudagraph_utils"


def _say(msg):
    sys.stderr.write(f"[bench-hook pid={os.getpid()}] {msg}\n")
    sys.stderr.flush()


def _emit(row):
    row = {"pid": os.getpid(), "t": round(time.time(), 3), **row}
    with open(os.environ["BENCH_HOOK_OUT"], "a") as f:
        f.write(json.dumps(row, default=str) + "\n")


def _guard(fn):
    def run(*a, **k):
        try:
            return fn(*a, **k)
        except Exception as exc:  # never let the benchmark disturb the engine
            _say(f"{fn.__name__} failed: {exc!r}")
    return run


def _graph_pool_bytes(torch):
    total = 0
    for seg in torch.cuda.memory_snapshot():
        if tuple(seg.get("segment_pool_id", (0, 0))) != (0, 0):
            total += seg["total_size"]
    return total


def _on_model_runner(module):
    import torch
    import wrapt

    def capture_model(wrapped, instance, args, kwargs):
        _S["runner"] = instance
        torch.cuda.synchronize()
        free0, t0 = torch.cuda.mem_get_info()[0], time.perf_counter()
        result = wrapped(*args, **kwargs)
        torch.cuda.synchronize()
        elapsed, free1 = time.perf_counter() - t0, torch.cuda.mem_get_info()[0]
        _record_capture(instance, elapsed, free0, free1, result, torch)
        return result

    wrapt.wrap_function_wrapper(module, "GPUModelRunner.capture_model", capture_model)


@_guard
def _record_capture(runner, elapsed, free0, free1, result, torch):
    spec = getattr(runner, "speculator", None)
    managers = {"target": getattr(runner, "cudagraph_manager", None),
                "draft_prefill": getattr(spec, "prefill_cudagraph_manager", None),
                "draft_decode": getattr(spec, "decode_cudagraph_manager", None)}
    graphs = {k: sorted((d.num_tokens, d.num_reqs) for d in m.graphs) for k, m in managers.items() if m is not None}
    cc = runner.vllm_config.compilation_config
    _emit({"event": "capture_model", "capture_s": round(elapsed, 3), "free_before": free0, "free_after": free1,
           "free_delta_gib": round((free0 - free1) / 2**30, 4), "vllm_reported_bytes": result,
           "graph_pool_bytes": _graph_pool_bytes(torch), "n_graphs": {k: len(v) for k, v in graphs.items()},
           "graphs": graphs, "capture_sizes": list(cc.cudagraph_capture_sizes or []),
           "max_capture_size": cc.max_cudagraph_capture_size, "cudagraph_mode": str(cc.cudagraph_mode),
           "kv_cache_config_blocks": getattr(getattr(runner, "kv_cache_config", None), "num_blocks", None)})


def _on_ar_cudagraph_utils(module):
    import wrapt

    def capture(wrapped, instance, args, kwargs):
        forward_fn = args[0] if args else kwargs.get("forward_fn")
        spec = getattr(forward_fn, "__self__", None)
        _fill_draft_kv(spec)
        _S["spec"], _S["in_prefill_capture"] = spec, True
        try:
            return wrapped(*args, **kwargs)
        finally:
            _S["in_prefill_capture"] = False

    wrapt.wrap_function_wrapper(module, "PrefillSpeculatorCudaGraphManager.capture", capture)


@_guard
def _fill_draft_kv(spec):
    import torch

    g = torch.Generator(device="cuda").manual_seed(1234)
    n = 0
    for m in spec.model.modules():
        caches = getattr(m, "kv_cache", None)
        for t in (caches if isinstance(caches, (list, tuple)) else [caches]):
            if isinstance(t, torch.Tensor) and t.numel() and t.is_floating_point():
                t.normal_(generator=g)
                n += t.numel()
    _emit({"event": "draft_kv_filled", "elements": n})


def _uniform(num_reqs, num_tokens):
    q = num_tokens // num_reqs
    return q, [q * i for i in range(num_reqs + 1)], [q] * num_reqs


def _observe(md_dict, num_reqs, num_tokens):
    q, qsl_want, seq_want = _uniform(num_reqs, num_tokens)
    md = next((m for m in (md_dict or {}).values() if hasattr(m, "query_start_loc")), None)
    if md is None:
        return {"metadata": None}
    qsl, seq = md.query_start_loc[: num_reqs + 1].tolist(), md.seq_lens[:num_reqs].tolist()
    sched = getattr(md, "scheduler_metadata", None)
    return {"qsl_ok": qsl == qsl_want, "seq_lens_ok": seq == seq_want, "qsl_head": qsl[:6], "qsl_tail": qsl[-3:],
            "seq_lens_head": seq[:6], "seq_lens_distinct": sorted(set(seq))[:8],
            "max_query_len": getattr(md, "max_query_len", None), "max_seq_len": getattr(md, "max_seq_len", None),
            "num_actual_tokens": getattr(md, "num_actual_tokens", None),
            "scheduler_metadata_sum": None if sched is None else int(sched.long().sum().item())}


def _set_inputs(spec, num_reqs, num_tokens):
    import torch

    g = torch.Generator(device="cuda").manual_seed(num_tokens)
    q, buf = num_tokens // num_reqs, spec.input_buffers
    dev = buf.input_ids.device
    buf.input_ids[:num_tokens] = torch.randint(0, 32000, (num_tokens,), generator=g, device=dev).to(buf.input_ids.dtype)
    buf.positions[:num_tokens] = (torch.arange(num_tokens, device=dev) % q).to(buf.positions.dtype)
    h = spec.hidden_states[:num_tokens]
    h.copy_(torch.randn(h.shape, generator=g, device=dev, dtype=torch.float32).to(h.dtype))
    spec.last_token_indices[:num_reqs] = torch.arange(1, num_reqs + 1, device=dev) * q - 1
    return {"input_ids": buf.input_ids[:num_tokens].clone(), "positions": buf.positions[:num_tokens].clone(),
            "hidden": h.clone(), "last": spec.last_token_indices[:num_reqs].clone()}


def _restore(spec, snap, num_reqs, num_tokens):
    spec.input_buffers.input_ids[:num_tokens] = snap["input_ids"]
    spec.input_buffers.positions[:num_tokens] = snap["positions"]
    spec.hidden_states[:num_tokens] = snap["hidden"]
    spec.last_token_indices[:num_reqs] = snap["last"]


def _outputs(spec, num_reqs):
    return {"hidden": spec.hidden_states[:num_reqs].clone(), "tokens": spec.draft_tokens[:num_reqs, 0].clone()}


def _on_speculator(module):
    import torch
    import wrapt

    def prefill(wrapped, instance, args, kwargs):
        if not _S["in_prefill_capture"] or torch.cuda.is_current_stream_capturing() or len(args) < 3:
            return wrapped(*args, **kwargs)
        num_reqs, num_tokens, md = args[0], args[1], args[2]
        snap = seen = None
        try:
            snap = _set_inputs(instance, num_reqs, num_tokens)
            seen = _observe(md, num_reqs, num_tokens)
        except Exception as exc:
            _say(f"warm-up observation failed: {exc!r}")
        result = wrapped(*args, **kwargs)
        if snap is not None:
            try:
                torch.cuda.synchronize()
                out = _outputs(instance, num_reqs)
                _S["records"].append((num_reqs, num_tokens, snap, out))
                _emit({"event": "draft_prefill_warmup", "num_reqs": num_reqs, "num_tokens": num_tokens, **seen,
                       "hidden_abs_mean": float(out["hidden"].float().abs().mean().item())})
            except Exception as exc:
                _say(f"warm-up record failed: {exc!r}")
        return result

    def capture(wrapped, instance, args, kwargs):
        result = wrapped(*args, **kwargs)
        _reference(instance)
        return result

    wrapt.wrap_function_wrapper(module, "AutoRegressiveSpeculator._prefill", prefill)
    wrapt.wrap_function_wrapper(module, "AutoRegressiveSpeculator.capture", capture)


@_guard
def _reference(spec):
    """After capture: each recorded warm-up again, same inputs, freshly prepared metadata (0.26.0's)."""
    import torch

    runner, prep = _S["runner"], sys.modules[CG].prepare_inputs_to_capture
    with torch.inference_mode():
        _references(spec, runner, prep, torch)
    _S["records"].clear()


def _references(spec, runner, prep, torch):
    for num_reqs, num_tokens, snap, out in _S["records"]:
        _restore(spec, snap, num_reqs, num_tokens)
        md, slots = prep(num_reqs, num_tokens, spec.model_state, runner.input_buffers, spec.block_tables,
                         runner.attn_groups, spec.kv_cache_config)
        fresh = _observe(md, num_reqs, num_tokens)
        spec._prefill(num_reqs, num_tokens, md, slots, None)
        torch.cuda.synchronize()
        ref = _outputs(spec, num_reqs)
        diff = (ref["hidden"].float() - out["hidden"].float()).abs()
        _emit({"event": "draft_prefill_reference", "num_reqs": num_reqs, "num_tokens": num_tokens,
               "fresh_qsl_ok": fresh.get("qsl_ok"), "fresh_seq_lens_ok": fresh.get("seq_lens_ok"),
               "hidden_max_abs_diff": float(diff.max().item()), "hidden_rows_differing": int((diff.amax(-1) > 0).sum().item()),
               "draft_tokens_equal": int((ref["tokens"] == out["tokens"]).sum().item()),
               "hidden_abs_mean": float(ref["hidden"].float().abs().mean().item())})


def _on_cudagraph_utils(module):
    import wrapt

    def dispatch(wrapped, instance, args, kwargs):
        desc = wrapped(*args, **kwargs)
        _count(instance, desc)
        return desc

    wrapt.wrap_function_wrapper(module, "CudaGraphManager.dispatch", dispatch)


@_guard
def _count(manager, desc):
    key = f"{type(manager).__name__} tokens={desc.num_tokens} reqs={desc.num_reqs} {desc.cg_mode.name}"
    _S["dispatch"][key] = _S["dispatch"].get(key, 0) + 1
    _S["calls"] += 1
    if _S["calls"] % 50 == 0:
        with open(os.environ["BENCH_HOOK_OUT"] + ".dispatch.json", "w") as f:
            json.dump({"pid": os.getpid(), "calls": _S["calls"], "counts": _S["dispatch"]}, f, indent=0)


def _setup():
    if not os.environ.get("BENCH_HOOK_OUT"):
        return
    import wrapt

    wrapt.register_post_import_hook(_on_model_runner, "vllm.v1.worker.gpu.model_runner")
    wrapt.register_post_import_hook(_on_ar_cudagraph_utils, "vllm.v1.worker.gpu.spec_decode.autoregressive.cudagraph_utils")
    wrapt.register_post_import_hook(_on_speculator, "vllm.v1.worker.gpu.spec_decode.autoregressive.speculator")
    wrapt.register_post_import_hook(_on_cudagraph_utils, CG)


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
