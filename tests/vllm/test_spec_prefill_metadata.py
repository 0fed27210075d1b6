"""vllm.spec_prefill_metadata on real releases: parity of the draft-prefill capture log with 0.26.0,
loading through vLLM's plugin loader, flags. Every expected value comes from running 0.26.0."""

import pytest

from tests.conftest import releases
from tests.vllm.conftest import check_left_as_shipped, SPEC_AFFECTED, SPEC_FIXED

PID = "vllm.spec_prefill_metadata"
FLAG_OFF = "spec_off"
pytestmark = pytest.mark.engine
AFFECTED = releases("vllm", SPEC_AFFECTED)


def events(log, kind):
    return [e for e in log if e["ev"] == kind]


@pytest.fixture(scope="module")
def fixed(observe_in):
    result = observe_in(SPEC_FIXED)[PID]
    assert result["state"] == "retired", result["reason"]
    return result["cases"]


def test_fixed_release_prepares_fresh_metadata_per_pass(fixed):
    """What 0.26.0 itself does, read from its log: the contract the patch is held to below."""
    for case, runs in fixed.items():
        obs = runs["off"]
        assert "error" not in obs and not obs["breakable_cg"], (case, obs)
        prefill = obs["prefill"]
        preps, fwds = events(prefill, "prepare"), events(prefill, "forward")
        assert preps and obs["saved_state_reads"] == 0
        full = [e for e in preps if not e["skip_attn"]]
        piecewise = [e for e in preps if e["skip_attn"]]
        # one preparation per PIECEWISE descriptor, two per FULL: each FULL descriptor shows up twice
        assert len(full) == 2 * len({(e["num_tokens"], e["num_reqs"]) for e in full})
        assert len(piecewise) == len({(e["num_tokens"], e["num_reqs"]) for e in piecewise})
        for e in preps:  # the runner's own buffers, groups, block tables, KV-cache config, model state
            assert (e["input_buffers"], e["attn_groups"]) == ("target", "target")
            assert (e["block_tables"], e["kv_cache_config"], e["model_state"]) == ("runner",) * 3
        for e in fwds:
            assert e["prepared_just_before"] and e["metadata"].startswith("prefill#")
            assert e["stale_buffers"] in (None, False)


@pytest.mark.parametrize("version", AFFECTED)
def test_patched_capture_log_equals_fixed_release(version, observe_in, fixed):
    result = observe_in(version)[PID]
    assert result["state"] == "applied", result["reason"]
    for case, runs in fixed.items():
        expected = runs["off"]
        before, after = result["cases"][case]["off"], result["cases"][case]["on"]
        assert "error" not in before and "error" not in after, (before, after)
        assert after == expected, case
        assert before != expected, case


@pytest.mark.parametrize("version", AFFECTED)
def test_unpatched_release_shows_the_stale_reuse(version, observe_in, fixed):
    result = observe_in(version)[PID]
    for case, runs in result["cases"].items():
        prefill = runs["off"]["prefill"]
        assert not events(prefill, "prepare"), case  # nothing prepared for the draft prefill
        fwds = events(prefill, "forward")
        assert len(fwds) == len(events(fixed[case]["off"]["prefill"], "forward"))
        assert all(e["metadata"].startswith("target#") for e in fwds), case  # the target's saved states
        assert runs["off"]["saved_state_reads"] > 0
        if any(not e["skip_attn"] for e in events(fixed[case]["off"]["prefill"], "prepare")):
            assert any(e["stale_buffers"] for e in fwds), case  # FULL graphs on overwritten buffers


@pytest.mark.parametrize("version", AFFECTED)
def test_draft_decode_capture_untouched(version, observe_in, fixed):
    result = observe_in(version)[PID]
    for case, runs in result["cases"].items():
        assert runs["off"]["decode"] == runs["on"]["decode"] == fixed[case]["off"]["decode"], case


@pytest.mark.parametrize("version", releases("vllm", f">={SPEC_FIXED}"))
def test_retires_on_fixed_releases(version, observe_in, plugins_in):
    loaded = plugins_in(version)["loader"][PID]
    assert set(loaded["targets"].values()) <= {"shipped", "absent"}, loaded  # never wrapped
    observed_state = observe_in(version)[PID]["state"]
    if "does not exist" in loaded["reason"]:  # 0.33 removed spec_decode.autoregressive altogether
        assert loaded["state"] == observed_state == "not-affected", loaded
        assert "autoregressive" in loaded["reason"]
        return
    assert loaded["state"] == "retired", loaded
    assert observed_state == "retired"


@pytest.mark.parametrize("version", AFFECTED)
def test_vllm_plugin_loader_applies_it(version, plugins_in):
    runs = plugins_in(version)
    assert runs["loader_before_import"][PID] == "pending"  # loader runs before the worker imports
    loaded = runs["loader"][PID]
    assert loaded["state"] == "applied" and runs["loader"]["register_calls"] == 1, loaded
    assert set(loaded["targets"].values()) == {"graphfix"}, loaded
    assert runs["graphfix_named"][PID]["state"] == "applied"


@pytest.mark.parametrize("version", AFFECTED)
@pytest.mark.parametrize("run", [FLAG_OFF, "master_off", "other_plugin"])
def test_left_as_shipped(version, run, plugins_in):
    check_left_as_shipped(plugins_in(version), run, PID)
