"""Scenario for ``sglang.warmup_hook``: whose ``on_after_cuda_graph_warmup`` each consumer receives.

Real: ``DecodeCudaGraphRunner.capture_one_shape`` and ``capture_prepare`` (the release's own input
buffers, buffer registry, ``ForwardBatch`` and forward context), and the module-level
``maybe_flashinfer_autotune_speculative_draft`` (0.5.15+).
Stand-ins: the runner's constructor (attributes set by hand: it needs a real model config), the model
runner (a namespace), attention backends that only say who they are, a graph backend whose
``capture_one`` runs warmup -> hook -> capture on CPU, and -- inside the autotune helper's own module --
``should_run_flashinfer_autotune`` (yes) and ``run_flashinfer_autotune_forward`` (run the forward).
Backends are reported by role: ``model_runner`` (``model_runner.attn_backend``), ``capture_local``
(the runner's own backend, as adaptive extra runners have), ``pdmux_group_1`` (a pdmux stream group's).
"""

import contextlib
import importlib
import inspect
from types import SimpleNamespace

from graphfix.scenarios import replaced, scenario
from sglang_graphfix.scenarios.single_rank import CpuDevice, single_rank_process

RUNNER = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"
AUTOTUNE = "sglang.srt.model_executor.runner.flashinfer_autotune"
OVERRIDING_RUNNERS = (  # (module, class) of runners that bring their own capture_one_shape
    ("sglang.srt.speculative.eagle_draft_cuda_graph_runner", "EAGLEDraftCudaGraphRunner"),
    ("sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner", "EAGLEDraftExtendCudaGraphRunner"),
    ("sglang.srt.speculative.frozen_kv_mtp_cuda_graph_runner", "FrozenKVMTPCudaGraphRunner"),
)
BS = 4


class _Log:
    def __init__(self):
        self.consumer, self.hooks, self.seen = None, {}, {}


class _AttentionBackend:
    """Only says who it is; its post-warmup hook records which consumer called it."""

    def __init__(self, role, log):
        self.role, self.log = role, log

    def __getattr__(self, name):  # init_forward_metadata_*, init_cuda_graph_state, ...: no-ops
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: None

    def get_cuda_graph_seq_len_fill_value(self):
        return 1

    def on_after_cuda_graph_warmup(self):
        if self.log.consumer == "autotune":  # seen from inside the real helper
            self.log.hooks["autotune"] = self.role


class _GraphBackend:
    """CPU stand-in for Full/Breakable graph backends: warmup, post-warmup hook, capture."""

    def __init__(self, log):
        self.log = log

    def capture_one(self, shape_key, run_once, *args, post_warmup_hook=None, **kwargs):
        self.log.consumer = "capture_one"
        self.log.hooks["capture_one"] = getattr(getattr(post_warmup_hook, "__self__", None), "role", None)
        run_once()
        if post_warmup_hook is not None:
            post_warmup_hook()
        run_once()


class _SpecAlgorithm:
    """A speculative draft algorithm that is none of the named families."""

    def is_speculative(self):
        return True

    def __getattr__(self, name):
        if name.startswith("is_"):
            return lambda *args, **kwargs: False
        raise AttributeError(name)


def _call_accepted(fn, **kwargs):
    accepted = inspect.signature(fn).parameters
    return fn(**{k: v for k, v in kwargs.items() if k in accepted})


def _runner(mod, model_runner, attn_backend, log, pdmux):
    import torch

    buffers_mod = importlib.import_module("sglang.srt.model_executor.runner_utils.buffers")
    registry_mod = importlib.import_module("sglang.srt.model_executor.cuda_graph_buffer_registry")
    runner = object.__new__(mod.DecodeCudaGraphRunner)  # its __init__ needs a real model
    values = dict(
        model_runner=model_runner, attn_backend=attn_backend, device="cpu", device_module=CpuDevice,
        tp_size=1, dp_size=1, pp_size=1, attn_tp_size=1, attn_tp_rank=0, enable_pdmux=pdmux,
        tbo_plugin=SimpleNamespace(capture_one_batch_size=lambda *a, **k: None),
        deepep_adapter=SimpleNamespace(capture=lambda *a, **k: None),
        capture_forward_mode=mod.ForwardMode.DECODE, capture_hidden_mode=mod.CaptureHiddenMode.NULL,
        num_tokens_per_bs=1, captured_req_width=1, capture_bs=[BS], compile_bs=[], max_bs=BS,
        max_num_token=BS, seq_len_fill_value=1, encoder_len_fill_value=0, ragged_verify_mode=False,
        speculative_num_steps=None, speculative_num_draft_tokens=None, dllm_config=None, stream=None,
        backend=_GraphBackend(log),
    )
    for flag in ("enable_torch_compile", "enable_profile_cuda_graph", "enable_two_batch_overlap",
                 "is_encoder_decoder", "require_gathered_buffer", "require_mlp_tp_gather",
                 "require_attn_tp_gather", "require_mlp_sync", "enable_prefill_cp", "disable_padding",
                 "use_ngram_embedding", "is_dllm", "dsa_dual_graph", "record_nolora_graph",
                 "dllm_uses_input_embeds"):
        values[flag] = False
    vars(runner).update(values)
    common = dict(
        device="cpu", max_bs=BS, max_num_token=BS, hidden_size=8, vocab_size=16, dtype=torch.float32,
        dp_size=1, num_dp_ranks=1, pp_size=1, is_encoder_decoder=False, require_mlp_tp_gather=False,
        seq_len_fill_value=1, encoder_len_fill_value=0, num_tokens_per_bs=1, num_tokens_per_req=1,
        cache_loc_dtype=torch.int64, enable_mamba_track=False, ne_token_table=None,
        hc_hidden_size=None, pp_proxy_topk_size=None, next_token_logits_buffer=torch.zeros(BS, 16),
    )
    runner.buffers = _call_accepted(buffers_mod.DecodeInputBuffers.create, **common)
    runner.buffers.share_buffers()
    runner.buffer_registry = _call_accepted(
        registry_mod.build_decode_registry, **common, enable_num_token_non_padded=False,
        require_gathered_buffer=False, enable_prefill_cp=False, source=runner.buffers,
    )
    return runner


@contextlib.contextmanager
def _autotune_runs_forward(log):
    """Let the real autotune helper run: say yes to autotune, and run its forward (+ hook) once."""
    try:
        autotune = importlib.import_module(AUTOTUNE)
    except ImportError:  # 0.5.14: no autotune helper
        yield
        return

    def run_forward(model_runner, forward_fn, *args, **kwargs):
        log.consumer, log.hooks["autotune"] = "autotune", None
        forward_fn()  # the helper's own wrapper: forward, then the post-warmup hook it was given

    # engine globals, because the helper insists: it decides with torch.cuda.get_device_capability() (a GPU)
    # and tunes through flashinfer, and takes neither as an argument
    with replaced(autotune, should_run_flashinfer_autotune=lambda *args, **kwargs: True,
                  run_flashinfer_autotune_forward=run_forward):
        yield


def _overrides_untouched():
    untouched = True
    for module_name, cls_name in OVERRIDING_RUNNERS:
        cls = getattr(importlib.import_module(module_name), cls_name, None)
        method = vars(cls).get("capture_one_shape") if cls is not None else None
        untouched &= method is None or inspect.isfunction(method)
    return {"overriding_runners_shipped": untouched}


@scenario(
    "sglang.warmup_hook",
    cases={"adaptive_runner": {"kind": "adaptive"}, "pdmux_stream_group": {"kind": "pdmux"},
           "ordinary_runner": {"kind": "ordinary"}, "draft_runners": {"kind": "overrides"}},
    controls=("ordinary_runner", "draft_runners"),
    fixed=lambda obs: "hooks" not in obs or set(obs["hooks"].values()) == {obs["captured_on"]},
    describe=lambda obs: (
        "EAGLE/MTP runners' own capture_one_shape " + ("untouched" if obs["overriding_runners_shipped"] else "WRAPPED")
        if "hooks" not in obs else
        f"captured on {obs['captured_on']}; hook from " + ", ".join(f"{k}: {v}" for k, v in sorted(obs["hooks"].items()))
    ),
)
def observe(kind):
    if kind == "overrides":
        return _overrides_untouched()
    from sglang.srt.model_executor import forward_context

    mod = importlib.import_module(RUNNER)
    log = _Log()
    active = _AttentionBackend("model_runner", log)
    groups = [_AttentionBackend(f"pdmux_group_{i}", log) for i in range(2)]
    local = {"adaptive": _AttentionBackend("capture_local", log), "pdmux": active}.get(kind, active)
    model_runner = SimpleNamespace(
        attn_backend=active, decode_attn_backend_group=groups, spec_algorithm=_SpecAlgorithm(),
        is_draft_worker=True, device="cpu", gpu_id=0, dtype=None, canary_manager=None,
        hisparse_coordinator=None, capture_tail_hooks=[], capture_head_hooks=[], lora_manager=None, tp_group=None,
        attn_tp_sequence_sharded=lambda *args, **kwargs: False, kv_index_translator=SimpleNamespace(bind_runner_slots=lambda *a, **k: None),
        server_args=SimpleNamespace(debug_cuda_graph=False, enable_lora=False, speculative_eagle_topk=1),
    )

    def forward(input_ids, positions, forward_batch, **kwargs):
        log.seen.setdefault("forward_context", forward_context.get_attn_backend().role)
        log.seen.setdefault("model_runner_attn_backend", model_runner.attn_backend.role)

    with single_rank_process(enable_cudagraph_gc=True), _autotune_runs_forward(log):
        runner = _runner(mod, model_runner, local, log, pdmux=kind == "pdmux")
        before = dict(vars(runner))
        runner.capture_one_shape(BS, forward, 1 if kind == "pdmux" else None)
    return {"hooks": log.hooks, "captured_on": log.seen["forward_context"],
            "model_runner_attn_backend": log.seen["model_runner_attn_backend"],
            "runner_attributes_unchanged": vars(runner).keys() == before.keys()
            and all(vars(runner)[k] is v for k, v in before.items() if k in ("backend", "attn_backend"))}
