"""Observable for sglang.graph_pool: which graph pool each backend acquires, and how many are created.

Drives the real backends' pool acquisition (Full and Breakable ``capture_session``, TcPiecewise
``_run_compile_pass``) on CPU with a counting device module, stopping each at ``set_graph_pool_id``,
the call every release makes right after acquiring the pool.
"""

import importlib
import sys
import types

from graphfix.scenarios import replaced, scenario

PKG = "sglang.srt.model_executor."
# (role, backend module, class) in the order a scheduler process builds them
ORDER = (
    ("decode_full", "full_cuda_graph_backend", "FullCudaGraphBackend"),
    ("prefill_breakable", "breakable_cuda_graph_backend", "BreakableCudaGraphBackend"),
    ("prefill_tc_piecewise", "tc_piecewise_cuda_graph_backend", "TcPiecewiseCudaGraphBackend"),
    ("draft_full", "full_cuda_graph_backend", "FullCudaGraphBackend"),
)


class _Acquired(Exception):
    pass


def _acquire(module, cls, device):
    backend = cls.__new__(cls)
    backend._pool, backend._device_module = None, device
    backend._compile_config = types.SimpleNamespace(compiler="eager")
    backend._language_model = types.SimpleNamespace(model=sys.modules["torch"].nn.Module())
    runner = types.SimpleNamespace(capture_num_tokens=[8], _run_dummy_forward=lambda **kw: None,
                                   device_module=device)
    seen = []

    def stop(pool):
        seen.append(pool)
        raise _Acquired

    # an engine global, because the backends insist: they call set_graph_pool_id right after acquiring the
    # pool and then compile or capture on a GPU; it is the one place to stop them on CPU
    try:
        with replaced(module, set_graph_pool_id=stop):
            if cls.__name__.startswith("TcPiecewise"):
                cls._run_compile_pass(backend, runner)
            else:
                with cls.capture_session(backend, None):
                    pass
    except _Acquired:
        pass
    return seen[0] if seen else None


@scenario(
    "sglang.graph_pool",
    fixed=lambda o: o["graph_pool_handle_calls"] == 1 and set(o["pools"].values()) == {o["getter"]},
    describe=lambda o: f"{o['graph_pool_handle_calls']} pool(s) created; backends -> {o['pools']}, getter -> {o['getter']}",
)
def observe():
    pool_mod = importlib.import_module(PKG + "runner_utils.pool")
    pool_mod.set_global_graph_memory_pool(None)
    created = []

    def graph_pool_handle():
        created.append(object())
        return created[-1]

    device = types.SimpleNamespace(graph_pool_handle=graph_pool_handle)
    pools = {}
    for role, mod_name, cls_name in ORDER:
        module = importlib.import_module(PKG + "runner_backend." + mod_name)
        pools[role] = _acquire(module, getattr(module, cls_name), device)
    getter = pool_mod.get_global_graph_memory_pool()
    pool_mod.set_global_graph_memory_pool(None)
    name = {id(p): f"pool{i}" for i, p in enumerate(created)}
    return {
        "graph_pool_handle_calls": len(created),
        "pools": {role: name.get(id(p), "none") for role, p in pools.items()},
        "getter": name.get(id(getter), "none"),
    }
