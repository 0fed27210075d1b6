"""vllm.uniform_decode_sizes — default capture sizes gain 0.29.0's uniform-decode sizes n*(1+k) (opt-in).

Symptom: not a crash, speed: the default capture list of 0.23-0.28 is a token grid capped at 512, so with
speculative decoding (q = 1+k tokens per request) the widest uniform-decode batches have no FULL graph of
their exact size (33 seqs, k=1: 66 tokens pad to 72) and run PIECEWISE or eager.
Upstream fix: PRs 50488 + 54418, released together in 0.29.0: sizes n*q (n on a request grid, per
dynamic-speculation tier) appended within min(max_num_seqs*q*2, ceiling, max_num_batched_tokens).
Affected: ``>=0.23.0,<0.29.0`` (0.23.0 - 0.28.0: the shipped defaults are the plain grid). Fixed in: 0.29.0.
Flag: ``GRAPHFIX_VLLM_UNIFORM_DECODE_SIZES``, opt-in: ``auto`` means off, only ``on`` applies it
(backported improvements stay opt-in until shown on real hardware; patches.md says why).
Wrapper: after the shipped method, only for default sizes (user set neither list nor maximum) with k > 0:
add the sizes n*q, re-run the sequence-parallel filter, restore compile_sizes and re-run
post_init_cudagraph_sizes(): equals 0.29.0. Refused (shipped list kept, one warning) on capability family
100 (ceiling 1024) by a release that caps its own grid at 512 (of those checked: 0.23.0-0.26.0).
The dispatcher study, evidence and limits: patches.md, section ``vllm.uniform_decode_sizes``.
"""

import inspect
import logging

from graphfix import Patch, Verdict, receiver
from vllm_graphfix.cudagraph_sizes import MOD, PROBES, ceiling, default_sizes, replace_defaults

log = logging.getLogger("graphfix")
PATCH = Patch(
    id="vllm.uniform_decode_sizes",
    engine="vllm",
    affected=">=0.23.0,<0.29.0",
    fixed_in="0.29.0",
    upstream="vllm-project/vllm PRs 50488 + 54418: uniform-decode capture sizes within the ceiling "
             "(opt-in backport)",
    summary="default capture sizes gain 0.29.0's uniform-decode sizes n*(1+k) (opt-in)",
    default="off",
)
_refused = []


def _decode_sizes(config, k, pre, top):
    """0.29.0's n*q up to ``top``: q per dynamic-speculation tier, n on the request grid."""
    spec, max_seqs = config.speculative_config, config.scheduler_config.max_num_seqs
    tiers = [(1 + k, max_seqs)]
    if getattr(spec, "uses_dynamic_speculative_decoding", lambda: False)():
        from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

        try:
            dense = build_dynamic_sd_schedule_lookup(spec.num_speculative_tokens_per_batch_size,
                                                     vllm_max_batch_size=max_seqs, vllm_num_speculative_tokens=k)
        except ValueError:
            pass
        else:  # the widest batch size running at each query length
            tiers = list({n + 1: bs for bs, n in enumerate(dense[1:], start=1)}.items())

    def grid(most):
        most = min(most, ceiling())
        return {n for n in (1, 2, 4) if n <= most} | set(range(8, min(most + 1, 256), 8)) | set(
            range(256, most + 1, 16)) | {most}

    return {n * q for q, most in tiers for n in grid(most) if n * q <= min(pre, top)}


@PATCH.wraps(MOD, "VllmConfig._set_cudagraph_sizes")
def _add_decode_sizes(wrapped, instance, args, kwargs):
    config = receiver(instance, args)
    cc = config.compilation_config
    defaulted = cc.cudagraph_capture_sizes is None and cc.max_cudagraph_capture_size is None
    compile_sizes = list(cc.compile_sizes) if cc.compile_sizes is not None else None
    result = wrapped(*args, **kwargs)
    sizes, k = list(cc.cudagraph_capture_sizes or ()), config.num_speculative_tokens
    if not (defaulted and sizes and k):
        return result
    sched, top = config.scheduler_config, ceiling()
    pre = min(sched.max_num_seqs * (1 + k) * 2, top)
    if top > 512 and min(pre, sched.max_num_batched_tokens) > 512 and sizes[-1] <= 512:
        if not _refused:
            _refused.append(1)
            log.warning("vllm.uniform_decode_sizes: this release caps its default sizes at 512 where 0.29.0 "
                        "uses the %d-token ceiling; left as shipped (would equal neither release)", top)
        return result
    wanted = sorted(set(sizes) | _decode_sizes(config, k, pre, sched.max_num_batched_tokens))
    if config.parallel_config.tensor_parallel_size > 1 and cc.pass_config.enable_sp:
        wanted = config.update_sizes_for_sequence_parallelism(wanted)
    if wanted and wanted != sizes:
        replace_defaults(PATCH.id, cc, sizes, wanted, compile_sizes)
    return result


@PATCH.probe
def probe(t):
    shipped, top = inspect.unwrap(t["VllmConfig._set_cudagraph_sizes"]), ceiling()
    seen = {cfg: default_sizes(shipped, *cfg) for cfg in PROBES}
    if any(s and s[-1] > top for s in seen.values()):
        return Verdict.unaffected(f"default sizes exceed the {top}-token ceiling (PR 50488 build): "
                                  "vllm.cudagraph_sizes is the fix there")
    if 17 in seen[(128, 16)]:
        return Verdict.fixed("default sizes include uniform-decode sizes n*(1+k) within the ceiling")
    if all(seen.values()) and 17 not in seen[(128, 16)]:
        return Verdict.buggy("default sizes are the token grid only: 0.29.0's uniform-decode sizes available")
    return Verdict.drifted(f"unexpected default sizes: {seen}")
