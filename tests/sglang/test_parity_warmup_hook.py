"""sglang.warmup_hook on real releases: each consumer of the post-warmup hook gets the same backend's
hook as in 0.5.19.

Observable (sglang_graphfix/scenarios/warmup_hook.py): the release's own ``capture_one_shape`` and
``capture_prepare`` run for an adaptive runner (own backend), a pdmux stream-group capture and an
ordinary runner; reported per consumer (``capture_one`` of the graph backend, and from 0.5.15 the
speculative-draft autotune helper) is the role of the backend whose hook it received, plus the backend
the forward ran on and what ``model_runner.attn_backend`` said during the forward.
0.5.14 has no autotune helper: there the comparison covers the one consumer it has.
"""

import pytest

from tests.sglang.conftest import (
    affected, applied_cases, check_flag_off, check_harness_has, check_loader_applies, check_retired,
    fixed_observations, flag_off_releases, retired_releases,
)

PID = "sglang.warmup_hook"
MOD = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"
WRAPPED = {f"{MOD}:DecodeCudaGraphRunner.capture_one_shape"}
AUTOTUNE = f"{MOD}:maybe_flashinfer_autotune_speculative_draft"
CAPTURE_CASES = ("adaptive_runner", "pdmux_stream_group", "ordinary_runner")
pytestmark = [pytest.mark.engine, pytest.mark.usefixtures("engine_runs_in_parallel")]


@pytest.fixture(scope="module")
def fixed():
    return fixed_observations(PID)


def _consumers_of(obs, names):
    return dict(obs, hooks={k: v for k, v in obs["hooks"].items() if k in names})


def test_harness_builds_every_release():
    check_harness_has(PID)


def test_first_fixed_release_hands_out_the_capture_backends_hook(fixed):
    for case in CAPTURE_CASES:
        obs = fixed[case]
        assert set(obs["hooks"]) == {"capture_one", "autotune"}, obs
        assert set(obs["hooks"].values()) == {obs["captured_on"]}, (case, obs)
        assert obs["model_runner_attn_backend"] == "model_runner", obs
    assert fixed["draft_runners"] == {"overriding_runners_shipped": True}


@pytest.mark.parametrize("version", affected(PID))
def test_unpatched_release_hands_out_model_runners_hook(version, fixed):
    cases = applied_cases(PID, version)
    for case in ("adaptive_runner", "pdmux_stream_group"):
        before = cases[case][0]
        assert before["captured_on"] != "model_runner"
        assert set(before["hooks"].values()) == {"model_runner"}, (case, before)  # the bug
    before = cases["ordinary_runner"][0]
    assert before == _consumers_of(fixed["ordinary_runner"], before["hooks"])  # control


@pytest.mark.parametrize("version", affected(PID))
def test_patched_release_equals_first_fixed_release(version, fixed):
    cases = applied_cases(PID, version)
    assert set(cases) == set(fixed)
    for case, (_, after) in cases.items():
        expected = fixed[case]
        if "hooks" in expected:
            consumers = set(after["hooks"])
            # every consumer the release has; 0.5.14 lacks only the autotune helper
            assert consumers == set(expected["hooks"]) or (version == "0.5.14" and consumers == {"capture_one"})
            expected = _consumers_of(expected, consumers)
        assert after == expected, (case, after, expected)


@pytest.mark.parametrize("version", retired_releases())
def test_stays_out_of_fixed_releases(version):
    check_retired(PID, version)


@pytest.mark.parametrize("version", affected(PID))
def test_engine_plugin_loader_applies_it(version):
    wrapped = WRAPPED | ({AUTOTUNE} if version != "0.5.14" else set())
    check_loader_applies(PID, version, wrapped)


@pytest.mark.parametrize("version", flag_off_releases(PID))
def test_flag_off_leaves_target_as_shipped(version):
    check_flag_off(PID, version)
