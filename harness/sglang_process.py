"""Just enough of an SGLang process around the *real* graph runners and backends to capture toy
models on one GPU, shared by ``benchmarks/graph_memory.py`` and ``tests/gpu/`` (not shipped).

What is real (imported from the installed SGLang release): ``DecodeCudaGraphRunner.capture`` /
``PrefillCudaGraphRunner.capture`` and their ``_capture_one_stream`` loops, the module-level
``graph_capture()`` of ``sglang.srt.distributed.parallel_state`` together with
``GroupCoordinator.graph_capture`` (which creates the capture stream when none is passed),
``FullCudaGraphBackend`` / ``BreakableCudaGraphBackend`` (pool acquisition, warmups, capture,
replay) and ``runner_utils.pool``. For the warmup-hook test also ``capture_one_shape`` /
``capture_prepare`` with the release's own input buffers and buffer registry.

What is a stand-in: the model runner (a namespace with the attributes these methods read), the
tensor/pipeline-parallel group (a ``GroupCoordinator`` of world size 1 with no communicators,
built by ``sglang_graphfix/scenarios/single_rank.py``), the model (a toy bf16 MLP), and SGLang's compiled
dependencies where they are not installed (:func:`install_standins`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
from types import SimpleNamespace

from harness import standins
from sglang_graphfix.scenarios.single_rank import GROUPS as PARALLEL_GROUPS  # noqa: F401 - re-exported
from sglang_graphfix.scenarios.single_rank import set_parallel_groups, single_rank_group  # noqa: F401 - one builder

SGLANG_PATCH_IDS = ("sglang.graph_pool", "sglang.capture_stream", "sglang.warmup_hook", "sglang.logits_rows")

RUNNER = "sglang.srt.model_executor.runner"
BACKEND = "sglang.srt.model_executor.runner_backend"
PARALLEL_STATE = "sglang.srt.distributed.parallel_state"
STANDIN_ROOTS = ("sgl_kernel", "xgrammar")  # SGLang's compiled dependencies imported at module level


def import_available_patches(names=("graph_pool", "capture_stream", "warmup_hook")) -> dict:
    """Register the SGLang patch modules present in this checkout, also those not yet listed in
    ``sglang_graphfix.PATCH_MODULES`` (``graphfix.apply("sglang")`` then decides about them as about
    any other). Returns ``{name: "listed" | "file-only" | "absent" | "error: ..."}``."""
    import sglang_graphfix

    found = {}
    for name in names:
        if name in sglang_graphfix.PATCH_MODULES:
            found[name] = "listed"
            continue
        if importlib.util.find_spec(f"sglang_graphfix.{name}") is None:
            found[name] = "absent"
            continue
        try:
            importlib.import_module(f"sglang_graphfix.{name}")
            found[name] = "file-only"
        except Exception as exc:  # noqa: BLE001 - a broken patch module must not stop the benchmark
            found[name] = f"error: {type(exc).__name__}: {exc}"
    return found


def set_patch_flags(enabled, known=SGLANG_PATCH_IDS) -> dict:
    """``GRAPHFIX_<ID>=on`` for the patch ids in ``enabled`` (short or full ids), ``off`` for the rest."""
    from graphfix import flag_name

    want = {p if "." in p else f"sglang.{p}" for p in enabled}
    flags = {}
    for pid in sorted(set(known) | want):
        flags[flag_name(pid)] = "on" if pid in want else "off"
    os.environ.update(flags)
    os.environ.pop("GRAPHFIX", None)
    return flags


def graphfix_rows(engine="sglang") -> list[dict]:
    import graphfix

    return [{"id": r.id, "state": r.state, "reason": r.reason, "flag": f"{r.flag}={r.flag_value}"}
            for r in graphfix.status(engine)]


def sglang_version():
    try:
        return importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return None


def install_standins(force=False) -> dict:
    """Call before anything imports sglang. On a CUDA machine ``sglang.srt.utils.is_cuda()`` is true,
    so SGLang imports ``sgl_kernel`` at module level and registers fakes for ``sgl_kernel::*`` ops;
    from 0.5.16 its function-call parser imports ``xgrammar`` at module level too. Where those are
    not installed they become stand-ins whose functions raise if called (the benchmark and the GPU
    tests run their own toy model and call no SGLang kernel or grammar), and registering a fake for
    an op that does not exist is skipped. Nothing here changes SGLang's graph backends, runners or
    allocator. ``force``: stand-ins even where the real package is installed (CPU proof).
    Returns what was done, for the benchmark's JSON."""
    done = standins.install_missing(STANDIN_ROOTS, force=force)
    done["register_fake"] = standins.tolerant_register_fake()
    return done


def install_single_rank_groups():
    """Make ``get_tp_group()`` / ``get_pp_group()`` return one single-rank group on ``cuda:0``."""
    import torch

    group = single_rank_group(torch.device("cuda", 0), torch.cuda)
    set_parallel_groups(group)
    return group


def fake_model_runner(model, attn_backend=None, **server_args):
    """The attributes of ``ModelRunner`` that the capture paths read."""
    args = dict(
        enable_cudagraph_gc=False, enable_torch_compile=False, enable_profile_cuda_graph=False,
        enable_memory_saver=False, debug_cuda_graph=False, enable_lora=False, enable_pdmux=False,
        flashinfer_allreduce_fusion_backend=None, enable_two_batch_overlap=False,
        enable_return_hidden_states=False, tp_size=1, dp_size=1, pp_size=1,
    )
    args.update(server_args)
    return SimpleNamespace(
        device="cuda", gpu_id=0, _kernel_warmed_up=True, model=model,
        tp_group=SimpleNamespace(barrier=lambda *a, **k: None, ca_comm=None),
        server_args=SimpleNamespace(**args), attn_backend=attn_backend,
        canary_manager=None, hisparse_coordinator=None, capture_tail_hooks=[],
        is_draft_worker=False, lora_manager=None,
    )


def bench_runner_classes():
    """Subclasses of the release's runners that keep ``capture()`` / ``_capture_one_stream()``
    (the stream handling under test) and replace only the per-shape batch building with a toy
    forward on preallocated static inputs. Like SGLang's shared logits buffer, the result is copied
    into a static output allocated outside the graph pool, so the pool holds capture scratch."""
    import torch

    decode_mod = importlib.import_module(f"{RUNNER}.decode_cuda_graph_runner")
    prefill_mod = importlib.import_module(f"{RUNNER}.prefill_cuda_graph_runner")
    ShapeKey = importlib.import_module(f"{RUNNER}.shape_key").ShapeKey
    full = importlib.import_module(f"{BACKEND}.full_cuda_graph_backend").FullCudaGraphBackend
    breakable = importlib.import_module(f"{BACKEND}.breakable_cuda_graph_backend").BreakableCudaGraphBackend
    backends = {"full": full, "breakable": breakable}

    def toy_runner(runner, model_runner, static_x, static_out, backend):
        """What both runners get in place of their constructors (after their own attributes)."""
        runner.model_runner = model_runner
        runner.device, runner.device_module = "cuda", torch.cuda
        runner.tp_size = runner.dp_size = runner.pp_size = 1
        runner.static_x, runner.static_out = static_x, static_out
        runner.backend = backends[backend](runner)
        runner.stream = None

    def toy_shape_key(runner, size):
        return ShapeKey(size=size)

    class BenchDecodeRunner(decode_mod.DecodeCudaGraphRunner):
        # DecodeCudaGraphRunner.__init__ is deliberately not run: it builds attention state and
        # input buffers for a real model. capture() below is the release's own.
        def __init__(self, model_runner, static_x, static_out, capture_bs, tokens_per_bs, backend="full"):
            self.enable_torch_compile = self.enable_profile_cuda_graph = self.enable_pdmux = False
            self.capture_bs, self.compile_bs = list(capture_bs), []
            self.num_tokens_per_bs = self.captured_req_width = tokens_per_bs
            self.seq_len_fill_value = 1
            max_bs = max(capture_bs)
            self.buffers = SimpleNamespace(
                seq_lens=torch.ones(max_bs, dtype=torch.int64, device="cuda"),
                seq_lens_cpu=torch.ones(max_bs, dtype=torch.int64),
                reset_index_buffers=lambda: None,
            )
            toy_runner(self, model_runner, static_x, static_out, backend)

        shape_key = toy_shape_key

        def tokens(self, size):
            return size * self.num_tokens_per_bs

        def capture_one_shape(self, size, forward, stream_idx=None, variant_label=None):
            n = self.tokens(size)
            x, out = self.static_x[:n], self.static_out[:n]
            self.backend.capture_one(self.shape_key(size), lambda: out.copy_(forward(x)))

    class BenchPrefillRunner(prefill_mod.PrefillCudaGraphRunner):
        def __init__(self, model_runner, static_x, static_out, capture_num_tokens, backend="breakable"):
            self.capture_num_tokens = sorted(capture_num_tokens)
            toy_runner(self, model_runner, static_x, static_out, backend)

        shape_key = toy_shape_key

        def tokens(self, size):
            return size

        def capture_one_shape(self, size):
            x, out = self.static_x[:size], self.static_out[:size]
            forward = self.model_runner.model.forward
            self.backend.capture_one(self.shape_key(size), lambda: out.copy_(forward(x)))

    return BenchDecodeRunner, BenchPrefillRunner


def capture(runner, capture_mode=True):
    """What the runners' constructors do around ``capture()`` (the decode runner's constructor
    wraps it in ``model_capture_mode()``, the prefill runner's does not)."""
    import contextlib

    mode = importlib.import_module("sglang.srt.model_executor.runner_utils.capture_mode")
    runner.device_module.synchronize()
    runner.model_runner.tp_group.barrier()
    with mode.model_capture_mode() if capture_mode else contextlib.nullcontext():
        runner.capture()

