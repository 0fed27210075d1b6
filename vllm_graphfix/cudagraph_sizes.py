"""vllm.cudagraph_sizes — default capture sizes never exceed the platform ceiling.

Symptom: upstream PR 50488 raised the default ``max_cudagraph_capture_size`` to the widest uniform-decode
batch, ``max_num_seqs * (1 + k)`` tokens: FULL-graph capture ran out of memory at start-up, or graph
memory squeezed the KV cache below what one request needs. That build lived on main only.
Upstream fix: PR 54418 (seed 001), undoing PR 50488's memory regression, released in 0.29.0: default
sizes stay within the ceiling (512; 1024 on capability family 100) and ``max_num_batched_tokens``.
Affected: ``>0.28.0``, decided by the probe (no release shipped the bug). Fixed in: 0.29.0.
Flag: ``GRAPHFIX_VLLM_CUDAGRAPH_SIZES`` (auto | on | off).
Probe: runs the shipped method on strict stand-in configs: a default size above the ceiling -> applied;
uniform-decode sizes within it -> retired; the plain token grid -> not-affected (never had the regression).
Wrapper: after the shipped method, and only when the user set neither ``cudagraph_capture_sizes`` nor
``max_cudagraph_capture_size``: drop the default sizes above min(ceiling, max_num_batched_tokens), restore
``compile_sizes`` and re-run ``post_init_cudagraph_sizes()``: 0.29.0's list for the same config. The
uniform-decode sizes of 0.29.0 are the separate patch vllm.uniform_decode_sizes.
Upstream's failing widths, the rebuilt PR 50488 build, evidence: patches.md, section ``vllm.cudagraph_sizes``.
"""

import inspect
import logging
import types

from graphfix import Patch, Verdict, receiver

log = logging.getLogger("graphfix")
PATCH = Patch(
    id="vllm.cudagraph_sizes",
    engine="vllm",
    affected=">0.28.0",  # no release shipped it; the probe decides (main builds before 0.29.0, regressions)
    fixed_in="0.29.0",
    upstream="vllm-project/vllm PR 54418 (seed 001): keep default CUDA graph sizes memory-safe "
             "(regression of PR 50488 on main only; found by probe)",
    summary="default capture sizes never exceed the platform ceiling",
)
MOD = "vllm.config.vllm"
PROBES = ((128, 16), (256, 24), (300, 1))  # upstream's failing widths: 2176, 6400, 600 tokens


def ceiling():
    from vllm.platforms import current_platform

    return 1024 if current_platform.is_device_capability_family(100) else 512


@PATCH.wraps(MOD, "VllmConfig._set_cudagraph_sizes")
def _cap_defaults(wrapped, instance, args, kwargs):
    config = receiver(instance, args)
    cc = config.compilation_config
    defaulted = cc.cudagraph_capture_sizes is None and cc.max_cudagraph_capture_size is None
    compile_sizes = list(cc.compile_sizes) if cc.compile_sizes is not None else None
    result = wrapped(*args, **kwargs)
    sizes = list(cc.cudagraph_capture_sizes or ())
    budget = min(ceiling(), config.scheduler_config.max_num_batched_tokens)
    if defaulted and sizes and sizes[-1] > budget:
        replace_defaults(PATCH.id, cc, sizes, [s for s in sizes if s <= budget], compile_sizes)
    return result


def replace_defaults(patch_id, cc, sizes, wanted, compile_sizes):
    """``wanted`` becomes the default capture list: the compile sizes as before the shipped method ran,
    then the release's own ``post_init_cudagraph_sizes()`` (its sorting, filtering and bookkeeping)."""
    log.info("%s: default capture sizes %s -> %s", patch_id, sizes, wanted)
    cc.cudagraph_capture_sizes, cc.max_cudagraph_capture_size = wanted, wanted[-1]
    cc.compile_sizes = compile_sizes
    cc.post_init_cudagraph_sizes()


def default_sizes(method, max_num_seqs, k, max_num_batched_tokens=8192):
    """Run ``method`` (an unbound ``_set_cudagraph_sizes``) on a strict stand-in config with defaults."""
    from vllm.config import CompilationConfig

    ns = types.SimpleNamespace
    config = ns(model_config=ns(enforce_eager=False), compilation_config=CompilationConfig(),
                scheduler_config=ns(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens),
                parallel_config=ns(tensor_parallel_size=1), performance_mode="balanced",
                speculative_config=ns(num_speculative_tokens=k,
                                      uses_dynamic_speculative_decoding=lambda: False),
                num_speculative_tokens=k, uniform_decode_query_len=1 + k)
    method(config)
    return list(config.compilation_config.cudagraph_capture_sizes)


@PATCH.probe
def probe(t):
    top = ceiling()
    shipped = inspect.unwrap(t["VllmConfig._set_cudagraph_sizes"])  # under any other patch's wrapper
    seen = {cfg: default_sizes(shipped, *cfg) for cfg in PROBES}
    if not all(seen.values()):
        return Verdict.drifted(f"no default sizes for {[c for c, s in seen.items() if not s]}")
    widest = max(s[-1] for s in seen.values())
    if widest > top:
        return Verdict.buggy(f"default sizes reach {widest} tokens, above the {top}-token ceiling")
    if 17 in seen[(128, 16)]:
        return Verdict.fixed(f"default uniform-decode sizes n*(1+k) stay within the {top}-token ceiling")
    return Verdict.unaffected(f"default sizes stay within the {top}-token ceiling: this build never had the "
                              "PR 50488 memory regression (nothing to change)")
