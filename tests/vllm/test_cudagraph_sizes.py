"""vllm.cudagraph_sizes (PR 54418) on real releases: it changes only a build whose default sizes exceed the
platform ceiling — PR 50488's build, rebuilt at test time from 0.29.0's source (tests/vllm/unsafe_build.py)
— and then to exactly what 0.29.0 gives; releases that never had the regression are not-affected.
Every expected list comes from running 0.29.0's own method at test time."""

import pytest

from tests.conftest import releases
from tests.vllm.conftest import check_left_as_shipped, SIZES_FIXED

PID = "vllm.cudagraph_sizes"
pytestmark = pytest.mark.engine
PLAIN_GRID = releases("vllm", f"<{SIZES_FIXED}")  # 0.21.0-0.28.0: never had the regression
PINNED = {"128,16,8192": 2176, "256,24,8192": 6400, "300,1,8192": 600}  # upstream's failing widths


@pytest.fixture(scope="module")
def fixed(observe_in):
    result = observe_in(SIZES_FIXED)[PID]
    assert result["state"] == "retired", result["reason"]
    cases = {case: runs["off"] for case, runs in result["cases"].items()}
    assert not any("error" in obs for obs in cases.values()), cases
    return cases


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


def test_unsafe_build_has_pr_50488_shape(unsafe_build):
    """The reconstruction is the build upstream's CI broke on: default maximum raised to the widest
    uniform-decode batch (PR 54352's 768/1024/2176/6400, 600 for MTP depth 1), and the token grid
    extended with it (the review thread's 581 sizes at 512 sequences, 16 draft tokens)."""
    before = unsafe_build["observe"][PID]["cases"]["grid"]["off"]["grid"]
    maxima = {"256,2,8192": 768, "256,3,8192": 1024, **PINNED}
    for width, size in maxima.items():
        assert before[width]["max"] == size and before[width]["sizes"][-1] == size, width
    assert len(before["512,16,16384"]["sizes"]) == 581
    assert before["512,16,16384"]["max"] == 512 * 17


def test_unsafe_build_patched_equals_fixed_release(unsafe_build, fixed):
    result = unsafe_build["observe"][PID]
    assert result["state"] == "applied", result["reason"]  # detected by behaviour on a 0.29.0 install
    assert "above the 512-token ceiling" in result["reason"]
    for case, expected in fixed.items():
        assert result["cases"][case]["on"] == expected, case
    assert result["cases"]["grid"]["off"] != fixed["grid"]


def test_unsafe_build_guard_changes_nothing_below_the_ceiling(unsafe_build):
    """Configurations whose default sizes already fit (no speculation, short lists, small budgets) come
    out exactly as the unsafe build made them; the rest lose only the sizes above the ceiling."""
    cases = unsafe_build["observe"][PID]["cases"]
    before, after = cases["grid"]["off"]["grid"], cases["grid"]["on"]["grid"]
    below = [key for key, r in before.items() if r["max"] <= min(512, int(key.split(",")[2]))]
    assert len(below) >= 40 and len(below) < len(before), len(below)
    for key in below:
        assert after[key] == before[key], key
    for key in set(before) - set(below):
        limit = min(512, int(key.split(",")[2]))
        assert after[key]["sizes"] == [s for s in before[key]["sizes"] if s <= limit], key
    assert cases["user_set"]["on"] == cases["user_set"]["off"]  # user-set sizes untouched, even 2176


def test_unsafe_build_on_capability_family_100(unsafe_build, family100_in):
    """Ceiling 1024 on B200/GB200: the guarded unsafe build equals 0.29.0 there too."""
    expected = family100_in(SIZES_FIXED)["shipped"]
    got = unsafe_build["family100"]
    assert got["shipped"] != expected and max(got["shipped"]["128,16,8192"]) == 2176
    assert got["patched"] == expected
    assert max(expected["512,0,8192"]) == 1024  # the family-100 ceiling really was in effect


@pytest.mark.parametrize("version", PLAIN_GRID)
def test_not_affected_where_the_regression_never_was(version, observe_in, plugins_in):
    """0.21-0.28 default to the plain token grid within the ceiling: nothing is wrapped, the state says
    why — neither "retired" (there was nothing to fix) nor "applied"."""
    result = observe_in(version)[PID]
    assert result["state"] == "not-affected", result
    assert "never had the PR 50488" in result["reason"]
    loaded = plugins_in(version)["loader"][PID]
    assert loaded["state"] == "not-affected" and set(loaded["targets"].values()) == {"shipped"}, loaded
    for case, runs in result["cases"].items():
        assert runs["on"] is None and "error" not in runs["off"], case


def test_a_revert_to_the_plain_grid_is_left_alone(plain_grid_revert):
    """An upstream build that went back to the plain grid after 0.29.0 (rebuilt at test time from 0.29.0's
    method without the uniform-decode append) must not be "fixed": not-affected, nothing wrapped, even
    with the flag `on`."""
    assert 17 not in plain_grid_revert["sizes_128_16"] and max(plain_grid_revert["sizes_128_16"]) == 512
    for mode in ("auto", "on"):
        decision = plain_grid_revert[mode]
        assert decision["state"] == "not-affected" and not decision["wrapped"], (mode, decision)
        assert "never had the PR 50488" in decision["reason"], decision


@pytest.mark.parametrize("version", releases("vllm", f">={SIZES_FIXED}"))
def test_retires_on_fixed_releases(version, observe_in, plugins_in):
    assert observe_in(version)[PID]["state"] == "retired"
    loaded = plugins_in(version)["loader"][PID]
    assert loaded["state"] == "retired" and set(loaded["targets"].values()) == {"shipped"}, loaded


def test_vllm_plugin_loader_applies_it_on_the_unsafe_build(unsafe_build):
    runs = unsafe_build["plugins"]  # same process as the first pass: vllm.config.vllm is already imported
    assert runs["loader"][PID]["state"] == "applied", runs["loader"][PID]
    assert set(runs["loader"][PID]["targets"].values()) == {"graphfix"}
    assert runs["graphfix_named"][PID]["state"] == "applied"


@pytest.mark.parametrize("run", ["sizes_off", "master_off", "other_plugin"])
def test_left_as_shipped_on_the_unsafe_build(run, unsafe_build):
    runs = unsafe_build["plugins"]
    assert set(runs[run][PID]["targets"].values()) == {"shipped"}, (run, runs[run][PID])
    if run == "other_plugin":
        assert runs[run]["register_calls"] == 0
    else:
        assert runs[run][PID]["state"] == "disabled", runs[run][PID]
