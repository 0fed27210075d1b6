"""graphfix code that runs *inside* the engine's call (lazy mappings, proxies) is as fail-safe as a
guarded wrapper: its own failure gives the shipped value (``Patch.fall_back``), the engine's own
exceptions pass through (issue 8, "fail safe at call time")."""

import enum
import sys
import types
from typing import NamedTuple

import pytest

from sglang_graphfix import warmup_hook
from vllm_graphfix import eagle_prefill_metadata as epm
from vllm_graphfix import spec_prefill_metadata as spm


def test_fall_back_from_inside_the_engine_call_is_one_warning_and_shipped_from_then_on(engine, caplog):
    eng = engine(source="class Runner:\n    def size(self, n):\n        return [n * 2]\n")
    shipped_calls = []

    class Lazy(list):  # graphfix's object, handed to the engine, read later inside the engine's work
        def first(self):
            try:
                raise LookupError("graphfix's own read failed")
            except LookupError as exc:
                patch.fall_back(exc)
                return self[0]

    def returns_lazy(wrapped, instance, args, kwargs):
        shipped_calls.append(args)
        return Lazy(wrapped(*args, **kwargs))

    patch = eng.patch(wrapper=returns_lazy)
    mod = eng.imported()
    eng.registry.apply(eng.dist)
    with caplog.at_level("WARNING", logger="graphfix"):
        assert mod.Runner().size(3).first() == 6
        assert type(mod.Runner().size(4)) is list  # the patch now runs as shipped: the wrapper is bypassed
    assert shipped_calls == [(3,)]
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and patch.id in warnings[0].getMessage()
    row = eng.state()
    assert row.state == "failed" and "graphfix's own read failed" in row.reason


class Mode(enum.Enum):
    FULL = 1
    PIECEWISE = 2


class Desc(NamedTuple):  # hashable, like vLLM's descriptors
    num_reqs: int | None
    num_tokens: int
    cg_mode: Mode


@pytest.fixture
def managers(monkeypatch):
    """A stand-in for the vLLM capture-manager module: records prepare_inputs_to_capture calls."""
    calls = []

    def prepare_inputs_to_capture(num_reqs, num_tokens, model_state, input_buffers, block_tables, attn_groups,
                                  kv_cache_config, skip_attn):
        if num_tokens < 0:
            raise RuntimeError("engine says no")
        calls.append((num_reqs, num_tokens, input_buffers, skip_attn))
        return ("meta", object())

    mod = types.SimpleNamespace(prepare_inputs_to_capture=prepare_inputs_to_capture, CUDAGraphMode=Mode)
    for name in (spm.MANAGERS, epm.MANAGERS):
        monkeypatch.setitem(sys.modules, name, mod)
    fell = []
    for patch in (spm.PATCH, epm.PATCH):
        monkeypatch.setattr(patch, "fall_back", lambda exc, fell=fell: fell.append(exc))
    return calls, fell


def _parts(drifted=False):
    manager = types.SimpleNamespace(max_num_reqs=8)
    spec = types.SimpleNamespace(block_tables="bt", kv_cache_config="kv", input_buffers="draft-buffers",
                                 attn_groups="draft-groups")
    if not drifted:
        spec.model_state = "ms"
    runner = types.SimpleNamespace(input_buffers="target-buffers", attn_groups="target-groups")
    return manager, spec, runner


def test_spec_prefill_states_are_fresh_through_the_target_buffers(managers):
    calls, fell = managers
    desc = Desc(None, 4, Mode.FULL)
    states = spm._FreshStates({}, *_parts())
    states[desc].warmup, states[desc].captured
    assert calls == [(4, 4, "target-buffers", False)] * 2 and fell == []


def test_spec_prefill_falls_back_to_the_shipped_state_when_graphfix_cannot_read_its_inputs(managers):
    calls, fell = managers
    desc = Desc(2, 4, Mode.FULL)
    shipped = {desc: types.SimpleNamespace(warmup="shipped-warmup", captured="shipped-captured")}
    states = spm._FreshStates(shipped, *_parts(drifted=True))
    assert states[desc].warmup == "shipped-warmup" and states[desc].captured == "shipped-captured"
    assert calls == [] and len(fell) == 2 and all(isinstance(e, AttributeError) for e in fell)


def test_spec_prefill_passes_the_engines_own_error_through(managers):
    calls, fell = managers
    desc = Desc(2, -1, Mode.FULL)
    with pytest.raises(RuntimeError, match="engine says no"):
        spm._FreshStates({}, *_parts())[desc].warmup
    assert fell == []


def test_eagle_prefill_falls_back_to_the_shipped_state(managers):
    calls, fell = managers
    desc = Desc(2, 4, Mode.FULL)
    fresh = epm._Fresh({desc: "shipped-state"}, *_parts(drifted=True))
    assert fresh[desc] == "shipped-state" and calls == [] and len(fell) == 1
    ok = epm._Fresh({desc: "shipped-state"}, *_parts())
    assert ok[desc][0] == "meta" and calls == [(2, 4, "target-buffers", False)]


def test_warmup_hook_keeps_the_shipped_hook_when_reading_the_backends_hook_fails(monkeypatch):
    fell = []
    monkeypatch.setattr(warmup_hook.PATCH, "fall_back", fell.append)

    class Backend:
        @property
        def on_after_cuda_graph_warmup(self):
            raise RuntimeError("graphfix cannot read it")

    capture = warmup_hook._Capture(runner=None)
    assert capture.hook("shipped-hook") == "shipped-hook" and fell == []  # before capture_prepare: shipped
    capture.backend, capture.prepared = Backend(), True
    assert capture.hook("shipped-hook") == "shipped-hook" and len(fell) == 1
    capture.backend = types.SimpleNamespace(on_after_cuda_graph_warmup="local-hook")
    assert capture.hook("shipped-hook") == "local-hook"
