"""vllm.eagle_prefill_metadata on real releases 0.21.0 and 0.22.1 (PrefillEagleCudaGraphManager, the
predecessor of vllm.spec_prefill_metadata's target): the patched draft-prefill capture log equals what the
fixed release 0.26.0 logs on the same scenario — fresh prepare_inputs_to_capture per warmup and per
capture pass, through the target runner's buffers — and the draft decode capture is untouched. Every
expected value comes from running 0.26.0 at test time."""

import pytest

from tests.conftest import releases
from tests.vllm.conftest import check_left_as_shipped, SPEC_FIXED

PID = "vllm.eagle_prefill_metadata"
pytestmark = pytest.mark.engine
AFFECTED = releases("vllm", ">=0.21.0,<0.23.0")


def events(log, kind):
    return [e for e in log if e["ev"] == kind]


@pytest.fixture(scope="module")
def fixed(observe_in):
    result = observe_in(SPEC_FIXED)["vllm.spec_prefill_metadata"]
    assert result["state"] == "retired", result["reason"]
    return {case: runs["off"] for case, runs in result["cases"].items()}


@pytest.mark.parametrize("version", AFFECTED)
def test_patched_prefill_capture_log_equals_fixed_release(version, observe_in, fixed):
    result = observe_in(version)[PID]
    assert result["state"] == "applied", result["reason"]
    for case, expected in fixed.items():
        before, after = result["cases"][case]["off"], result["cases"][case]["on"]
        assert "error" not in before and "error" not in after, (before, after)
        assert after["prefill"] == expected["prefill"], case  # same preparations, same forwards, in order
        assert after["saved_state_reads"] == expected["saved_state_reads"] == 0, case
        assert before["prefill"] != expected["prefill"], case


@pytest.mark.parametrize("version", AFFECTED)
def test_unpatched_release_shows_the_stale_reuse(version, observe_in, fixed):
    for case, runs in observe_in(version)[PID]["cases"].items():
        prefill = runs["off"]["prefill"]
        assert not events(prefill, "prepare"), case  # nothing prepared for the draft prefill
        fwds = events(prefill, "forward")
        assert len(fwds) == len(events(fixed[case]["prefill"], "forward"))
        assert all(e["metadata"].startswith("target#") for e in fwds), case
        assert runs["off"]["saved_state_reads"] > 0
        if any(not e["skip_attn"] for e in events(fixed[case]["prefill"], "prepare")):
            assert any(e["stale_buffers"] for e in fwds), case  # FULL graphs on overwritten buffers


@pytest.mark.parametrize("version", AFFECTED)
def test_draft_decode_capture_untouched(version, observe_in):
    for case, runs in observe_in(version)[PID]["cases"].items():
        assert runs["off"]["decode"] == runs["on"]["decode"], case
        assert runs["off"]["target_preparations"] == runs["on"]["target_preparations"], case


@pytest.mark.parametrize("version", releases("vllm", ">=0.23.0"))
def test_not_affected_where_the_module_is_gone(version, plugins_in):
    loaded = plugins_in(version)["loader"][PID]
    assert loaded["state"] == "not-affected" and "does not exist" in loaded["reason"], loaded
    # capture_model is vllm.spec_prefill_metadata's on 0.23-0.25 ("other-patch"), never this patch's
    assert set(loaded["targets"].values()) <= {"shipped", "absent", "other-patch"}, loaded


@pytest.mark.parametrize("version", AFFECTED)
def test_vllm_plugin_loader_applies_it(version, plugins_in):
    runs = plugins_in(version)
    assert runs["loader_before_import"][PID] == "pending"
    loaded = runs["loader"][PID]
    assert loaded["state"] == "applied" and set(loaded["targets"].values()) == {"graphfix"}, loaded
    assert runs["loader"]["vllm.spec_prefill_metadata"]["state"] == "not-affected"


@pytest.mark.parametrize("version", AFFECTED)
@pytest.mark.parametrize("run", ["eagle_off", "master_off", "other_plugin"])
def test_left_as_shipped(version, run, plugins_in):
    check_left_as_shipped(plugins_in(version), run, PID)
