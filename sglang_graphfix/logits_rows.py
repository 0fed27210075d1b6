"""sglang.logits_rows — shared logits buffer covers every adaptive speculative candidate width.

Symptom: with ``--speculative-adaptive`` the server dies at start-up with ``shared logits buffer holds N
rows but caller needs M``: ``ModelRunner.max_decode_logits_rows`` sizes the buffer for the static draft
width only, while adaptive decoding also captures and replays graphs at every candidate width.
Upstream fix: size the shared logits buffer for adaptive candidates (seed 000, #30549), released in
0.5.19: the max over the static width and every candidate width (steps + 1).
Affected: ``>=0.5.15,<0.5.19`` (0.5.15, 0.5.15.post1, 0.5.16, 0.5.17, 0.5.18). Fixed in: 0.5.19.
Flag: ``GRAPHFIX_SGLANG_LOGITS_ROWS`` (auto | on | off).
Wrapper: call the original (static width), then raise the rows to ``max(capture bs) * tokens`` at each
candidate width through the release's own helpers (the per-width helper, ``get_batch_sizes_to_capture``,
the candidate resolver); the adaptive settings come from the runtime-context spec bag (0.5.17+) or the
runner's ``server_args``. Probe: runs the unwrapped method on a synthetic adaptive runner and compares
with the fixed rule; a backport that still undersizes is applied (if the wrapper fixes it) or drifted.
Why this equals 0.5.19, evidence and limits: patches.md, section ``sglang.logits_rows``.
"""

import importlib
import json
import os
import sys
import tempfile
import types

from graphfix import Patch, Verdict, params, receiver

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


def _cover(rows, runner, config, capture_sizes):
    """``rows`` raised to ``max(capture bs) * tokens`` at every candidate width of ``config``."""
    tokens_per_req = next(getattr(runner, name) for name in HELPERS if hasattr(runner, name))
    for steps in importlib.import_module(ADAPTIVE).resolve_candidate_steps_from_config(config):
        width = tokens_per_req(num_draft_tokens=steps + 1)
        capture_bs, _ = capture_sizes(runner, width)
        rows = max(rows, max(capture_bs) * width)
    return rows


@PATCH.wraps(MR, "ModelRunner.max_decode_logits_rows")
def _cover_candidate_widths(wrapped, instance, args, kwargs):
    rows = wrapped(*args, **kwargs)
    runner = receiver(instance, args)  # Class.method(non-instance): runner in args
    adaptive, config = _adaptive_config(runner)
    return _cover(rows, runner, config, sys.modules[MR].get_batch_sizes_to_capture) if adaptive else rows


# The probe's synthetic input: capture bs [8, 20] under the alignment filter "bs x width divisible by 8",
# static width 7, candidate steps {6, 3}. Width 7 keeps bs 8 (56 rows); width 4 keeps both (80 rows): a
# rule that looks at the static or the widest width only gives 56, the fixed rule 80.
PROBE_BS, PROBE_STATIC, PROBE_STEPS = (8, 20), 7, [6, 3]


class _ProbeRunner:
    """Not a ModelRunner: what ``max_decode_logits_rows`` reads, with the width helper as for EAGLE top-1."""

    def __init__(self, spec):
        self.server_args, self.cuda_graph_bs, self.is_draft_worker = spec, list(PROBE_BS), False

    def decode_num_tokens_per_req(self, *, num_draft_tokens=None):
        return num_draft_tokens or PROBE_STATIC

    decode_num_tokens_per_bs = decode_num_tokens_per_req  # 0.5.15's name

    def decode_graph_gather_requirements(self):
        return False, False


def _probe_capture_sizes(runner, width, **_):
    return [bs for bs in runner.cuda_graph_bs if bs * width % 8 == 0], []


def _run_unbound(method, runner, spec):
    """``method(runner)`` with the capture-size filter and the runtime-context spec reads of its own
    module replaced for this one call (a private copy of its globals: the module is not touched)."""
    scope = dict(method.__globals__, get_batch_sizes_to_capture=_probe_capture_sizes, get_spec=lambda: spec,
                 max_speculative_num_draft_tokens=lambda *a, **k: PROBE_STATIC)
    fn = types.FunctionType(method.__code__, scope, method.__name__, method.__defaults__, method.__closure__)
    fn.__kwdefaults__ = method.__kwdefaults__
    return fn(runner)


@PATCH.probe
def probe(t):
    method = t["ModelRunner.max_decode_logits_rows"]
    helper = next((h for h in HELPERS if t[f"ModelRunner.{h}"] is not None), None)
    if helper is None or "num_draft_tokens" not in params(t[f"ModelRunner.{helper}"]):
        return Verdict.drifted("ModelRunner has no per-width helper taking num_draft_tokens")
    if not callable(getattr(t.module(MR), "get_batch_sizes_to_capture", None)):
        return Verdict.drifted("model_runner has no get_batch_sizes_to_capture")
    resolve = getattr(importlib.import_module(ADAPTIVE), "resolve_candidate_steps_from_config", None)
    if not callable(resolve):
        return Verdict.drifted("adaptive_spec_params has no resolve_candidate_steps_from_config")
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "adaptive.json")
        with open(config, "w") as f:
            json.dump({"1": {"candidate_steps": PROBE_STEPS}}, f)
        spec = types.SimpleNamespace(speculative_adaptive=True, speculative_adaptive_config=config,
                                     speculative_num_draft_tokens=PROBE_STATIC, speculative_num_steps=PROBE_STATIC - 1)
        runner = _ProbeRunner(spec)
        widths = [PROBE_STATIC] + [steps + 1 for steps in resolve(config)]
        rule = max(max(_probe_capture_sizes(runner, w)[0]) * w for w in widths)
        shipped = _run_unbound(method, runner, spec)
        if shipped == rule:
            return Verdict.fixed(f"max_decode_logits_rows sizes {shipped} rows for widths {sorted(set(widths))}, "
                                 "as the fixed rule does")
        patched = _cover(shipped, runner, config, _probe_capture_sizes)
    if patched == rule:
        return Verdict.buggy(f"max_decode_logits_rows sizes {shipped} rows where widths {sorted(set(widths))} "
                             f"need {rule}; with the wrapper {patched}")
    return Verdict.drifted(f"max_decode_logits_rows sizes {shipped} rows, the wrapper would make it {patched}, "
                           f"the fixed rule needs {rule}")
