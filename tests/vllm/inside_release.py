"""Runs INSIDE one real vLLM release (through the harness), in one process, so the suite pays one vLLM
import per release. Prints one JSON line: {"plugins": ..., "observe": ..., "dispatch": ...}.

1. plugins: vLLM's own ``load_general_plugins()`` first in a pristine process (patches pending, then
   applied when the targets are imported, as in a real worker), then again (``plugins_loaded`` reset,
   ``graphfix.remove()`` between runs) with each graphfix flag ``off``, with ``GRAPHFIX=0``, with
   ``VLLM_PLUGINS`` naming another plugin, and with ``VLLM_PLUGINS=graphfix``. After each: every patch's
   state and what sits at each target ("graphfix", "shipped": the very object the release shipped).
2. observe: ``graphfix.scenarios.observe("vllm")`` (every scenario off, then on) — what
   ``python -m graphfix.observe vllm`` prints.
3. dispatch (``--dispatch``): with the release's real ``CudagraphDispatcher``, after the spec-decode size
   adjustment the V1 runner applies, which uniform-decode batches dispatch to FULL graphs with the
   shipped default sizes and with the patched ones.

4. opt-in: ``vllm.uniform_decode_sizes``'s scenario again with its flag ``on``.
5. family100: default sizes over the grid with the platform reporting capability family 100 (ceiling
   1024), shipped and with vllm.uniform_decode_sizes on.
6. unsafe build (``--unsafe-build``): steps 1, 2 (vllm.cudagraph_sizes only) and 5 again after
   ``unsafe_build.install()`` rebuilt the never-released PR-50488 build from this release's source.

7. mutants (``--mutants=NAME,...``): ``graphfix verify --json`` with the real patches, then with each
   wrong wrapper of ``tests/vllm/mutants.py`` (exit status and rows).

usage: python tests/vllm/inside_release.py [--dispatch] [--unsafe-build] [--mutants=NAME,...]
"""

import importlib
import json
import os
import sys


FLAGS = ("GRAPHFIX", "GRAPHFIX_VLLM_CUDAGRAPH_SIZES", "GRAPHFIX_VLLM_SPEC_PREFILL_METADATA", "VLLM_PLUGINS",
         "GRAPHFIX_VLLM_UNIFORM_DECODE_SIZES", "GRAPHFIX_VLLM_EAGLE_PREFILL_METADATA",
         "VLLM_USE_BREAKABLE_CUDAGRAPH")  # parity is defined with breakable CUDA graphs off
for name in FLAGS:
    os.environ.pop(name, None)
import vllm.plugins  # noqa: E402


def targets():
    from graphfix.patch import lookup, wrapped_by
    from graphfix.registry import REGISTRY

    for patch in REGISTRY.load("vllm"):
        for t in patch.targets:
            obj = lookup(t.module, t.qualname) if t.module in sys.modules else None
            ours = wrapped_by(obj, patch.id)
            yield patch.id, f"{t.module}:{t.qualname}", obj, ours


def unwrapped(obj):
    from graphfix.patch import MARK

    while getattr(obj, MARK, None):
        obj = obj.__wrapped__
    return obj


def snapshot(shipped):
    import graphfix

    out = {row.id: {"state": row.state, "reason": row.reason, "targets": {}} for row in graphfix.status("vllm")}
    for pid, key, obj, ours in targets():
        kind = ("absent" if obj is None else "graphfix" if ours else "shipped" if obj is shipped.get(key)
                else "other-patch" if unwrapped(obj) is shipped.get(key) else "other")
        out[pid]["targets"][key] = kind
    return out


def import_targets():
    from graphfix.registry import REGISTRY

    for patch in REGISTRY.load("vllm"):
        for module in patch.modules:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                sys.stderr.write(f"cannot import {module}: {exc}\n")


CALLS = []


def load(env):
    """vLLM's loader with ``env``; returns how often it called graphfix's entry point."""
    import vllm_graphfix

    for name in FLAGS:
        os.environ.pop(name, None)
    os.environ.update(env)
    register = vllm_graphfix.register
    vllm_graphfix.register = lambda: (CALLS.append(1), register())  # what entry_points().load() returns
    try:
        before = len(CALLS)
        vllm.plugins.plugins_loaded = False
        vllm.plugins.load_general_plugins()
        return len(CALLS) - before
    finally:
        vllm_graphfix.register = register


def plugin_runs():
    import graphfix

    runs = {}
    calls = load({})
    runs["loader_before_import"] = {pid: s["state"] for pid, s in snapshot({}).items()}
    runs["loader_before_import"]["register_calls"] = calls
    import_targets()
    # what graphfix's wrappers (one or several patches on a target) wrap is what the release shipped
    shipped = {key: unwrapped(obj) for _, key, obj, _ in targets() if obj is not None}
    runs["loader"] = snapshot(shipped)
    runs["loader"]["register_calls"] = calls
    variants = {
        "sizes_off": {"GRAPHFIX_VLLM_CUDAGRAPH_SIZES": "off"},
        "uniform_on": {"GRAPHFIX_VLLM_UNIFORM_DECODE_SIZES": "on"},
        "uniform_on_master_off": {"GRAPHFIX_VLLM_UNIFORM_DECODE_SIZES": "on", "GRAPHFIX": "0"},
        "uniform_on_other_plugin": {"GRAPHFIX_VLLM_UNIFORM_DECODE_SIZES": "on", "VLLM_PLUGINS": "some_other_plugin"},
        "spec_off": {"GRAPHFIX_VLLM_SPEC_PREFILL_METADATA": "off"},
        "eagle_off": {"GRAPHFIX_VLLM_EAGLE_PREFILL_METADATA": "off"},
        "master_off": {"GRAPHFIX": "0"},
        "other_plugin": {"VLLM_PLUGINS": "some_other_plugin"},
        "graphfix_named": {"VLLM_PLUGINS": "graphfix"},
    }
    for name, env in variants.items():
        graphfix.remove()
        calls = load(env)
        runs[name] = snapshot(shipped)
        runs[name]["register_calls"] = calls
    graphfix.remove()
    return runs


def dispatch_measurement():
    """Uniform-decode batches that reach a FULL graph, shipped default sizes vs patched ones."""
    from unittest.mock import MagicMock

    import graphfix
    from vllm.config import CompilationConfig, ParallelConfig, SchedulerConfig, VllmConfig
    from vllm.config.compilation import CompilationMode, CUDAGraphMode
    from vllm.v1.attention.backend import AttentionCGSupport
    from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher

    grid = [(s, k, m) for s in (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 33, 48, 64, 100, 128, 256, 300, 512)
            for k in (0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 24) for m in (8192, 2048, 512, 256) if m >= s]

    def config(s, k, m, sizes=None):
        c = MagicMock(spec=VllmConfig)
        c.model_config = MagicMock(enforce_eager=False)
        kw = {} if sizes is None else {"cudagraph_capture_sizes": sizes}
        c.compilation_config = CompilationConfig(mode=CompilationMode.VLLM_COMPILE,
                                                 cudagraph_mode=CUDAGraphMode.FULL_AND_PIECEWISE, **kw)
        c.scheduler_config = SchedulerConfig(max_num_seqs=s, max_num_batched_tokens=m, max_model_len=m,
                                             is_encoder_decoder=False)
        c.parallel_config, c.performance_mode, c.lora_config = ParallelConfig(), "balanced", None
        c.num_speculative_tokens, c.uniform_decode_query_len = k, 1 + k
        c.speculative_config = None
        return c

    def defaults(patched):
        graphfix.remove()
        if patched:
            os.environ["GRAPHFIX_VLLM_UNIFORM_DECODE_SIZES"] = "on"
            graphfix.apply("vllm", only=["vllm.uniform_decode_sizes"])
            os.environ.pop("GRAPHFIX_VLLM_UNIFORM_DECODE_SIZES")
        out = {}
        for s, k, m in grid:
            c = config(s, k, m)
            VllmConfig._set_cudagraph_sizes(c)
            out[(s, k, m)] = list(c.compilation_config.cudagraph_capture_sizes)
        graphfix.remove()
        return out

    def full_batches(s, k, m, sizes):
        c = config(s, k, m, sizes)
        VllmConfig._set_cudagraph_sizes(c)  # user branch: takes the sizes as given
        cc = c.compilation_config
        cc.set_splitting_ops_for_v1("allgather_reducescatter", 1)
        mode = cc.resolve_cudagraph_mode_and_sizes(AttentionCGSupport.UNIFORM_BATCH, "FLASH_ATTN", 1 + k,
                                                   use_v2_model_runner=False, tensor_parallel_size=1,
                                                   max_num_reqs=s)
        d = CudagraphDispatcher(c)
        d.initialize_cudagraph_keys(mode, 1 + k)
        return {r for r in range(1, s + 1) if r * (1 + k) <= m
                and d.dispatch(r * (1 + k), uniform_decode=True)[0] == CUDAGraphMode.FULL}, \
            sum(1 for r in range(1, s + 1) if r * (1 + k) <= m)

    shipped, patched = defaults(False), defaults(True)
    totals = dict(configs=0, uniform_batches=0, full_shipped=0, full_patched=0, lists_differ=0,
                  configs_changed=0, batches_gained=0, batches_lost=0)
    changed = []
    for key in grid:
        a, batches = full_batches(*key, shipped[key])
        b, _ = full_batches(*key, patched[key])
        totals["configs"] += 1
        totals["uniform_batches"] += batches
        totals["full_shipped"] += len(a)
        totals["full_patched"] += len(b)
        totals["lists_differ"] += shipped[key] != patched[key]
        if a != b:
            totals["configs_changed"] += 1
            changed.append({"config": list(key), "gained": sorted(b - a), "lost": sorted(a - b),
                            "added_sizes": sorted(set(patched[key]) - set(shipped[key]))})
        totals["batches_gained"] += len(b - a)
        totals["batches_lost"] += len(a - b)
    return {"totals": totals, "changed": changed}


def family100(patch_id=None):
    """Default sizes over the scenario grid while the platform reports capability family 100, shipped
    (``patch_id`` None) or with ``patch_id`` applied (its flag ``on``)."""
    import graphfix
    import vllm.platforms
    from vllm_graphfix.scenarios.cudagraph_sizes import GRID, _method, _mock

    platform = vllm.platforms.current_platform
    platform.is_device_capability_family = lambda family, device_id=0: family == 100
    graphfix.remove()
    if patch_id:
        os.environ["GRAPHFIX_" + patch_id.upper().replace(".", "_")] = "on"
        graphfix.apply("vllm", only=[patch_id])
    try:
        out = {}
        for s, k, m in GRID:
            config = _mock(s, k, m)
            _method()(config)
            out[f"{s},{k},{m}"] = list(config.compilation_config.cudagraph_capture_sizes)
        return out
    finally:
        del platform.is_device_capability_family
        graphfix.remove()
        for name in FLAGS:
            os.environ.pop(name, None)


def revert_pass(unsafe_build):
    """vllm.cudagraph_sizes on a plain-grid revert of this release's method (flag unset, then ``on``)."""
    import graphfix
    from graphfix.registry import REGISTRY
    from vllm_graphfix.cudagraph_sizes import default_sizes

    graphfix.remove()
    shipped = unsafe_build.install_plain_grid()
    out = {"sizes_128_16": default_sizes(sys.modules["vllm.config.vllm"].VllmConfig._set_cudagraph_sizes, 128, 16)}
    try:
        for mode in ("auto", "on"):
            os.environ["GRAPHFIX_VLLM_CUDAGRAPH_SIZES"] = mode
            graphfix.apply("vllm", only=["vllm.cudagraph_sizes"])
            rec = REGISTRY.record("vllm.cudagraph_sizes")
            out[mode] = {"state": rec.state, "reason": rec.reason, "wrapped": bool(rec.handles)}
            graphfix.remove()
    finally:
        os.environ.pop("GRAPHFIX_VLLM_CUDAGRAPH_SIZES", None)
        unsafe_build.restore(shipped)
    return out


def main():
    import graphfix
    from graphfix.scenarios import observe

    result = {"plugins": plugin_runs()}
    for name in FLAGS:
        os.environ.pop(name, None)
    result["observe"] = observe("vllm")
    os.environ["GRAPHFIX_VLLM_UNIFORM_DECODE_SIZES"] = "on"
    result["opt_in"] = observe("vllm", only=["vllm.uniform_decode_sizes"])
    os.environ.pop("GRAPHFIX_VLLM_UNIFORM_DECODE_SIZES")
    result["family100"] = {"shipped": family100(), "uniform": family100("vllm.uniform_decode_sizes")}
    if "--dispatch" in sys.argv:
        result["dispatch"] = dispatch_measurement()
    wanted = [a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--mutants=")]
    if wanted:
        import mutants  # tests/vllm/mutants.py, beside this script

        result["mutants"] = mutants.run(wanted[0], {"GRAPHFIX_VLLM_UNIFORM_DECODE_SIZES": "on"})
    if "--unsafe-build" in sys.argv:  # same process, second pass: the never-released PR-50488 build
        import unsafe_build  # tests/vllm/unsafe_build.py, beside this script

        graphfix.remove()
        shipped = unsafe_build.install()
        result["unsafe"] = {"plugins": plugin_runs(), "observe": observe("vllm", only=["vllm.cudagraph_sizes"]),
                            "family100": {"shipped": family100(),
                                          "patched": family100("vllm.cudagraph_sizes")}}
        unsafe_build.restore(shipped)
        result["revert"] = revert_pass(unsafe_build)
    print(json.dumps(result, sort_keys=True))


main()
