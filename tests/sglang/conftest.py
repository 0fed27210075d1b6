"""Helpers shared by the SGLang parity tests (tests/sglang/test_parity_*.py).

Every engine subprocess goes through ``tests.conftest`` (``observed`` / ``plugin_state``), whose answers
are cached for the session: per release one ``python -m graphfix.observe sglang`` (every SGLang
scenario, off then on), one plugin-loader run with default flags, and -- for the "flag off" tests of
the three patches below -- one plugin-loader run with all three flags off at once (the patches share
no target, so switching them off together checks each one's targets exactly as one at a time would).
The fixture ``engine_runs_in_parallel`` starts the runs a test module's selected tests need on every
core before its first test (each run is one SGLang import, ~7-15 s of CPU).
"""

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import observed, plugin_state, releases

FIRST_FIXED = "0.5.19"
# Releases the seeds and the wheels name as affected; the harness must be able to build every one.
AFFECTED = {
    "sglang.logits_rows": ("0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18"),
    "sglang.warmup_hook": ("0.5.14", "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18"),
    "sglang.capture_stream": ("0.5.14", "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18"),
}
RETIRED_IN = ("0.5.19", "0.5.23")
FLAGS_OFF = tuple((f"GRAPHFIX_{pid.upper().replace('.', '_')}", "off") for pid in sorted(AFFECTED))
# "flag off" runs: one release per target shape -- 0.5.14 (no autotune helper, no logits target, no
# stream store), 0.5.15 (decode_num_tokens_per_bs, no stream store), 0.5.18 (newest affected).
FLAG_OFF_RELEASES = ("0.5.14", "0.5.15", "0.5.18")


def affected(pid):
    """The affected releases of ``pid`` that the harness offers (a missing one fails its own test)."""
    return [v for v in AFFECTED[pid] if v in releases("sglang")]


def retired_releases():
    return [v for v in RETIRED_IN if v in releases("sglang")]


def flag_off_releases(pid):
    return [v for v in affected(pid) if v in FLAG_OFF_RELEASES]


def result(pid, version):
    """``{"state", "reason", "cases": {case: {"off": obs, "on": obs|None}}}`` in ``version``."""
    res = observed("sglang", version)
    assert pid in res, f"{pid} has no scenario in sglang {version} (is it in PATCH_MODULES/SCENARIO_MODULES?)"
    return res[pid]


def fixed_observations(pid, cases=None):
    """What the first fixed release produces, unpatched, for every case (or the ``cases`` named)."""
    res = result(pid, FIRST_FIXED)
    assert res["state"] == "retired", res["reason"]
    out = {}
    for case, obs in res["cases"].items():
        if cases is None or case in cases:
            assert obs["off"] is not None and "error" not in obs["off"], (case, obs["off"])
            out[case] = obs["off"]
    return out


def applied_cases(pid, version, cases=None):
    """``{case: (before, after)}`` on an affected release, where the patch must be applied."""
    res = result(pid, version)
    assert res["state"] == "applied", res["reason"]
    out = {}
    for case, obs in res["cases"].items():
        if cases is None or case in cases:
            for mode in ("off", "on"):
                assert obs[mode] is not None and "error" not in obs[mode], (case, mode, obs[mode])
            out[case] = (obs["off"], obs["on"])
    return out


def target_kinds(pid, version, flags=()):
    """State and ``{"module:qualname": kind}`` after SGLang's own ``load_plugins()`` ran."""
    state = plugin_state("sglang", version, flags) if flags else plugin_state("sglang", version)
    return state[pid]  # (called as graph_pool's tests call it: one cache entry per release)


def check_harness_has(pid):
    missing = [v for v in AFFECTED[pid] + RETIRED_IN if v not in releases("sglang")]
    assert not missing, f"harness cannot build sglang {missing}"


def check_retired(pid, version):
    res = result(pid, version)
    assert res["state"] == "retired", res["reason"]
    assert all(c["on"] is None for c in res["cases"].values())
    loaded = target_kinds(pid, version)
    assert loaded["state"] == "retired", loaded
    assert "graphfix" not in loaded["targets"].values(), loaded["targets"]


def check_loader_applies(pid, version, wrapped):
    loaded = target_kinds(pid, version)
    assert loaded["state"] == "applied", loaded
    kinds = loaded["targets"]
    for target in wrapped:
        assert kinds[target] == "graphfix", (target, kinds)
    assert {k for t, k in kinds.items() if t not in wrapped} <= {"shipped", "absent"}, kinds


def check_flag_off(pid, version):
    loaded = target_kinds(pid, version, FLAGS_OFF)
    assert loaded["state"] == "disabled", loaded
    assert set(loaded["targets"].values()) <= {"shipped", "absent"}, loaded["targets"]
    assert "shipped" in loaded["targets"].values()


def _runs_for(item):
    """The cached engine runs a selected test will ask for: (helper, args). Read off the test's name
    and parameters; a module's own ``FIXED`` names its first fixed release (default 0.5.19)."""
    params = item.callspec.params if hasattr(item, "callspec") else {}
    version, name = params.get("version"), item.originalname
    if version and "flags" in params:
        return [(plugin_state, ("sglang", version, params["flags"]))]
    if "flag_off" in name:
        return [(plugin_state, ("sglang", version, FLAGS_OFF))]
    if "plugin_loader" in name:
        return [(plugin_state, ("sglang", version))]
    if "stays_out" in name:
        return [(observed, ("sglang", version)), (plugin_state, ("sglang", version))]
    fixed = getattr(item.module, "FIXED", FIRST_FIXED)
    return [(observed, ("sglang", fixed))] + ([(observed, ("sglang", version))] if version else [])


def _run_quietly(run):
    helper, args = run
    try:
        helper(*args)
    except BaseException:  # noqa: BLE001 - pytest.fail() included: the test itself re-runs and reports it
        pass


@pytest.fixture(scope="module")
def engine_runs_in_parallel(request):
    """Fill the session caches for this module's selected tests, ``os.cpu_count()`` runs at a time."""
    runs = []
    for item in request.session.items:
        if item.module is request.module:
            runs += [r for r in _runs_for(item) if r not in runs]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(_run_quietly, runs))
