"""Observable for vllm.cudagraph_sizes: the default capture sizes ``VllmConfig._set_cudagraph_sizes``
produces, called unbound on stand-in configs exactly as upstream's own tests do
(``MagicMock(spec=VllmConfig)`` with real ``CompilationConfig``/``SchedulerConfig``/``ParallelConfig``),
plus the calls the wrapper must leave alone (user-set sizes, the engine core's second ``__post_init__``).

``install_unsafe_build()`` rebuilds, from the installed source, the never-released main-branch build
between upstream PRs 50488 and 54418 (see its docstring). Tests call it before ``graphfix.observe``.
"""

import importlib
import inspect
import textwrap
import types
from unittest.mock import MagicMock

from graphfix.scenarios import scenario

# upstream's test table (PR 54418), its pinned H200 widths, and its single-token case
UPSTREAM = [(8, 0), (32, 0), (64, 7), (256, 1), (32, 16), (64, 16), (128, 16), (256, 24), (33, 16),
            (24, 16), (300, 1)]
# configurations where the dispatcher measurement on 0.28.0 saw FULL coverage change, and others
EXTRA = [(1, 1), (3, 1), (4, 2), (5, 2), (7, 3), (12, 2), (33, 1), (33, 4), (100, 2), (256, 2),
         (512, 3), (16, 4), (48, 5)]
GRID = [(s, k, m) for s, k in UPSTREAM + EXTRA for m in (8192, 2048, 512, 100) if m >= s]
DYNAMIC = [[1, 8, 4], [9, 64, 2], [65, 256, 1]]  # (range_start, range_end, k) tiers


def _method():
    return importlib.import_module("vllm.config.vllm").VllmConfig._set_cudagraph_sizes


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
    for s, k in ((128, 16), (256, 24), (300, 1), (5, 2)):
        config = _mock(s, k, 8192)
        _method()(config)
        first = _result(config)
        _method()(config)  # the engine core's second __post_init__ goes through the user branch
        out[f"{s},{k}"] = {"first": first, "second": _result(config)}
    return out


def _standin():
    from vllm_graphfix.cudagraph_sizes import default_sizes  # a plain namespace: not a VllmConfig

    return {f"{s},{k}": default_sizes(_method(), s, k) for s, k in ((128, 16), (256, 24), (300, 1))}


CASES = {"grid": {"part": "grid"}, "user_set": {"part": "user_set"}, "twice": {"part": "twice"},
         "standin": {"part": "standin"}}
PARTS = {"grid": _grid, "user_set": _user_set, "twice": _twice, "standin": _standin}


def _fixed(o):
    if "grid" in o:
        return all(r["max"] <= 512 for r in o["grid"].values()) and 17 in o["grid"]["128,16,8192"]["sizes"]
    if "standin" in o:
        return all(max(s) <= 512 for s in o["standin"].values()) and 17 in o["standin"]["128,16"]
    if "twice" in o:
        return all(r["first"] == r["second"] for r in o["twice"].values())
    return o["user_set"]["explicit_sizes"]["sizes"] == [1, 2, 600, 2176]


def _describe(o):
    if "grid" in o or "standin" in o:
        rows = o.get("grid") or {f"{w},8192": {"max": max(s), "sizes": s} for w, s in o["standin"].items()}
        widths = ("128,16,8192", "256,24,8192", "300,1,8192")
        return (f"largest default size for (128 seqs,k=16)/(256,k=24)/(300,k=1): "
                f"{'/'.join(str(rows[w]['max']) for w in widths)}; 17 (k=16 decode) captured: "
                f"{17 in rows['128,16,8192']['sizes']}; {len(rows)} configurations")
    if "twice" in o:
        return f"second call keeps the first result: {all(r['first'] == r['second'] for r in o['twice'].values())}"
    u = o["user_set"]
    return (f"user sizes -> {u['explicit_sizes']['sizes']}; user max 1024 -> {len(u['explicit_max']['sizes'])} "
            f"sizes up to {u['explicit_max']['max']}")


@scenario("vllm.cudagraph_sizes", cases=CASES, fixed=_fixed, describe=_describe)
def observe(part):
    return {part: PARTS[part]()}


FILTER = "if n * query_len <= max_cudagraph_capture_size"


def install_unsafe_build():
    """Replace ``VllmConfig._set_cudagraph_sizes`` with the PR-50488-only build: the installed (0.29-shape)
    method with upstream PR 54418's ceiling filter on the uniform-decode sizes removed. The widened
    default maximum follows: the final maximum is the last size, now the widest uniform-decode batch.
    Test-time only; returns the shipped function so callers can put it back."""
    module = importlib.import_module("vllm.config.vllm")
    shipped = inspect.unwrap(module.VllmConfig.__dict__["_set_cudagraph_sizes"])
    lines = textwrap.dedent(inspect.getsource(shipped)).splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.strip() == FILTER]
    if len(hits) != 1:
        raise RuntimeError(f"installed _set_cudagraph_sizes has {len(hits)} lines {FILTER!r}, expected 1")
    namespace = {}
    exec(compile("".join(lines[: hits[0]] + lines[hits[0] + 1:]), "<graphfix: unsafe-build reconstruction>", "exec"),
         vars(module), namespace)
    module.VllmConfig._set_cudagraph_sizes = namespace["_set_cudagraph_sizes"]
    return shipped
