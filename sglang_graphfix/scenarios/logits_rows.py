"""Scenario for ``sglang.logits_rows``: rows ``ModelRunner.max_decode_logits_rows`` returns.

Real: ``max_decode_logits_rows``, the release's per-width helper (``decode_num_tokens_per_req`` /
``decode_num_tokens_per_bs``), ``SpeculativeAlgorithm``, ``ServerArgs`` with the speculative settings
published through the runtime context where the release has one (``override_server_args``, 0.5.16+),
and the adaptive config file read by ``resolve_candidate_steps_from_config``.
Stand-ins: the model runner (a bare object with the attributes those methods read) and
``get_batch_sizes_to_capture``, replaced -- as in upstream's own CPU test -- by the alignment filter
"keep the capture batch sizes whose bs x width is divisible by 8".
Each case is called both ways upstream tests do: bound on a ``ModelRunner`` instance, and unbound as
``ModelRunner.max_decode_logits_rows(obj)`` on an object that is not one.
"""

import importlib
import json
import os
import tempfile
import types

from graphfix.scenarios import replaced, scenario

MR = "sglang.srt.model_executor.model_runner"
ALIGN = 8

GEOMETRIES = {
    # upstream's geometry: 72 rows fixed (bs 12 x width 6), 48 before (bs 12 x static width 4)
    "upstream": dict(capture_bs=[4, 8, 12], candidate_steps={"1": [3, 5]}, num_steps=3),
    # candidates out of order and spread over two batch-size slots; the widest (8) needs the most
    "out_of_order": dict(capture_bs=[1, 2, 4, 8, 16, 24], candidate_steps={"8": [7, 1], "1": [3]},
                         num_steps=3),
    # the filter drops bs 20 at the static (widest) width 7, so the narrower width 4 needs the most
    "filter_drops_largest_bs": dict(capture_bs=[8, 20], candidate_steps={"1": [6, 3]}, num_steps=6),
    # seen on the real 0.5.16 engine (H200, docs/benchmarks.md "Real engine"): static width 2 is the
    # narrowest candidate; the engine's own capture list up to bs 48; "holds 96 rows but caller needs 192"
    "engine_static_narrowest": dict(capture_bs=[1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28,
                                                30, 32, 40, 44, 48], candidate_steps={"1": [1, 3, 7]}, num_steps=1),
    # control: no adaptive decoding, nothing to change
    "not_adaptive": dict(capture_bs=[4, 8, 12], candidate_steps={"1": [3, 5]}, num_steps=3,
                         adaptive=False),
}


def _aligned(bs_list, width):
    return [bs for bs in bs_list if bs * width % ALIGN == 0]


def _needed(capture_bs, candidate_steps, num_steps, adaptive):
    """Rows the captured graphs can ask for: every width a runner is captured at (the oracle)."""
    widths = {num_steps + 1}
    if adaptive:
        widths |= {s + 1 for steps in candidate_steps.values() for s in steps}
    return max(max(_aligned(capture_bs, w) or [0]) * w for w in widths)


def _publish(fields):
    """A real ServerArgs carrying ``fields``, published where the release can (returns restore)."""
    from sglang.srt import runtime_context
    from sglang.srt.server_args import ServerArgs

    context = runtime_context.get_context()
    if hasattr(context, "override_server_args"):
        override = context.override_server_args(**fields)
        return override.install(), override.restore
    server_args = ServerArgs(model_path="dummy")  # 0.5.15: no published spec bag to fill
    for name, value in fields.items():
        object.__setattr__(server_args, name, value)
    return server_args, lambda: None


class _NotAModelRunner:
    pass


def _runner(cls, server_args, capture_bs):
    from sglang.srt.model_executor.model_runner import ModelRunner
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    runner = object.__new__(cls)
    runner.server_args, runner.cuda_graph_bs, runner.is_draft_worker = server_args, capture_bs, False
    runner.spec_algorithm = SpeculativeAlgorithm.from_string("EAGLE")
    if hasattr(ModelRunner, "decode_graph_gather_requirements"):  # 0.5.23: no DP gathers here
        runner.decode_graph_gather_requirements = lambda: (False, False)
    if not isinstance(runner, ModelRunner):  # the release's own helpers, borrowed
        for name in ("decode_num_tokens_per_req", "decode_num_tokens_per_bs"):
            if name in vars(ModelRunner):
                setattr(runner, name, types.MethodType(vars(ModelRunner)[name], runner))
    return runner


@scenario(
    "sglang.logits_rows",
    cases=GEOMETRIES,
    controls=("not_adaptive",),
    fixed=lambda obs: "absent" in obs or min(obs["rows"], obs["rows_unbound"]) >= obs["needed"],
    describe=lambda obs: obs.get("absent") or f"buffer {obs['rows']} rows (unbound call "
    f"{obs['rows_unbound']}), graphs need {obs['needed']}",
)
def observe(capture_bs, candidate_steps, num_steps, adaptive=True):
    mr = importlib.import_module(MR)
    if not hasattr(mr.ModelRunner, "max_decode_logits_rows"):
        return {"absent": "no ModelRunner.max_decode_logits_rows in this release (no shared logits buffer)"}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as cfg:
        json.dump({bs: {"candidate_steps": steps} for bs, steps in candidate_steps.items()}, cfg)
    server_args, restore = _publish(dict(
        speculative_algorithm="EAGLE", speculative_num_steps=num_steps, speculative_eagle_topk=1,
        speculative_num_draft_tokens=num_steps + 1, speculative_adaptive=adaptive,
        speculative_adaptive_config=cfg.name,
    ))
    # an engine global, because the method insists: it calls the module's get_batch_sizes_to_capture, which
    # reads the server's capture settings and the GPU; upstream's own CPU test replaces it the same way
    aligned = lambda runner, width, **_: (_aligned(runner.cuda_graph_bs, width), [])  # noqa: E731
    try:
        with replaced(mr, get_batch_sizes_to_capture=aligned):
            bound = _runner(mr.ModelRunner, server_args, capture_bs).max_decode_logits_rows()
            unbound = mr.ModelRunner.max_decode_logits_rows(_runner(_NotAModelRunner, server_args, capture_bs))
    finally:
        restore()
        os.unlink(cfg.name)
    return {"rows": bound, "rows_unbound": unbound,
            "needed": _needed(capture_bs, candidate_steps, num_steps, adaptive)}
