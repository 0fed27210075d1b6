"""vllm.cudagraph_sizes on real releases: parity with 0.29.0's default capture sizes (backport on
0.23–0.28, the reconstructed unsafe build), the 0.28.0 dispatcher measurement, plugin loading, flags.
Every expected list comes from running 0.29.0's own method at test time."""

import pytest

from tests.conftest import releases
from tests.vllm.conftest import check_left_as_shipped, DISPATCH, SIZES_BACKPORT, SIZES_FIXED

PID = "vllm.cudagraph_sizes"
pytestmark = pytest.mark.engine
BACKPORT = releases("vllm", SIZES_BACKPORT)
PINNED = {"128,16,8192": 2176, "256,24,8192": 6400, "300,1,8192": 600}  # upstream's failing widths


@pytest.fixture(scope="module")
def fixed(observe_in):
    result = observe_in(SIZES_FIXED)[PID]
    assert result["state"] == "retired", result["reason"]
    cases = {case: runs["off"] for case, runs in result["cases"].items()}
    assert not any("error" in obs for obs in cases.values()), cases
    return cases


def assert_matches_fixed(cases, fixed, release_has_dynamic=True):
    for case, expected in fixed.items():
        got = cases[case]
        assert "error" not in got, got
        if case == "grid":
            missing = set(expected["grid"]) - set(got["grid"])
            assert set(got["grid"]) <= set(expected["grid"])
            # only a release without dynamic speculative decoding (0.23.0) lacks those rows
            assert not missing or (not release_has_dynamic and all("dynamic" in k for k in missing)), missing
            for key in got["grid"]:
                assert got["grid"][key] == expected["grid"][key], key
        else:
            assert got == expected, case


def test_fixed_release_policy(fixed):
    """0.29.0 itself: nothing default above 512 (CPU platform) or the batched-token budget, uniform-decode
    sizes present, user-set sizes as given, a second call changes nothing."""
    for key, res in fixed["grid"]["grid"].items():
        max_num_seqs, k, max_tokens = key.split(",")
        assert res["max"] <= min(512, int(max_tokens)) and res["sizes"][-1] == res["max"], key
    assert 17 in fixed["grid"]["grid"]["128,16,8192"]["sizes"]
    for width, size in PINNED.items():
        assert size not in fixed["grid"]["grid"][width]["sizes"]
    assert fixed["user_set"]["user_set"]["explicit_sizes"]["sizes"] == [1, 2, 600, 2176]
    assert all(r["first"] == r["second"] for r in fixed["twice"]["twice"].values())


@pytest.mark.parametrize("version", BACKPORT)
def test_backport_equals_fixed_release(version, observe_in, fixed):
    result = observe_in(version)[PID]
    assert result["state"] == "applied", result["reason"]
    cases = result["cases"]
    has_dynamic = any("dynamic" in k for k in cases["grid"]["off"]["grid"])
    assert_matches_fixed({c: r["on"] for c, r in cases.items()}, fixed, has_dynamic)
    assert cases["grid"]["off"] != fixed["grid"]  # unpatched: no uniform-decode sizes
    assert 17 not in cases["grid"]["off"]["grid"]["128,16,8192"]["sizes"]
    for key, res in cases["grid"]["off"]["grid"].items():  # and already memory-safe
        assert res["max"] <= 512, key
    assert cases["user_set"]["on"] == cases["user_set"]["off"]  # user-set sizes untouched


def test_unsafe_build_is_reconstructed_and_fixed(unsafe_build, fixed):
    result = unsafe_build["observe"][PID]
    assert result["state"] == "applied", result["reason"]  # detected by behaviour on a 0.29.0 install
    cases = result["cases"]
    before = cases["grid"]["off"]["grid"]
    for width, size in PINNED.items():
        assert size in before[width]["sizes"] and before[width]["max"] == size, width
    assert_matches_fixed({c: r["on"] for c, r in cases.items()}, fixed)
    assert cases["user_set"]["on"] == cases["user_set"]["off"] == fixed["user_set"]


def test_backport_is_justified_by_the_0_28_dispatcher(vllm_runs):
    """Adding the uniform-decode sizes changes which uniform-decode batches reach a FULL graph in 0.28.0's
    real CudagraphDispatcher (after the V1 runner's spec-decode size rounding) — and never removes one."""
    if DISPATCH not in releases("vllm"):
        pytest.skip(f"harness has no vllm {DISPATCH}")
    totals = vllm_runs.get(DISPATCH)["dispatch"]["totals"]
    print("0.28.0 dispatcher:", totals)
    assert totals["batches_gained"] > 0 and totals["configs_changed"] > 0, totals
    assert totals["batches_lost"] == 0, totals


@pytest.mark.parametrize("version", releases("vllm", f">={SIZES_FIXED}"))
def test_retires_on_fixed_releases(version, observe_in, plugins_in):
    assert observe_in(version)[PID]["state"] == "retired"
    loaded = plugins_in(version)["loader"][PID]
    assert loaded["state"] == "retired" and set(loaded["targets"].values()) == {"shipped"}, loaded


@pytest.mark.parametrize("version", BACKPORT)
def test_vllm_plugin_loader_applies_it(version, plugins_in):
    runs = plugins_in(version)
    assert runs["loader_before_import"][PID] == "pending"
    loaded = runs["loader"][PID]
    assert loaded["state"] == "applied" and set(loaded["targets"].values()) == {"graphfix"}, loaded
    assert runs["graphfix_named"][PID]["state"] == "applied"


def test_vllm_plugin_loader_applies_it_on_the_unsafe_build(unsafe_build):
    runs = unsafe_build["plugins"]
    assert runs["loader"][PID]["state"] == "applied", runs["loader"][PID]
    assert set(runs["loader"][PID]["targets"].values()) == {"graphfix"}
    for run in ("sizes_off", "master_off", "other_plugin"):
        assert set(runs[run][PID]["targets"].values()) == {"shipped"}, (run, runs[run][PID])
    assert runs["other_plugin"]["register_calls"] == 0


@pytest.mark.parametrize("version", BACKPORT)
@pytest.mark.parametrize("run", ["sizes_off", "master_off", "other_plugin"])
def test_left_as_shipped(version, run, plugins_in):
    check_left_as_shipped(plugins_in(version), run, PID)
