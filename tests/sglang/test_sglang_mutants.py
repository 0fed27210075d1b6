"""Decisions by behaviour, not by names, on real releases: vendor-style mutants of the installed targets
(built inside the release from its own code by tests/inside/sglang_mutants.py) must never be `retired`
while the bug is still there, and a correct fix under other names must be."""

import functools

import pytest

from tests.conftest import run_inside
from tests.sglang.conftest import fixed_observations

pytestmark = pytest.mark.engine
ADAPTIVE_CASES = ("upstream", "out_of_order", "filter_drops_largest_bs")


@functools.lru_cache(maxsize=None)
def mutated(version, *mutants):
    return run_inside("sglang", version, ["python", "tests/inside/sglang_mutants.py", *mutants])["observed"]


def test_a_backport_that_sizes_only_the_widest_width_is_applied_not_retired():
    res = mutated("0.5.18", "logits_widest_only", "warmup_misnamed_local")["sglang.logits_rows"]
    assert res["state"] == "applied", res["reason"]  # it names resolve_candidate_steps_from_config
    assert res["cases"]["filter_drops_largest_bs"]["off"]["rows"] < res["cases"]["filter_drops_largest_bs"]["off"]["needed"]
    fixed = fixed_observations("sglang.logits_rows")  # what 0.5.19 itself returns, run now
    for case, obs in res["cases"].items():
        assert obs["on"] == fixed[case], (case, obs, fixed[case])


def test_a_local_named_attn_backend_that_is_not_the_capture_backend_is_not_retired():
    res = mutated("0.5.18", "logits_widest_only", "warmup_misnamed_local")["sglang.warmup_hook"]
    assert res["state"] == "applied", res["reason"]
    adaptive = res["cases"]["adaptive_runner"]
    assert set(adaptive["off"]["hooks"].values()) == {"model_runner"}  # the bug is there
    assert set(adaptive["on"]["hooks"].values()) == {adaptive["on"]["captured_on"]} == {"capture_local"}


def test_the_upstream_fix_under_another_local_name_is_retired():
    res = mutated("0.5.19", "warmup_renamed_fix")["sglang.warmup_hook"]
    assert res["state"] == "retired", res["reason"]
    adaptive = res["cases"]["adaptive_runner"]["off"]
    assert set(adaptive["hooks"].values()) == {adaptive["captured_on"]} == {"capture_local"}


def test_a_failing_graphfix_helper_leaves_the_release_as_shipped():
    """Inside 0.5.18, graphfix's own helper in the logits_rows wrapper raises after the original ran."""
    out = run_inside("sglang", "0.5.18", ["python", "tests/inside/sglang_mutants.py", "--wrapper-raises"])
    shipped = observed_off("0.5.18")["upstream"]["off"]  # the same geometry, graphfix off
    assert out["fallback"]["rows"] == [shipped, shipped]
    assert shipped["rows"] < shipped["needed"]  # (the shipped, buggy size: the fallback is not a fix)
    assert out["fallback"]["state"] == "failed", out["fallback"]
    assert "fell back at call time" in out["fallback"]["reason"] and "graphfix helper bug" in out["fallback"]["reason"]


def observed_off(version):
    from tests.sglang.conftest import result

    return result("sglang.logits_rows", version)["cases"]


def test_status_tells_when_a_reload_took_the_wrapper_away():
    out = run_inside("sglang", "0.5.18", ["python", "tests/inside/sglang_mutants.py", "--reload"])["reload"]
    before, after, removed = out["states"]
    assert before["sglang.logits_rows"] == "applied"
    assert after["sglang.logits_rows"] == "drifted" and "importlib.reload" in out["reason"], out
    assert after["sglang.warmup_hook"] == before["sglang.warmup_hook"] == "applied"  # other modules untouched
    assert set(removed.values()) == {"disabled"}, removed  # remove() went through every patch
