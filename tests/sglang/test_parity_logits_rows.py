"""sglang.logits_rows on real releases: rows of the shared logits buffer equal 0.5.19's.

Observable (sglang_graphfix/scenarios/logits_rows.py): ``ModelRunner.max_decode_logits_rows`` of the
release, called bound and unbound, for upstream's CPU geometry and three more; ``needed`` is the rows
the captured graphs can ask for (max over every captured width of max aligned bs x width).
"""

import pytest

from tests.sglang.conftest import (
    FIRST_FIXED, affected, applied_cases, check_flag_off, check_harness_has, check_loader_applies,
    check_retired, fixed_observations, flag_off_releases, retired_releases,
)

PID = "sglang.logits_rows"
WRAPPED = {"sglang.srt.model_executor.model_runner:ModelRunner.max_decode_logits_rows"}
ADAPTIVE_CASES = ("upstream", "out_of_order", "filter_drops_largest_bs", "engine_static_narrowest")
pytestmark = [pytest.mark.engine, pytest.mark.usefixtures("engine_runs_in_parallel")]


@pytest.fixture(scope="module")
def fixed():
    return fixed_observations(PID)


def test_harness_builds_every_release():
    check_harness_has(PID)


def test_first_fixed_release_sizes_for_every_width(fixed):
    """Sanity of the reference itself: 0.5.19 covers what its graphs need, in every geometry."""
    assert set(ADAPTIVE_CASES) | {"not_adaptive"} <= set(fixed)
    for case, obs in fixed.items():
        assert obs["rows"] == obs["rows_unbound"] == obs["needed"], (FIRST_FIXED, case, obs)


@pytest.mark.parametrize("version", affected(PID))
def test_unpatched_release_undersizes_the_buffer(version, fixed):
    for case, (before, _) in applied_cases(PID, version).items():
        if case in ADAPTIVE_CASES:
            assert before["rows"] < before["needed"], (case, before)  # "holds N rows but caller needs M"
            assert before != fixed[case]
        else:
            assert before == fixed[case], (case, before)  # nothing to fix without adaptive decoding


@pytest.mark.parametrize("version", affected(PID))
def test_patched_release_equals_first_fixed_release(version, fixed):
    cases = applied_cases(PID, version)
    assert set(cases) == set(fixed)
    for case, (_, after) in cases.items():
        assert after == fixed[case], (case, after, fixed[case])


@pytest.mark.parametrize("version", retired_releases())
def test_stays_out_of_fixed_releases(version):
    check_retired(PID, version)


@pytest.mark.parametrize("version", affected(PID))
def test_engine_plugin_loader_applies_it(version):
    check_loader_applies(PID, version, WRAPPED)


@pytest.mark.parametrize("version", flag_off_releases(PID))
def test_flag_off_leaves_target_as_shipped(version):
    check_flag_off(PID, version)
