"""sglang.graph_pool on real releases: upstream parity against 0.5.15, plugin loading, flags."""

import pytest

from tests.conftest import observed, plugin_state, releases

PID = "sglang.graph_pool"
FIXED = "0.5.15"
pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def fixed_release():
    return observed("sglang", FIXED)[PID]


@pytest.mark.parametrize("version", releases("sglang", "==0.5.14"))
def test_parity_with_first_fixed_release(version, fixed_release):
    result = observed("sglang", version)[PID]
    assert result["state"] == "applied", result["reason"]
    for case, fixed in fixed_release["cases"].items():
        expected = fixed["off"]
        assert "error" not in expected, expected
        before, after = result["cases"][case]["off"], result["cases"][case]["on"]
        assert before != expected, "unpatched release should show the bug"
        assert before["graph_pool_handle_calls"] > 1  # one pool per backend: the bug
        assert after == expected


@pytest.mark.parametrize("version", releases("sglang", ">=0.5.15"))
def test_stays_out_of_fixed_releases(version):
    result = observed("sglang", version)[PID]
    assert result["state"] == "retired", result["reason"]
    assert all(c["on"] is None for c in result["cases"].values())
    state = plugin_state("sglang", version)[PID]
    assert state["state"] == "retired" and set(state["targets"].values()) == {"shipped"}


@pytest.mark.parametrize("version", releases("sglang", "==0.5.14"))
def test_engine_plugin_loader_applies_it(version):
    state = plugin_state("sglang", version)[PID]
    assert state["state"] == "applied", state
    assert set(state["targets"].values()) == {"graphfix"}


@pytest.mark.parametrize("version", releases("sglang", "==0.5.14"))
@pytest.mark.parametrize("flags,state", [
    ((("SGLANG_PLUGINS", "some_other_plugin"),), "pending"),
    ((("GRAPHFIX_SGLANG_GRAPH_POOL", "off"),), "disabled"),
    ((("GRAPHFIX", "0"),), "disabled"),
])
def test_left_as_shipped(version, flags, state):
    result = plugin_state("sglang", version, flags)[PID]
    assert set(result["targets"].values()) == {"shipped"}, result
    assert result["state"] == state, result
