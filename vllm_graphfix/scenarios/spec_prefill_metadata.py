"""Observable for vllm.spec_prefill_metadata: the ordered log of attention-metadata preparations and
draft forwards during the speculator's CUDA-graph capture.

Drives the release's real code on CPU: ``GPUModelRunner.capture_model`` (on a runner built without
``__init__``), the real target ``ModelCudaGraphManager`` capture, the real ``EagleSpeculator``
(``set_attn``, ``init_cudagraph_manager``, ``capture``) and its real prefill/decode managers, the real
``CudaGraphManager.capture`` loop and the real ``prepare_inputs_to_capture`` writing into real
``InputBuffers``. Stand-ins: the model, the model state's ``prepare_attn`` (its metadata keeps views of
the persistent ``query_start_loc``/``seq_lens`` buffers, as FA3's does), block tables, KV-cache config,
the attention backends, the pipeline group and the CUDA graph objects. Every descriptor is pinned, so
all releases capture exactly the same ones. Module globals and torch attributes are swapped only through
``graphfix.scenarios.replaced`` (restored before returning).
"""

import contextlib
import dis
import importlib
import importlib.metadata
import importlib.util
import types

from packaging.specifiers import SpecifierSet

from graphfix.scenarios import replaced, scenario

GPU = "vllm.v1.worker.gpu."
# model-runner-V2 shape the stand-ins below fit: the affected releases and the first fixed one.
# 0.21/0.22 ("legacy") name things differently: PrefillEagleCudaGraphManager in spec_decode.eagle.cudagraph,
# EagleSpeculator.prefill/generate_draft as forward functions, no target buffers in set_attn.
SUPPORTED = SpecifierSet(">=0.21.0,<0.27.0")
MAX_REQS = 4
# (cg_mode, num_tokens, num_reqs, uniform_token_count): PIECEWISE never pads requests; FULL with
# request padding (uniform decode and mixed) and without (num_reqs None); descending per mode.
PIECEWISE = (("PIECEWISE", 24, None, None), ("PIECEWISE", 10, None, None))
FULL = (("FULL", 16, 4, 4), ("FULL", 8, 2, 4), ("FULL", 6, None, None))
CASES = {
    "full_dp1": {"mode": "FULL", "descs": FULL, "dp": 1, "k": 3},
    "piecewise_dp1": {"mode": "PIECEWISE", "descs": PIECEWISE, "dp": 1, "k": 1},
    "mixed_dp2": {"mode": "FULL_AND_PIECEWISE", "descs": PIECEWISE + FULL, "dp": 2, "k": 3},
}


class _Log:
    def __init__(self, names):
        self.names, self.events, self.phase, self.counts = names, [], "none", {}
        self.made, self.keep, self.reads, self.in_graph = {}, [], 0, False

    def name(self, obj):
        return self.names.get(id(obj), "other")

    def tqdm(self, it, desc="", **_):
        kind = "prefill" if "prefill" in desc else "decode" if "decode" in desc else "target"
        self.phase = kind
        return it

    def prepared(self, real):
        def prepare(num_reqs, num_tokens, model_state, input_buffers, block_tables, attn_groups,
                    kv_cache_config, skip_attn=False):
            state = real(num_reqs, num_tokens, model_state, input_buffers, block_tables, attn_groups,
                         kv_cache_config, skip_attn=skip_attn)
            n = self.counts.get(self.phase, 0)
            self.counts[self.phase] = n + 1
            label = f"{self.phase}#{n}"
            self.made[id(state[1])] = label
            self.keep.append(state)
            self.events.append({
                "phase": self.phase, "ev": "prepare", "label": label, "num_reqs": num_reqs,
                "num_tokens": num_tokens, "skip_attn": bool(skip_attn),
                "input_buffers": self.name(input_buffers), "attn_groups": self.name(attn_groups),
                "block_tables": self.name(block_tables), "kv_cache_config": self.name(kv_cache_config),
                "model_state": self.name(model_state)})
            return state

        return prepare

    def forward(self, fn, num_reqs, num_tokens, attn_metadata, slot_mappings, across_dp, cg_mode):
        label = self.made.get(id(slot_mappings), "unknown")
        last = [e["label"] for e in self.events if e["ev"] == "prepare" and e["phase"] == self.phase]
        stale = None
        if attn_metadata is not None:
            stale = any(m.snapshot != m.current() for m in attn_metadata.values())
        self.events.append({
            "phase": self.phase, "ev": "forward", "fn": fn, "num_reqs": num_reqs,
            "num_tokens": num_tokens, "mode": cg_mode.name, "in_graph": self.in_graph,
            "dp": None if across_dp is None else across_dp.tolist(), "metadata": label,
            "prepared_just_before": bool(last) and last[-1] == label, "stale_buffers": stale})


class _Meta:
    """What a builder returns for capture: views of the persistent buffers it was built from."""

    def __init__(self, input_batch):
        self.views = (input_batch.query_start_loc, input_batch.seq_lens)
        self.snapshot = self.current()

    def current(self):
        return [v.tolist() for v in self.views]


class _Tracked(dict):
    def __init__(self, data, log):
        super().__init__(data)
        self.log = log

    def __getitem__(self, key):
        self.log.reads += 1
        return super().__getitem__(key)


def _fakes(stack, log, base, ar, spec_mod, torch, draft_groups, legacy):
    class Graph:
        def __init__(self, *a, **k):
            pass

    @contextlib.contextmanager
    def graph(*a, **k):
        log.in_graph = True
        try:
            yield
        finally:
            log.in_graph = False

    # engine and torch globals, because the release's capture code insists: it calls torch.cuda.graph /
    # CUDAGraph / mem_get_info and its modules' own helpers directly, with no device or group argument
    swaps = [
        (base, "get_pp_group", lambda: types.SimpleNamespace(is_first_rank=True, is_last_rank=True)),
        (base, "current_platform", types.SimpleNamespace(get_global_graph_pool=lambda: "pool")),
        (base, "graph_capture", lambda **k: contextlib.nullcontext()),
        (base, "is_global_first_rank", lambda: True),
        (base, "tqdm", log.tqdm),
        (base, "set_forward_context", lambda *a, **k: contextlib.nullcontext()),
        (base, "prepare_inputs_to_capture", log.prepared(base.prepare_inputs_to_capture)),
        (ar, "prepare_inputs_to_capture", log.prepared(base.prepare_inputs_to_capture)),
        (torch.cuda, "CUDAGraph", Graph), (torch.cuda, "graph", graph),
        (torch.cuda, "mem_get_info", lambda *a: (0, 0)),
        (torch.accelerator, "empty_cache", lambda: None),
        (torch.accelerator, "get_memory_info", lambda *a: (0, 0)),
        (spec_mod, "init_attn_backend", _attn_backend_stub(spec_mod, draft_groups, legacy)),
    ]
    if legacy:  # the Eagle managers of 0.21/0.22 make a dedicated graph pool
        swaps.append((torch.cuda, "graph_pool_handle", lambda: "eagle-pool"))
    for obj, name, value in swaps:
        stack.enter_context(replaced(obj, **{name: value}))


def _attn_backend_stub(spec_mod, draft_groups, legacy):
    if not legacy:
        return lambda *a, **k: (draft_groups, None, None)
    # legacy set_attn unpacks ``_, self.attn_groups, _[, _] = init_attn_backend(...)`` (3 in 0.21, 4 in 0.22)
    width = next(i.arg for i in dis.get_instructions(spec_mod.EagleSpeculator.set_attn)
                 if i.opname == "UNPACK_SEQUENCE")
    return lambda *a, **k: (None, draft_groups) + (None,) * (width - 2)


def _build(stack, log, mode_name, descs, dp, k):
    import torch

    from vllm.config import CompilationConfig
    from vllm.config.compilation import CUDAGraphMode

    base = importlib.import_module(GPU + "cudagraph_utils")
    mr = importlib.import_module(GPU + "model_runner")
    eagle = importlib.import_module(GPU + "spec_decode.eagle.speculator")
    legacy = importlib.util.find_spec(GPU + "spec_decode.autoregressive") is None
    spec_mod = eagle if legacy else importlib.import_module(GPU + "spec_decode.speculator")
    ib = importlib.import_module(GPU + "input_batch")
    ar = importlib.import_module(GPU + ("spec_decode.eagle.cudagraph" if legacy else
                                        "spec_decode.autoregressive.cudagraph_utils"))
    mode = CUDAGraphMode[mode_name]
    sizes = sorted({d[1] for d in descs})
    spec_cfg = types.SimpleNamespace(num_speculative_tokens=k,
                                     uses_dynamic_speculative_decoding=lambda: False)
    legacy_mode = {"cudagraph_mode": mode} if legacy else {}  # 0.21/0.22 managers read it from the config
    cfg = types.SimpleNamespace(
        scheduler_config=types.SimpleNamespace(max_num_seqs=MAX_REQS, max_num_batched_tokens=64),
        compilation_config=CompilationConfig(cudagraph_capture_sizes=sizes,
                                             max_cudagraph_capture_size=sizes[-1], **legacy_mode),
        parallel_config=types.SimpleNamespace(data_parallel_size=dp, tensor_parallel_size=1,
                                              data_parallel_rank=0),
        speculative_config=spec_cfg, num_speculative_tokens=k, lora_config=None)
    cpu = torch.device("cpu")
    target_buffers = ib.InputBuffers(max_num_reqs=MAX_REQS, max_num_tokens=64, device=cpu)
    draft_buffers = ib.InputBuffers(max_num_reqs=MAX_REQS, max_num_tokens=64, device=cpu)
    target_groups, draft_groups = [[object()]], [[object()]]
    _fakes(stack, log, base, ar, spec_mod, torch, draft_groups, legacy)
    model_state = types.SimpleNamespace(
        prepare_dummy_inputs=lambda num_reqs, num_tokens: {},
        prepare_attn=lambda input_batch, *a, **k: {"model.layers.0.attn": _Meta(input_batch)})
    block_tables = types.SimpleNamespace(
        cp_size=1,
        get_dummy_block_tables=lambda n: (torch.zeros(n, 4, dtype=torch.int32),),
        get_dummy_slot_mappings=lambda n: torch.zeros(1, n, dtype=torch.int64))
    kv_cache_config = types.SimpleNamespace(
        kv_cache_groups=[types.SimpleNamespace(layer_names=["model.layers.0.attn"])])
    log.names.update({id(target_buffers): "target", id(draft_buffers): "draft",
                      id(target_groups): "target", id(draft_groups): "draft",
                      id(block_tables): "runner", id(kv_cache_config): "runner",
                      id(model_state): "runner"})

    def pinned(manager):
        wanted = [base.BatchExecutionDescriptor(cg_mode=CUDAGraphMode[m], num_tokens=t, num_reqs=r,
                                                uniform_token_count=u) for m, t, r, u in descs]
        manager._capture_descs = {m: [d for d in wanted if d.cg_mode == m]
                                  for m in (CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL)
                                  if any(d.cg_mode == m for d in wanted)}
        return manager

    class Target(base.ModelCudaGraphManager):
        def capture(self, *a, **kw):
            saved = super().capture(*a, **kw)
            return None if saved is None else _Tracked(saved, log)

    def prefill(self, num_reqs, num_tokens, attn_metadata, slot_mappings,
                num_tokens_across_dp=None, cudagraph_runtime_mode=None, **_):
        log.forward("prefill", num_reqs, num_tokens, attn_metadata, slot_mappings,
                    num_tokens_across_dp, cudagraph_runtime_mode)

    def generate_draft(self, num_reqs, num_tokens, attn_metadata, slot_mappings,
                       num_tokens_across_dp=None, cudagraph_runtime_mode=None, **_):
        log.forward("decode", num_reqs, num_tokens, attn_metadata, slot_mappings,
                    num_tokens_across_dp, cudagraph_runtime_mode)

    prefix = "" if legacy else "_"  # the forward functions the managers capture
    Speculator = type("Speculator", (eagle.EagleSpeculator,),
                      {prefix + "prefill": prefill, prefix + "generate_draft": generate_draft})

    spec = object.__new__(Speculator)
    spec.__dict__.update(vllm_config=cfg, device=cpu, num_speculative_steps=k, dp_size=dp,
                         input_buffers=draft_buffers, draft_attn_layer_names=set(),
                         last_token_indices=torch.zeros(MAX_REQS, dtype=torch.int64), model=None)
    set_attn_args = (model_state, kv_cache_config, block_tables)
    if not legacy and "target_input_buffers" in spec_mod.DraftModelSpeculator.set_attn.__code__.co_varnames:
        set_attn_args += (target_buffers, target_groups)
    spec.set_attn(*set_attn_args)
    spec.init_cudagraph_manager(mode)
    pinned(spec.prefill_cudagraph_manager)
    if spec.decode_cudagraph_manager.cudagraph_mode.has_full_cudagraphs():  # FULL_DECODE_ONLY
        spec.decode_cudagraph_manager._capture_descs = {CUDAGraphMode.FULL: [
            base.BatchExecutionDescriptor(cg_mode=CUDAGraphMode.FULL, num_tokens=n, num_reqs=n,
                                          uniform_token_count=1) for n in (MAX_REQS, 2)]}
    runner = object.__new__(mr.GPUModelRunner)
    runner.__dict__.update(
        cudagraph_manager=pinned(Target(cfg, cpu, mode, k + 1)),
        model=lambda input_ids, positions, **kw: torch.zeros(len(input_ids), 8),
        model_state=model_state, input_buffers=target_buffers, intermediate_tensors=None,
        block_tables=block_tables, attn_groups=target_groups, kv_cache_config=kv_cache_config,
        lora_config=None, use_aux_hidden_state_outputs=False, speculator=spec)
    return runner


def _describe(o):
    if "skipped" in o:
        return o["skipped"]
    fwd = [e for e in o["prefill"] if e["ev"] == "forward"]
    prep = [e for e in o["prefill"] if e["ev"] == "prepare"]
    fresh = sum(e["prepared_just_before"] for e in fwd)
    stale = sum(bool(e["stale_buffers"]) for e in fwd)
    target = sum((e["input_buffers"], e["attn_groups"]) == ("target", "target") for e in prep)
    return (f"draft prefill: {len(prep)} preparations ({target} through the target's buffers), {fresh}/{len(fwd)} "
            f"forwards on metadata prepared just before, {stale} on overwritten buffers; target saved states "
            f"read {o['saved_state_reads']}x")


def _fixed(o):
    if "skipped" in o:
        return None
    fwd = [e for e in o["prefill"] if e["ev"] == "forward"]
    prep = [e for e in o["prefill"] if e["ev"] == "prepare"]
    return (o["saved_state_reads"] == 0 and bool(fwd)
            and all(e["prepared_just_before"] and not e["stale_buffers"] for e in fwd)
            # through the target runner's buffers and groups: the addresses the runtime refreshes
            and all((e["input_buffers"], e["attn_groups"]) == ("target", "target") for e in prep))


def observe(mode, descs, dp, k):
    version = importlib.metadata.version("vllm")
    if not SUPPORTED.contains(version, prereleases=True):
        return {"skipped": f"not observable on vllm {version}: the scenario drives the {SUPPORTED} runner"}
    log = _Log({})
    with contextlib.ExitStack() as stack:
        runner = _build(stack, log, mode, descs, dp, k)
        runner.capture_model()
    return {
        "breakable_cg": bool(getattr(runner.speculator.prefill_cudagraph_manager, "use_breakable_cg", False)),
        "prefill": [e for e in log.events if e["phase"] == "prefill"],
        "decode": [e for e in log.events if e["phase"] == "decode"],
        "target_preparations": sum(1 for e in log.events if e["phase"] == "target" and e["ev"] == "prepare"),
        "saved_state_reads": log.reads,
    }


scenario("vllm.spec_prefill_metadata", cases=CASES, fixed=_fixed, describe=_describe)(observe)
scenario("vllm.eagle_prefill_metadata", cases=CASES, fixed=_fixed, describe=_describe)(observe)
