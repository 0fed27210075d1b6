"""vllm.spec_prefill_metadata — draft prefill CUDA graphs are captured with freshly prepared attention metadata.

Symptom: with model runner V2 and an autoregressive speculator (Eagle, MTP, Gemma4), the draft-prefill
FULL graphs are captured with the attention states the *target* capture saved: views of per-builder
persistent buffers that every later build overwrites, so kernels bake another descriptor's launch
metadata ("CUDA error: an illegal memory access was encountered" on low-SM devices, at start-up or on
the first draft-prefill replay).
Upstream fix: fresh attention metadata for speculator prefill graph capture (seed 002), released in
0.26.0: ``prepare_inputs_to_capture(...)`` for every warmup and capture pass, through the target
runner's ``input_buffers`` and ``attn_groups``.
Affected: ``>=0.23.0,<0.26.0`` (0.23.0, 0.24.0, 0.25.0, 0.25.1). Fixed in: 0.26.0.
Flag: ``GRAPHFIX_VLLM_SPEC_PREFILL_METADATA`` (auto | on | off).
Wrapper: ``GPUModelRunner.capture_model`` publishes its runner for the call; inside it
``PrefillSpeculatorCudaGraphManager.capture`` gets, instead of the saved states, a mapping whose every
``.warmup`` / ``.captured`` read prepares new metadata as 0.26.0 does. The capture loop, draft decode
capture and DFlash/DSpark stay as shipped; the 0.21/0.22 predecessor is vllm.eagle_prefill_metadata.
Evidence and limits: patches.md, section ``vllm.spec_prefill_metadata``.
"""

import contextvars
import logging
import sys

from graphfix import Patch, Verdict, code_refs, params, receiver

log = logging.getLogger("graphfix")
PATCH = Patch(
    id="vllm.spec_prefill_metadata",
    engine="vllm",
    affected=">=0.23.0,<0.26.0",
    fixed_in="0.26.0",
    upstream="vllm-project/vllm (seed 002): fresh attention metadata for speculator prefill graph capture",
    summary="draft prefill CUDA graphs are captured with freshly prepared attention metadata",
)
RUNNER = "vllm.v1.worker.gpu.model_runner"
MANAGERS = "vllm.v1.worker.gpu.spec_decode.autoregressive.cudagraph_utils"
_runner = contextvars.ContextVar("graphfix_capturing_runner", default=None)


@PATCH.wraps(RUNNER, "GPUModelRunner.capture_model")
def _publish_runner(wrapped, instance, args, kwargs):
    token = _runner.set(receiver(instance, args))
    try:
        return wrapped(*args, **kwargs)
    finally:
        _runner.reset(token)


class _OwnReadFailed(Exception):
    """graphfix could not gather prepare_inputs_to_capture's arguments (``__cause__`` says why)."""


def prepare_fresh(mod, desc, manager, speculator, runner):
    """Metadata for ``desc`` prepared as 0.26.0 does: the speculator's model state, block tables and KV-cache
    config with the target runner's input buffers and attention groups. Errors of graphfix's own reads
    raise :class:`_OwnReadFailed`; the engine's own ``prepare_inputs_to_capture`` errors pass through."""
    try:
        args = (desc.num_reqs or min(desc.num_tokens, manager.max_num_reqs), desc.num_tokens,
                speculator.model_state, runner.input_buffers, speculator.block_tables, runner.attn_groups,
                speculator.kv_cache_config)
        skip_attn = desc.cg_mode == mod.CUDAGraphMode.PIECEWISE
    except Exception as exc:  # noqa: BLE001 - reported by the caller, which falls back
        raise _OwnReadFailed from exc
    return mod.prepare_inputs_to_capture(*args, skip_attn=skip_attn)


def handover_drift(mod, capture_model):
    """Why the release cannot take 0.26.0's fresh metadata (a drifted Verdict), or None when it can."""
    if params(getattr(mod, "prepare_inputs_to_capture", None)) != (
            "num_reqs", "num_tokens", "model_state", "input_buffers", "block_tables", "attn_groups",
            "kv_cache_config", "skip_attn"):
        return Verdict.drifted("prepare_inputs_to_capture has an unknown signature")
    if not {"input_buffers", "attn_groups", "speculator"} <= code_refs(capture_model):
        return Verdict.drifted("GPUModelRunner.capture_model no longer hands the target's buffers over")
    return None


class _FreshStates:
    """Stands in for ``{desc: AttentionStatePair}``: each ``.warmup``/``.captured`` read prepares anew.
    If graphfix cannot gather the arguments (an attribute drifted), that read gets the shipped state."""

    def __init__(self, shipped, manager, speculator, runner, desc=None):
        self._shipped, self._args, self._desc = shipped, (manager, speculator, runner), desc

    def __getitem__(self, desc):
        return _FreshStates(self._shipped, *self._args, desc)

    def _fresh(self, which):
        try:
            return prepare_fresh(sys.modules[MANAGERS], self._desc, *self._args)
        except _OwnReadFailed as failed:  # graphfix's own reads: the shipped state, as released
            PATCH.fall_back(failed.__cause__)
            return getattr(self._shipped[self._desc], which)

    warmup = property(lambda self: self._fresh("warmup"))
    captured = property(lambda self: self._fresh("captured"))


@PATCH.wraps(MANAGERS, "PrefillSpeculatorCudaGraphManager.capture", optional=True)
def _fresh_metadata(wrapped, instance, args, kwargs):
    def call(forward_fn, attn_states, *rest, **kw):
        runner, speculator = _runner.get(), getattr(forward_fn, "__self__", None)
        if instance is None or runner is None or getattr(runner, "speculator", None) is not speculator:
            log.warning("vllm.spec_prefill_metadata: draft prefill captured outside "
                        "GPUModelRunner.capture_model; saved target states used as shipped")
            return wrapped(forward_fn, attn_states, *rest, **kw)
        return wrapped(forward_fn, _FreshStates(attn_states, instance, speculator, runner), *rest, **kw)

    return call(*args, **kwargs)


@PATCH.probe
def probe(t):
    mod = t.module(MANAGERS)
    capture = t["PrefillSpeculatorCudaGraphManager.capture"]
    if capture is None or "prepare_inputs_to_capture" in code_refs(capture):
        fixed = getattr(getattr(mod, "SpeculatorCudaGraphManager", None), "capture", capture)
        if "prepare_inputs_to_capture" in code_refs(fixed):
            return Verdict.fixed("draft prefill capture prepares its own metadata for every pass")
        return Verdict.drifted("no draft prefill capture manager of a known shape")
    if params(capture)[:3] != ("self", "forward_fn", "attn_states") or not {
            "warmup", "captured", "max_num_reqs"} <= code_refs(capture):
        return Verdict.drifted("PrefillSpeculatorCudaGraphManager.capture reads its states in an unknown way")
    return handover_drift(mod, t["GPUModelRunner.capture_model"]) or Verdict.buggy(
        "draft prefill capture reuses the attention states saved by the target capture")
