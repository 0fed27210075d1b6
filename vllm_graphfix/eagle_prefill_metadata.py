"""vllm.eagle_prefill_metadata — Eagle draft prefill CUDA graphs are captured with freshly prepared attention metadata.

Symptom: the defect of vllm.spec_prefill_metadata under its earlier names: with model runner V2 and an
Eagle/MTP speculator, ``PrefillEagleCudaGraphManager`` (``vllm.v1.worker.gpu.spec_decode.eagle.cudagraph``)
captures the draft-prefill FULL graphs with the attention states the *target* capture returned, views of
buffers that later builds overwrite (illegal memory access on low-SM devices).
Upstream fix: fresh attention metadata for Eagle prefill graph capture (seed 002), released in 0.26.0:
``prepare_inputs_to_capture(...)`` for every warmup and capture pass, through the target runner's buffers.
Affected: ``>=0.21.0,<0.23.0`` (0.21.0, 0.22.1). Fixed in: 0.26.0.
Flag: ``GRAPHFIX_VLLM_EAGLE_PREFILL_METADATA`` (auto | on | off).
Wrapper: ``GPUModelRunner.capture_model`` publishes its runner (vllm.spec_prefill_metadata's wrapper);
``PrefillEagleCudaGraphManager.capture`` gets a mapping that prepares new metadata as 0.26.0 does, and a
forward function that, after a FULL descriptor's warmup, prepares the capture pass's metadata outside the
graph: one preparation per PIECEWISE descriptor, per FULL warmup and per FULL capture, on 0.22.1 and on
0.21.0 (whose capture loop reuses the warmup's state) alike. From 0.23.0 the module does not exist.
Evidence and limits: patches.md, section ``vllm.eagle_prefill_metadata``.
"""

import sys

from graphfix import Patch, Verdict, code_refs, params
from vllm_graphfix.spec_prefill_metadata import (RUNNER, _OwnReadFailed, _publish_runner, _runner, handover_drift, log,
                                                  prepare_fresh)

PATCH = Patch(
    id="vllm.eagle_prefill_metadata",
    engine="vllm",
    affected=">=0.21.0,<0.23.0",
    fixed_in="0.26.0",
    upstream="vllm-project/vllm (seed 002): fresh attention metadata for Eagle prefill graph capture "
             "(PrefillEagleCudaGraphManager, predecessor of vllm.spec_prefill_metadata)",
    summary="Eagle draft prefill CUDA graphs are captured with freshly prepared attention metadata",
)
MANAGERS = "vllm.v1.worker.gpu.spec_decode.eagle.cudagraph"
PATCH.wraps(RUNNER, "GPUModelRunner.capture_model")(_publish_runner)


class _Fresh:
    """Stands in for ``{desc: (attn_metadata, slot_mappings)}`` and wraps the forward function so that
    each FULL descriptor gets one fresh preparation for its warmup and one for its capture, made outside
    the graph (after the warmup returns), whether the release re-reads the mapping for the capture
    (0.22.1) or reuses the warmup's state (0.21.0); PIECEWISE descriptors get one (skip_attn)."""

    def __init__(self, shipped, manager, speculator, runner):
        self._shipped, self._args = shipped, (manager, speculator, runner)
        self._pending, self._desc, self._forwards = {}, {}, {}

    def _prepare(self, desc):
        try:
            state = prepare_fresh(sys.modules[MANAGERS], desc, *self._args)
        except _OwnReadFailed as failed:  # graphfix's own reads: the shipped state, as released
            PATCH.fall_back(failed.__cause__)
            return self._shipped[desc]
        self._desc[id(state[1])] = (desc, state)  # the state is kept: ids stay unique
        return state

    def __getitem__(self, desc):
        return self._pending.pop(desc, None) or self._prepare(desc)

    def forward(self, fn):
        def call(num_reqs, num_tokens, attn_metadata, slot_mappings, *rest, **kw):
            desc = self._desc.get(id(slot_mappings), (None,))[0]
            if desc in self._pending:  # 0.21.0: the capture pass reuses the warmup's state
                attn_metadata, slot_mappings = self._pending.pop(desc)
            out = fn(num_reqs, num_tokens, attn_metadata, slot_mappings, *rest, **kw)
            self._forwards[desc] = n = self._forwards.get(desc, 0) + 1
            if desc is not None and n == 1 and desc.cg_mode == sys.modules[MANAGERS].CUDAGraphMode.FULL:
                self._pending[desc] = self._prepare(desc)  # for the capture pass, outside the graph
            return out

        return call


@PATCH.wraps(MANAGERS, "PrefillEagleCudaGraphManager.capture")
def _fresh_metadata(wrapped, instance, args, kwargs):
    def call(forward_fn, full_cg_attn_states, *rest, **kw):
        runner, speculator = _runner.get(), getattr(forward_fn, "__self__", None)
        if instance is None or runner is None or getattr(runner, "speculator", None) is not speculator:
            log.warning("vllm.eagle_prefill_metadata: draft prefill captured outside "
                        "GPUModelRunner.capture_model; saved target states used as shipped")
            return wrapped(forward_fn, full_cg_attn_states, *rest, **kw)
        fresh = _Fresh(full_cg_attn_states, instance, speculator, runner)
        return wrapped(fresh.forward(forward_fn), fresh, *rest, **kw)

    return call(*args, **kwargs)


@PATCH.probe
def probe(t):
    mod, capture = t.module(MANAGERS), t["PrefillEagleCudaGraphManager.capture"]
    if "prepare_inputs_to_capture" in code_refs(capture):
        return Verdict.fixed("Eagle prefill capture prepares its own metadata")
    if params(capture)[:3] != ("self", "forward_fn", "full_cg_attn_states") or "max_num_reqs" not in code_refs(
            capture):
        return Verdict.drifted("PrefillEagleCudaGraphManager.capture reads its states in an unknown way")
    return handover_drift(mod, t["GPUModelRunner.capture_model"]) or Verdict.buggy(
        "Eagle draft prefill capture reuses the attention states saved by the target capture")
