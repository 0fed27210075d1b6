"""vllm.uniform_decode_sizes (opt-in backport of PRs 50488 + 54418 to 0.23-0.28) on real releases:
off unless its flag is `on`; with it on, the default capture sizes equal 0.29.0's on the same configuration
(capability family 100 included, or refused there where the release caps its own grid at 512); the
0.28.0 dispatcher shows what it buys. Every expected list comes from running 0.29.0 at test time."""

import pytest

from tests.conftest import releases
from tests.vllm.conftest import DISPATCH, SIZES_BACKPORT, SIZES_FIXED

PID = "vllm.uniform_decode_sizes"
pytestmark = pytest.mark.engine
BACKPORT = releases("vllm", SIZES_BACKPORT)


@pytest.fixture(scope="module")
def fixed(observe_in):
    result = observe_in(SIZES_FIXED)[PID]
    assert result["state"] == "disabled" and "opt-in" in result["reason"], result
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


@pytest.mark.parametrize("version", BACKPORT)
def test_off_by_default(version, observe_in, plugins_in):
    """`auto` (flag unset) means off for this patch: nothing wrapped, the reason says it is opt-in."""
    result = observe_in(version)[PID]
    assert result["state"] == "disabled" and "opt-in" in result["reason"], result
    assert all(runs["on"] is None for runs in result["cases"].values())
    loaded = plugins_in(version)["loader"][PID]
    assert loaded["state"] == "disabled" and set(loaded["targets"].values()) == {"shipped"}, loaded


@pytest.mark.parametrize("version", BACKPORT)
def test_opted_in_equals_fixed_release(version, opt_in_in, fixed):
    result = opt_in_in(version)
    assert result["state"] == "applied", result["reason"]
    cases = result["cases"]
    has_dynamic = any("dynamic" in k for k in cases["grid"]["off"]["grid"])
    assert_matches_fixed({c: r["on"] for c, r in cases.items()}, fixed, has_dynamic)
    assert cases["grid"]["off"] != fixed["grid"]  # unpatched: no uniform-decode sizes
    assert 17 not in cases["grid"]["off"]["grid"]["128,16,8192"]["sizes"]
    assert cases["user_set"]["on"] == cases["user_set"]["off"]  # user-set sizes untouched


@pytest.mark.parametrize("version", BACKPORT)
def test_capability_family_100_equals_fixed_release_or_is_refused(version, family100_in):
    """Ceiling 1024: where the release's own grid reaches it (0.28.0) the patched list is 0.29.0's; where
    the release caps at 512 (0.23-0.26) a configuration 0.29.0 sizes past 512 is left as shipped, never
    a hybrid of the two."""
    expected, got = family100_in(SIZES_FIXED)["shipped"], family100_in(version)
    assert max(expected["512,0,8192"]) == 1024
    own_cap = max(got["shipped"]["512,0,8192"])
    refused = 0
    for key, sizes in got["uniform"].items():
        if sizes == expected[key]:
            continue
        assert own_cap == 512 and sizes == got["shipped"][key] and max(expected[key]) > 512, key
        refused += 1
    assert (refused > 0) == (own_cap == 512), (own_cap, refused)


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
def test_retires_on_fixed_releases(version, opt_in_in, plugins_in):
    assert opt_in_in(version)["state"] == "retired"
    run = plugins_in(version)["uniform_on"][PID]
    assert run["state"] == "retired" and set(run["targets"].values()) == {"shipped"}, run


def test_not_affected_on_the_unsafe_build(unsafe_build):
    run = unsafe_build["plugins"]["uniform_on"][PID]  # vllm.cudagraph_sizes wraps the target there
    assert run["state"] == "not-affected" and set(run["targets"].values()) == {"other-patch"}, run
    assert "vllm.cudagraph_sizes is the fix there" in run["reason"]


@pytest.mark.parametrize("version", BACKPORT)
def test_vllm_plugin_loader_applies_it_when_opted_in(version, plugins_in):
    runs = plugins_in(version)
    run = runs["uniform_on"][PID]
    assert run["state"] == "applied" and set(run["targets"].values()) == {"graphfix"}, run
    assert runs["uniform_on"]["register_calls"] == 1


@pytest.mark.parametrize("version", BACKPORT)
def test_left_as_shipped_despite_opt_in(version, plugins_in):
    """Flag on, but GRAPHFIX=0 or another plugin allowlisted in VLLM_PLUGINS: nothing wrapped."""
    runs = plugins_in(version)
    assert runs["uniform_on_master_off"][PID]["state"] == "disabled"
    assert set(runs["uniform_on_master_off"][PID]["targets"].values()) == {"shipped"}
    assert runs["uniform_on_other_plugin"]["register_calls"] == 0
    assert set(runs["uniform_on_other_plugin"][PID]["targets"].values()) == {"shipped"}
