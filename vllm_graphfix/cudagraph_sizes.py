"""vllm.cudagraph_sizes — default CUDA-graph capture sizes stay under the platform ceiling.

Symptom: upstream PR 50488 widened the default capture list to cover the widest uniform-decode batch,
max_num_seqs*(1+k) tokens (2176 for 128 seqs/k=16, 6400 for 256 seqs/k=24), with speculative decoding:
FULL-graph capture ran out of memory at startup ("CUDA out of memory" during graph capture), or graph
memory squeezed the KV cache to 0.94 GiB where 5.12 GiB were needed. It lived on main only (no release).
Upstream fix: PR 54418 (seed 001), released in 0.29.0: uniform-decode sizes n*(1+k) are appended only
up to the default ceiling (512; 1024 on capability family 100) and max_num_batched_tokens.
Affected: a build whose default list exceeds the ceiling (detected by running the method, not by
version), and 0.23.0-0.28.0, whose lists are safe but lack the uniform-decode sizes; measured with
0.28.0's CudagraphDispatcher, adding them moves 128 uniform-decode batches (94 of 858 configurations)
from PIECEWISE/eager to FULL, so they are backported.  Fixed: 0.29.0 (retires there: the probe finds
the uniform sizes within the ceiling).   Flag: GRAPHFIX_VLLM_CUDAGRAPH_SIZES (auto | on | off).
Wrapper: after the shipped method, and only when the user set neither cudagraph_capture_sizes nor
max_cudagraph_capture_size, drop default sizes above min(ceiling, max_num_batched_tokens) and add 0.29.0's
uniform-decode sizes; then re-run the release's sequence-parallel filter and its post_init_cudagraph_sizes
(compile_sizes restored first). The second __post_init__ takes the user branch and is left alone.
"""

import logging
import types

from graphfix import Patch, Verdict

log = logging.getLogger("graphfix")
PATCH = Patch(
    id="vllm.cudagraph_sizes",
    engine="vllm",
    affected=">=0.23.0",  # upper bound is behavioural: the probe retires the patch on the fixed shape
    fixed_in="0.29.0",
    upstream="vllm-project/vllm PR 54418 (seed 001): keep default CUDA graph sizes memory-safe",
    summary="default capture sizes <= platform ceiling, with uniform-decode sizes n*(1+k) under it",
)
MOD = "vllm.config.vllm"


def _ceiling():
    from vllm.platforms import current_platform

    return 1024 if current_platform.is_device_capability_family(100) else 512


def _uniform_decode_sizes(config, top, ceiling):
    """0.29.0's decode sizes n*q up to ``top``: q per dynamic-speculation tier, n on a request grid."""
    k, spec = config.num_speculative_tokens, config.speculative_config
    max_seqs = config.scheduler_config.max_num_seqs
    if k == 0:
        return set()
    tiers = [(1 + k, max_seqs)]
    if spec is not None and getattr(spec, "uses_dynamic_speculative_decoding", lambda: False)():
        from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

        try:
            dense = build_dynamic_sd_schedule_lookup(
                spec.num_speculative_tokens_per_batch_size, vllm_max_batch_size=max_seqs,
                vllm_num_speculative_tokens=k)
        except ValueError:
            pass
        else:  # widest batch size running at each query length
            tiers = list({n + 1: bs for bs, n in enumerate(dense[1:], start=1)}.items())

    def request_counts(most):
        most = min(most, ceiling)
        grid = [n for n in (1, 2, 4) if n <= most] + list(range(8, min(most + 1, 256), 8))
        return set(grid + list(range(256, most + 1, 16)) + [most])

    return {n * q for q, most in tiers for n in request_counts(most) if n * q <= top}


@PATCH.wraps(MOD, "VllmConfig._set_cudagraph_sizes")
def _enforce_policy(wrapped, instance, args, kwargs):
    config = instance if instance is not None else args[0]  # unbound calls on stand-ins: see ENGINES.md
    cc = config.compilation_config
    defaulted = cc.cudagraph_capture_sizes is None and cc.max_cudagraph_capture_size is None
    compile_sizes = list(cc.compile_sizes) if cc.compile_sizes is not None else None
    result = wrapped(*args, **kwargs)
    sizes = list(cc.cudagraph_capture_sizes or ())
    if not (defaulted and sizes):
        return result
    sched, ceiling = config.scheduler_config, _ceiling()
    budget = min(ceiling, sched.max_num_batched_tokens)
    top = min(sched.max_num_seqs * (1 + config.num_speculative_tokens) * 2, budget)
    wanted = {s for s in sizes if s <= budget}
    wanted = sorted(wanted | _uniform_decode_sizes(config, top, ceiling))
    if config.parallel_config.tensor_parallel_size > 1 and cc.pass_config.enable_sp:
        wanted = config.update_sizes_for_sequence_parallelism(wanted)
    if wanted and wanted != sizes:
        log.info("vllm.cudagraph_sizes: default capture sizes %s -> %s", sizes, wanted)
        cc.cudagraph_capture_sizes, cc.max_cudagraph_capture_size = wanted, wanted[-1]
        cc.compile_sizes = compile_sizes
        cc.post_init_cudagraph_sizes()
    return result


def default_sizes(method, max_num_seqs, k, max_num_batched_tokens=8192):
    """Run ``method`` (the unbound ``_set_cudagraph_sizes``) on a strict stand-in config with defaults."""
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
    sizes, ceiling = default_sizes(t["VllmConfig._set_cudagraph_sizes"], 128, 16), _ceiling()
    if sizes and sizes[-1] > ceiling:
        return Verdict.buggy(f"default sizes reach {sizes[-1]} tokens, above the {ceiling}-token ceiling")
    if 17 in sizes:
        return Verdict.fixed("default sizes include uniform-decode sizes n*(1+k) under the ceiling")
    if sizes and sizes[-1] in (512, ceiling):  # releases before 0.28 cap the grid at 512 everywhere
        return Verdict.buggy("default sizes are the token grid only: backporting the uniform-decode sizes")
    return Verdict.drifted(f"unexpected default sizes for 128 seqs, k=16: {sizes}")
