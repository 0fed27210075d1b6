"""sglang.warmup_hook on a real GPU: a graph captured with the wrong post-warmup hook replays
frozen metadata; with graphfix it replays what an eager run computes.

The bug class, built for real: ``LayoutSwitchingBackend`` behaves like FlashInfer / FlashMLA
attention backends. Its first eager forward (a capture warmup) "plans" once and switches its
metadata to a post-warmup layout (``packed_loc``, computed at that moment and never refreshed);
``on_after_cuda_graph_warmup`` switches it back to the raw layout (``raw_loc``) that
``init_forward_metadata_out_graph`` refreshes before every replay. An adaptive speculative runner
owns a second, capture-local backend: ``DecodeCudaGraphRunner(model_runner, attn_backend=local)``.

The release's own ``DecodeCudaGraphRunner.capture()`` -> ``_capture_one_stream`` ->
``capture_one_shape`` -> ``capture_prepare`` (with its own input buffers and buffer registry) ->
``FullCudaGraphBackend.capture_one`` run unchanged; only the model (a toy embedding + gather
"attention"), the model runner and the single-rank parallel group are stand-ins (see
``harness/sglang_process.py``). Replay = refresh the backend's raw metadata for new
inputs, then ``FullCudaGraphBackend.replay`` (the runner's own ``load_batch``/``execute`` are not
driven: they need a real model's batch). Unpatched, the hook goes to ``model_runner.attn_backend``,
the capture-local backend stays in its post-warmup layout, the graph reads the frozen metadata and
the replay differs from eager; patched (graphfix ``sglang.warmup_hook``), it matches.

Skips cleanly without CUDA (CI) and when SGLang or the patch is not importable.
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from harness import sglang_process as P  # noqa: E402

PATCH_ID = "sglang.warmup_hook"
AFFECTED = ("0.5.14", "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18")
RUNNER_MOD = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"

P.install_standins()
import graphfix  # noqa: E402

PATCH_MODULES = P.import_available_patches(("warmup_hook",))
graphfix.remove()
try:
    graphfix.apply("sglang", only=[PATCH_ID])  # hooks in place before the engine is imported
except graphfix.FlagError as exc:
    pytest.skip(f"graphfix flag error: {exc}", allow_module_level=True)
try:
    import importlib

    decode_mod = importlib.import_module(RUNNER_MOD)
    from sglang.srt.model_executor import forward_context as fctx
    from sglang.srt.model_executor.runner_backend.full_cuda_graph_backend import FullCudaGraphBackend
    from sglang.srt.model_executor.runner_utils import buffers as buffers_mod
    from sglang.srt.model_executor import cuda_graph_buffer_registry as registry_mod
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
except Exception as exc:  # noqa: BLE001 - sglang absent or not importable here
    pytest.skip(f"sglang not importable: {type(exc).__name__}: {exc}", allow_module_level=True)

pytestmark = pytest.mark.gpu

VOCAB, HIDDEN, KV_ROWS = 512, 256, 4096
CAPTURE_BS = [4, 8]


class LayoutSwitchingBackend:
    """Attention backend whose warmup upgrades its metadata to a once-computed layout."""

    def __init__(self, name, max_tokens):
        self.name = name
        self.raw_loc = torch.zeros(max_tokens, dtype=torch.int64, device="cuda")
        self.packed_loc = torch.zeros(max_tokens, dtype=torch.int64, device="cuda")
        self.layout = "raw"
        self.loc = None
        self.hook_calls = 0
        self.captured_layouts = []

    # -- what the decode runner calls -------------------------------------------------------
    def init_cuda_graph_state(self, max_bs, max_num_tokens):
        pass

    def get_cuda_graph_seq_len_fill_value(self):
        return 1

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        """Outside the graph, before capture and before every replay: raw metadata from the batch."""
        n = forward_batch.out_cache_loc.shape[0]
        self.raw_loc[:n].copy_(forward_batch.out_cache_loc)

    def init_forward_metadata_in_graph(self, forward_batch):
        n = forward_batch.out_cache_loc.shape[0]
        capturing = torch.cuda.is_current_stream_capturing()
        if capturing:
            self.captured_layouts.append(self.layout)
        if self.layout == "post_warmup":
            self.loc = self.packed_loc[:n]  # planned at warmup, not refreshed on replay
        else:
            self.loc = self.raw_loc[:n]
            if not capturing:  # warmup: plan once and switch to the packed layout
                self.packed_loc[:n].copy_(self.raw_loc[:n])
                self.layout = "post_warmup"

    def on_after_cuda_graph_warmup(self):
        self.layout = "raw"
        self.hook_calls += 1

    def attend(self, kv_cache):
        return kv_cache.index_select(0, self.loc)


class ToyDecodeModel(torch.nn.Module):
    """embedding @ W + gathered KV rows; the attention backend comes from SGLang's forward context."""

    def __init__(self):
        super().__init__()
        g = torch.Generator(device="cuda").manual_seed(0)
        self.embed = torch.randn(VOCAB, HIDDEN, generator=g, device="cuda")
        self.w = torch.randn(HIDDEN, HIDDEN, generator=g, device="cuda") / HIDDEN ** 0.5
        self.kv_cache = torch.randn(KV_ROWS, HIDDEN, generator=g, device="cuda")

    def forward(self, input_ids, positions, forward_batch):
        backend = fctx.get_attn_backend()
        return self.embed[input_ids] @ self.w + backend.attend(self.kv_cache)

    def eager(self, input_ids, loc):
        return self.embed[input_ids] @ self.w + self.kv_cache[loc]


def _call_filtered(fn, **kwargs):
    accepted = inspect.signature(fn).parameters
    return fn(**{k: v for k, v in kwargs.items() if k in accepted})


class HookTestRunner(decode_mod.DecodeCudaGraphRunner):
    """The release's runner with its constructor's outcome set by hand (its constructor needs a
    real model config); every capture method is the release's own."""

    def __init__(self, model_runner, attn_backend):
        self.model_runner = model_runner
        self.device, self.device_module = "cuda", torch.cuda
        self.tp_size = self.dp_size = self.pp_size = 1
        self.attn_tp_size, self.attn_tp_rank = 1, 0
        self.tbo_plugin = SimpleNamespace(capture_one_batch_size=lambda *a, **k: None)
        self.deepep_adapter = SimpleNamespace(capture=lambda *a, **k: None, replay=lambda *a, **k: None)
        self.enable_torch_compile = self.enable_profile_cuda_graph = self.enable_pdmux = False
        self.enable_two_batch_overlap = self.is_encoder_decoder = False
        self.require_gathered_buffer = self.require_mlp_tp_gather = False
        self.require_attn_tp_gather = self.require_mlp_sync = self.enable_prefill_cp = False
        self.disable_padding = self.use_ngram_embedding = self.is_dllm = False
        self.ragged_verify_mode = False
        self.dllm_config = None
        self.speculative_num_steps = self.speculative_num_draft_tokens = None
        self.speculative_algorithm = None
        self.attn_backend = attn_backend
        self.capture_forward_mode = decode_mod.ForwardMode.DECODE
        self.capture_hidden_mode = decode_mod.CaptureHiddenMode.NULL
        self.num_tokens_per_bs = self.captured_req_width = 1
        self.capture_bs, self.compile_bs = list(CAPTURE_BS), []
        self.max_bs = max(CAPTURE_BS)
        self.max_num_token = self.max_bs
        self.seq_len_fill_value = attn_backend.get_cuda_graph_seq_len_fill_value()
        self.encoder_len_fill_value = 0
        common = dict(
            device="cuda", max_bs=self.max_bs, max_num_token=self.max_num_token, hidden_size=HIDDEN,
            vocab_size=VOCAB, dtype=torch.float32, dp_size=1, pp_size=1, is_encoder_decoder=False,
            require_mlp_tp_gather=False, seq_len_fill_value=self.seq_len_fill_value,
            encoder_len_fill_value=0, num_tokens_per_bs=1, num_tokens_per_req=1,
            cache_loc_dtype=torch.int64, enable_mamba_track=False, ne_token_table=None,
            hc_hidden_size=None, pp_proxy_topk_size=None,
            next_token_logits_buffer=torch.zeros(self.max_num_token, VOCAB, device="cuda"),
        )
        self.buffers = _call_filtered(buffers_mod.DecodeInputBuffers.create, **common)
        self.buffers.share_buffers()
        self.buffer_registry = _call_filtered(
            registry_mod.build_decode_registry, **common, enable_num_token_non_padded=False,
            require_gathered_buffer=False, enable_prefill_cp=False, source=self.buffers,
        )
        self.backend = FullCudaGraphBackend(self)
        self.stream = None


def _model_runner(active_backend, model):
    mr = P.fake_model_runner(model, attn_backend=active_backend, speculative_algorithm=None)
    mr.spec_algorithm = SpeculativeAlgorithm.NONE
    mr.model_config = SimpleNamespace(hidden_size=HIDDEN, vocab_size=VOCAB, dtype=torch.float32,
                                      is_encoder_decoder=False)
    return mr


_SEEDS = iter(range(1, 1 << 30))


def capture_and_replay(adaptive: bool):
    """Capture a decode runner whose backend is capture-local (adaptive) or the model runner's
    own; replay its largest graph on fresh inputs; return what the test asserts on."""
    P.install_single_rank_groups()
    model = ToyDecodeModel()
    active = LayoutSwitchingBackend("model_runner.attn_backend", max(CAPTURE_BS))
    local = LayoutSwitchingBackend("capture-local", max(CAPTURE_BS)) if adaptive else active
    runner = HookTestRunner(_model_runner(active, model), local)
    # share_buffers() aliases these static buffers across runners of the process: start every
    # capture from zeros, so the warmup-time metadata (row 0) differs from any replay's.
    runner.buffers.input_ids.zero_()
    runner.buffers.out_cache_loc.zero_()
    P.capture(runner)

    bs = max(CAPTURE_BS)
    g = torch.Generator(device="cuda").manual_seed(next(_SEEDS))
    input_ids = torch.randint(0, VOCAB, (bs,), generator=g, device="cuda")
    loc = torch.randint(1, KV_ROWS, (bs,), generator=g, device="cuda")  # capture used row 0
    runner.buffers.input_ids[:bs].copy_(input_ids)
    runner.buffers.out_cache_loc[:bs].copy_(loc)
    local.init_forward_metadata_out_graph(
        SimpleNamespace(out_cache_loc=runner.buffers.out_cache_loc[:bs], batch_size=bs), in_capture=False)
    (key,) = [k for k in runner.backend._graphs if k.size == bs]
    with runner.backend.replay_session():
        out = runner.backend.replay(key, None)[:bs].clone()
    torch.cuda.synchronize()
    ref = model.eager(input_ids, loc)
    return SimpleNamespace(
        max_err=(out - ref).abs().max().item(), scale=ref.abs().max().item(),
        active_hooks=active.hook_calls, local_hooks=local.hook_calls,
        captured_layouts=local.captured_layouts, graphs=len(runner.backend._graphs),
    )


def _state():
    rows = {r.id: r for r in graphfix.status("sglang")}
    return rows.get(PATCH_ID)


@pytest.fixture
def unpatched():
    graphfix.remove()
    yield
    graphfix.remove()


@pytest.fixture
def patched():
    graphfix.remove()
    graphfix.apply("sglang", only=[PATCH_ID])
    row = _state()
    if row is None:
        pytest.skip(f"graphfix has no {PATCH_ID} patch in this checkout")
    if row.state != "applied":
        pytest.skip(f"{PATCH_ID} is {row.state}: {row.reason}")
    yield row
    graphfix.remove()


def test_control_runner_on_the_active_backend_replays_correctly(unpatched):
    """Non-adaptive runner (its backend *is* model_runner.attn_backend): correct even unpatched,
    so a mismatch below is the hook's doing, not the harness's."""
    r = capture_and_replay(adaptive=False)
    assert r.graphs == len(CAPTURE_BS)
    assert r.captured_layouts == ["raw"] * len(CAPTURE_BS)
    assert r.max_err <= 1e-3 * max(1.0, r.scale), vars(r)


def test_unpatched_adaptive_runner_replays_frozen_metadata(unpatched):
    if P.sglang_version() not in AFFECTED:
        pytest.skip(f"sglang {P.sglang_version()} is not an affected release")
    r = capture_and_replay(adaptive=True)
    assert r.local_hooks == 0 and r.active_hooks == 2 * len(CAPTURE_BS), vars(r)
    assert r.captured_layouts == ["post_warmup"] * len(CAPTURE_BS), vars(r)
    assert r.max_err > 1e-2 * r.scale, vars(r)  # the graph gathered the warmup-time rows


def test_patched_adaptive_runner_replays_like_eager(patched):
    r = capture_and_replay(adaptive=True)
    assert r.local_hooks == 2 * len(CAPTURE_BS) and r.active_hooks == 0, vars(r)
    assert r.captured_layouts == ["raw"] * len(CAPTURE_BS), vars(r)
    assert r.max_err <= 1e-3 * max(1.0, r.scale), vars(r)
