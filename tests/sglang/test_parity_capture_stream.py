"""sglang.capture_stream on real releases: capture passes share one stream, as in 0.5.19, and graphfix
refuses overlapping captures on it (0.5.19 has no such guard).

Observable (sglang_graphfix/scenarios/capture_stream.py): the release's own decode and prefill
``capture()`` run decode -> prefill -> decode, and a pdmux decode capture; for every capture pass the
stream ``graph_capture()`` was given, the runner's ``self.stream`` and the stream handed to the graph
backend's ``capture_session`` (``s0``, ``s1``, ... by first appearance). ``store``: where the shared
stream is kept afterwards. ``guard_*``: a second capture started while one holds the shared stream.
"""

import pytest

from tests.sglang.conftest import (
    affected, applied_cases, check_flag_off, check_harness_has, check_loader_applies, check_retired,
    fixed_observations, flag_off_releases, retired_releases,
)

PID = "sglang.capture_stream"
RUNNERS = "sglang.srt.model_executor.runner."
WRAPPED = {f"{RUNNERS}decode_cuda_graph_runner:graph_capture", f"{RUNNERS}prefill_cuda_graph_runner:graph_capture"}
PARITY_CASES = ("decode_prefill_decode", "pdmux_decode")
GUARD_CASES = ("guard_other_thread", "guard_reentry")
pytestmark = [pytest.mark.engine, pytest.mark.usefixtures("engine_runs_in_parallel")]


@pytest.fixture(scope="module")
def fixed():
    return fixed_observations(PID)


def _streams(obs, key):
    return [c[key] for c in obs["captures"]]


def test_harness_builds_every_release():
    check_harness_has(PID)


def test_first_fixed_release_shares_one_stream(fixed):
    serial = fixed["decode_prefill_decode"]
    assert [c["phase"] for c in serial["captures"]] == ["decode", "prefill", "decode"]
    for key in ("graph_capture", "runner", "capture_session"):
        assert len(set(_streams(serial, key))) == 1 and None not in _streams(serial, key), serial
    pdmux = fixed["pdmux_decode"]
    assert _streams(pdmux, "graph_capture") == _streams(pdmux, "capture_session") == ["pdmux0", "pdmux1"]
    assert fixed["store"]["shared_stream_kept_in"].startswith("runtime_context:")


@pytest.mark.parametrize("version", affected(PID))
def test_unpatched_release_gets_a_fresh_stream_per_pass(version, fixed):
    cases = applied_cases(PID, version)
    before = cases["decode_prefill_decode"][0]
    assert _streams(before, "graph_capture") == [None, None, None], before
    assert len(set(_streams(before, "capture_session"))) == 3, before  # the bug
    assert cases["pdmux_decode"][0] == fixed["pdmux_decode"]  # pdmux keeps its own streams anyway
    assert cases["store"][0] == {"shared_stream_kept_in": "nowhere"}


@pytest.mark.parametrize("version", affected(PID))
def test_patched_release_equals_first_fixed_release(version, fixed):
    cases = applied_cases(PID, version, PARITY_CASES)
    for case, (_, after) in cases.items():
        assert after == fixed[case], (case, after, fixed[case])


@pytest.mark.parametrize("version", affected(PID))
def test_patched_release_keeps_the_stream_where_0_5_19_does(version, fixed):
    """In the runtime-context store under 0.5.19's name where the release has one (0.5.16+);
    0.5.14 and 0.5.15 have no store, graphfix holds the stream itself."""
    _, after = applied_cases(PID, version, ["store"])["store"]
    if version in ("0.5.14", "0.5.15", "0.5.15.post1"):
        assert after == {"shared_stream_kept_in": "graphfix:s0"}
    else:
        assert after == fixed["store"]


@pytest.mark.parametrize("version", affected(PID))
def test_patched_release_refuses_overlapping_captures(version, fixed):
    """Beyond upstream: 0.5.19 (and the unpatched release) let a second capture interleave on the
    stream; graphfix raises CaptureOverlapError for it, from another thread or re-entrant."""
    cases = applied_cases(PID, version, GUARD_CASES + ("guard_concurrent_start",))
    for case in GUARD_CASES:
        before, after = cases[case]
        assert fixed[case] == before == {"nested_capture": "ran"}
        assert after == {"nested_capture": "refused (CaptureOverlapError)"}
    before, after = cases["guard_concurrent_start"]
    assert before["captures_overlapped"] and fixed["guard_concurrent_start"]["captures_overlapped"]
    assert not after["captures_overlapped"] and after["streams_used"] == 1, after  # one stream made
    assert set(after["outcomes"]) <= {"ran", "CaptureOverlapError"} and "ran" in after["outcomes"], after


@pytest.mark.parametrize("version", retired_releases())
def test_stays_out_of_fixed_releases(version):
    check_retired(PID, version)


@pytest.mark.parametrize("version", affected(PID))
def test_engine_plugin_loader_applies_it(version):
    check_loader_applies(PID, version, WRAPPED)


@pytest.mark.parametrize("version", flag_off_releases(PID))
def test_flag_off_leaves_target_as_shipped(version):
    check_flag_off(PID, version)
