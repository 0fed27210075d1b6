"""sglang.logits_rows — size the shared logits buffer for every adaptive speculative width.

Symptom: with ``--speculative-adaptive`` the server dies at startup with ``shared logits buffer holds
N rows but caller needs M``: ``ModelRunner.max_decode_logits_rows`` sizes the buffer for the static
draft width only, while adaptive decoding also captures and replays graphs at every candidate width.
Upstream fix: SGLang 0.5.19 (seed 000, issue #30549) takes the max over the static width and every
candidate width (steps + 1). Affected: 0.5.15, 0.5.15.post1, 0.5.16, 0.5.17, 0.5.18. Fixed: 0.5.19.
Flag: ``GRAPHFIX_SGLANG_LOGITS_ROWS`` (auto | on | off).
Wrapper: call the original (static width), then take the max with ``max(capture bs) * tokens`` at each
candidate width, through the release's own helpers: the per-width helper (``decode_num_tokens_per_req``,
``decode_num_tokens_per_bs`` in 0.5.15), ``get_batch_sizes_to_capture`` and the candidate resolver. The
adaptive settings come from the runtime-context spec bag (0.5.17+) or the runner's ``server_args``.
Resolution keeps the static width among the candidates, so the result equals 0.5.19's.
"""

import importlib
import sys

from graphfix import Patch, Verdict, code_refs, params

PATCH = Patch(
    id="sglang.logits_rows",
    engine="sglang",
    affected=">=0.5.15,<0.5.19",
    fixed_in="0.5.19",
    upstream="sgl-project/sglang: size shared logits buffer for adaptive candidates (seed 000, #30549)",
    summary="shared logits buffer covers every adaptive speculative candidate width",
)
MR = "sglang.srt.model_executor.model_runner"
ADAPTIVE = "sglang.srt.speculative.adaptive_spec_params"
RC = "sglang.srt.runtime_context"  # both imported lazily: they load while model_runner is importing
HELPERS = ("decode_num_tokens_per_req", "decode_num_tokens_per_bs")  # 0.5.16+, 0.5.15
for _helper in HELPERS:
    PATCH.reads(MR, f"ModelRunner.{_helper}", optional=True)


def _adaptive_config(runner):
    """(adaptive?, config path) as resolved: the spec bag where published, else ``server_args``."""
    spec = runner.server_args
    get_spec = getattr(importlib.import_module(RC), "get_spec", None)
    if get_spec is not None:
        try:
            spec = get_spec()
        except ValueError:  # context not published (tools that build a ModelRunner by hand)
            pass
    return bool(getattr(spec, "speculative_adaptive", False)), getattr(spec, "speculative_adaptive_config", None)


@PATCH.wraps(MR, "ModelRunner.max_decode_logits_rows")
def _cover_candidate_widths(wrapped, instance, args, kwargs):
    rows = wrapped(*args, **kwargs)
    runner = instance if instance is not None else args[0]  # Class.method(non-instance): runner in args
    adaptive, config = _adaptive_config(runner)
    if not adaptive:
        return rows
    tokens_per_req = next(getattr(runner, name) for name in HELPERS if hasattr(runner, name))
    capture_sizes = sys.modules[MR].get_batch_sizes_to_capture
    for steps in importlib.import_module(ADAPTIVE).resolve_candidate_steps_from_config(config):
        width = tokens_per_req(num_draft_tokens=steps + 1)
        capture_bs, _ = capture_sizes(runner, width)
        rows = max(rows, max(capture_bs) * width)
    return rows


@PATCH.probe
def probe(t):
    refs = code_refs(t["ModelRunner.max_decode_logits_rows"])
    if "resolve_candidate_steps_from_config" in refs:
        return Verdict.fixed("max_decode_logits_rows already walks the adaptive candidate steps")
    helper = next((h for h in HELPERS if h in refs and t[f"ModelRunner.{h}"] is not None), None)
    if helper is None or "get_batch_sizes_to_capture" not in refs or "speculative_adaptive" in refs:
        return Verdict.drifted("max_decode_logits_rows is not the static-width-only shape")
    if "num_draft_tokens" not in params(t[f"ModelRunner.{helper}"]):
        return Verdict.drifted(f"ModelRunner.{helper} takes no num_draft_tokens")
    if not callable(getattr(importlib.import_module(ADAPTIVE), "resolve_candidate_steps_from_config", None)):
        return Verdict.drifted("adaptive_spec_params has no resolve_candidate_steps_from_config")
    return Verdict.buggy(f"rows sized for the static width only ({helper}())")
