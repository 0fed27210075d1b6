"""Observables for vllm.cudagraph_sizes and vllm.uniform_decode_sizes: the default capture sizes
``VllmConfig._set_cudagraph_sizes`` produces, called unbound on stand-in configs exactly as upstream's own
tests do (``MagicMock(spec=VllmConfig)`` with real ``CompilationConfig``/``SchedulerConfig``/
``ParallelConfig``), plus the calls a wrapper must leave alone (user-set sizes, the engine core's second
``__post_init__``) and an unbound call on a plain namespace.

What "fixed" means here is 0.29.0's documented policy, stated in ``policy_029`` (the parity tests compare
with 0.29.0 itself, run at test time; ``graphfix verify`` has no 0.29.0 to run):
- vllm.cudagraph_sizes: no default size above min(ceiling, max_num_batched_tokens), nothing below it
  dropped — the token grid, plus either no uniform-decode sizes (a build that never had them) or exactly
  0.29.0's;
- vllm.uniform_decode_sizes: every static-speculation row is exactly 0.29.0's list.
"""

import importlib
import types
from unittest.mock import MagicMock

from graphfix.scenarios import scenario

# upstream's test table (PR 54418), its pinned H200 widths, and its single-token case
UPSTREAM = [(8, 0), (32, 0), (64, 7), (256, 1), (32, 16), (64, 16), (128, 16), (256, 24), (33, 16),
            (24, 16), (300, 1)]
# configurations where 0.28.0's dispatcher sees FULL coverage change, and others
EXTRA = [(1, 1), (3, 1), (4, 2), (5, 2), (7, 3), (12, 2), (33, 1), (33, 4), (100, 2), (256, 2),
         (256, 3), (512, 0), (512, 3), (512, 16), (16, 4), (48, 5)]
GRID = [(s, k, m) for s, k in UPSTREAM + EXTRA for m in (16384, 8192, 2048, 512, 100) if m >= s]
DYNAMIC = [[1, 8, 4], [9, 64, 2], [65, 256, 1]]  # (range_start, range_end, k) tiers


def _method():
    return importlib.import_module("vllm.config.vllm").VllmConfig._set_cudagraph_sizes


def _ceiling():
    from vllm_graphfix.cudagraph_sizes import ceiling

    return ceiling()


def request_grid(most):
    """0.29.0's request counts for uniform-decode sizes: 1, 2, 4, 8..248 by 8, 256.. by 16, and ``most``."""
    return sorted({n for n in (1, 2, 4) if n <= most} | set(range(8, min(most + 1, 256), 8))
                  | set(range(256, most + 1, 16)) | {most})


def token_grid(top):
    return sorted({n for n in (1, 2, 4) if n <= top} | set(range(8, min(top + 1, 256), 8))
                  | set(range(256, top + 1, 16)))


def policy_029(s, k, m, ceiling, uniform=True):
    """0.29.0's default list (balanced mode, no dynamic speculation, no sequence parallelism);
    ``uniform=False``: the same without uniform-decode sizes (the plain grid of 0.21-0.28)."""
    q, pre = 1 + k, min(s * (1 + k) * 2, ceiling)
    top = min(pre, m)
    sizes = set(token_grid(top)) | ({m} if m <= top else set())
    if uniform and q > 1:
        sizes |= {n * q for n in request_grid(min(s, ceiling)) if n * q <= pre and n * q <= m}
    return sorted(sizes)


def _mock(max_num_seqs, k, max_tokens, sizes=None, max_size=None, schedule=None):
    from vllm.config import CompilationConfig, ParallelConfig, SchedulerConfig, VllmConfig

    config = MagicMock(spec=VllmConfig)
    config.model_config = MagicMock(enforce_eager=False)
    user = {"cudagraph_capture_sizes": sizes, "max_cudagraph_capture_size": max_size}
    config.compilation_config = CompilationConfig(**{k: v for k, v in user.items() if v is not None})
    config.scheduler_config = SchedulerConfig(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_tokens,
                                              max_model_len=max_tokens, is_encoder_decoder=False)
    config.parallel_config = ParallelConfig()
    config.performance_mode = "balanced"
    config.num_speculative_tokens = k
    config.uniform_decode_query_len = 1 + k
    config.speculative_config = None if k == 0 else types.SimpleNamespace(
        num_speculative_tokens=k, num_speculative_tokens_per_batch_size=schedule,
        uses_dynamic_speculative_decoding=lambda: schedule is not None)
    return config


def _result(config):
    cc = config.compilation_config
    return {"sizes": list(cc.cudagraph_capture_sizes), "max": cc.max_cudagraph_capture_size}


def _grid():
    out = {}
    for s, k, m in GRID:
        config = _mock(s, k, m)
        _method()(config)
        out[f"{s},{k},{m}"] = _result(config)
    if hasattr(importlib.import_module("vllm.config.speculative").SpeculativeConfig,
               "uses_dynamic_speculative_decoding"):
        for s in (64, 256):
            config = _mock(s, 4, 8192, schedule=DYNAMIC)
            _method()(config)
            out[f"{s},dynamic,8192"] = _result(config)
    return out


def _user_set():
    explicit = _mock(128, 16, 8192, sizes=[1, 2, 600, 2176])
    _method()(explicit)
    only_max = _mock(128, 16, 8192, max_size=1024)
    _method()(only_max)
    return {"explicit_sizes": _result(explicit), "explicit_max": _result(only_max)}


def _twice():
    out = {}
    for s, k in ((128, 16), (256, 24), (300, 1), (5, 2), (64, 7)):
        config = _mock(s, k, 8192)
        _method()(config)
        first = _result(config)
        _method()(config)  # the engine core's second __post_init__ goes through the user branch
        out[f"{s},{k}"] = {"first": first, "second": _result(config)}
    return out


def _standin():
    from vllm_graphfix.cudagraph_sizes import default_sizes  # a plain namespace: not a VllmConfig

    method = _method()
    return {f"{s},{k},8192": {"sizes": default_sizes(method, s, k), "max": None}
            for s, k in ((128, 16), (256, 24), (300, 1), (64, 7))}


PARTS = {"grid": _grid, "user_set": _user_set, "twice": _twice, "standin": _standin}
CASES = {part: {"part": part} for part in PARTS}


def _rows(o):
    rows = o.get("grid") or o.get("standin")
    return [(tuple(map(int, key.split(","))), r["sizes"]) for key, r in rows.items() if "dynamic" not in key]


def _within(o):
    """No default size above min(ceiling, max_num_batched_tokens), dynamic rows included."""
    rows = o.get("grid") or o.get("standin")
    return all(max(r["sizes"]) <= min(o["ceiling"], int(key.split(",")[2])) for key, r in rows.items())


def _capped(o):
    """Within the ceiling, nothing under it dropped: the plain grid (a build that never had uniform-decode
    sizes; 0.21-0.26 cap it at 512 on every platform) or exactly 0.29.0's list."""
    if "twice" in o:
        return all(r["first"] == r["second"] for r in o["twice"].values())
    if "user_set" in o:
        return o["user_set"]["explicit_sizes"]["sizes"] == [1, 2, 600, 2176]
    return _within(o) and all(
        sizes in [policy_029(s, k, m, c, uniform) for c in {512, o["ceiling"]} for uniform in (True, False)]
        for (s, k, m), sizes in _rows(o))


def _uniform(o):
    if "twice" in o or "user_set" in o:
        return _capped(o)
    return _within(o) and all(sizes == policy_029(s, k, m, o["ceiling"]) for (s, k, m), sizes in _rows(o))


def _describe(o):
    if "grid" in o or "standin" in o:
        rows = o.get("grid") or o.get("standin")
        static = _rows(o)
        misses = sum(sizes != policy_029(*cfg, o["ceiling"]) for cfg, sizes in static)
        widths = [w for w in ("128,16,8192", "256,24,8192", "300,1,8192") if w in rows]
        return (f"largest default size at (128 seqs,k=16)/(256,k=24)/(300,k=1): "
                f"{'/'.join(str(max(rows[w]['sizes'])) for w in widths)} (ceiling {o['ceiling']}); "
                f"{len(static) - misses}/{len(static)} static-speculation rows equal 0.29.0's list")
    if "twice" in o:
        return f"second call keeps the first result: {all(r['first'] == r['second'] for r in o['twice'].values())}"
    u = o["user_set"]
    return (f"user sizes -> {u['explicit_sizes']['sizes']}; user max 1024 -> {len(u['explicit_max']['sizes'])} "
            f"sizes up to {u['explicit_max']['max']}")


def observe(part):
    return {part: PARTS[part](), "ceiling": _ceiling()}


scenario("vllm.cudagraph_sizes", cases=CASES, fixed=_capped, describe=_describe)(observe)
scenario("vllm.uniform_decode_sizes", cases=CASES, fixed=_uniform, describe=_describe)(observe)
