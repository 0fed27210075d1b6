"""One subprocess per vLLM release (``tests/vllm/inside_release.py``: plugin-loader runs, every scenario
off/on, the opt-in patch's scenario with its flag on, default sizes on capability family 100; 0.28.0 adds
the dispatcher measurement, 0.29.0 a second pass on the reconstructed unsafe build). All of them are started together, two at a time (``GRAPHFIX_TEST_WORKERS``), the first time any
test asks for one, and cached for the session.
"""

import concurrent.futures
import os

import pytest

from tests.conftest import releases, run_inside

SPEC_AFFECTED = ">=0.23.0,<0.26.0"
SPEC_FIXED = "0.26.0"
SIZES_BACKPORT = ">=0.23.0,<0.29.0"  # vllm.uniform_decode_sizes (opt-in)
SIZES_FIXED = "0.29.0"
DISPATCH = "0.28.0"  # whose real CudagraphDispatcher measures the backport
UNSAFE = "0.29.0"  # whose source the unsafe build is reconstructed from
MUTANTS = {"0.25.1": "spec_draft_buffers,sizes_one_size", "0.22.1": "eagle_draft_buffers"}  # release -> wrong wrappers verify must reject
OPTIONS = {DISPATCH: ("--dispatch",), UNSAFE: ("--unsafe-build",),
           **{v: (f"--mutants={names}",) for v, names in MUTANTS.items()}}


def _jobs():
    return [(v, *OPTIONS.get(v, ())) for v in releases("vllm")]


class Runs:
    def __init__(self):
        workers = int(os.environ.get("GRAPHFIX_TEST_WORKERS", "2"))
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
        self._futures = {}

    def _submit(self, job):
        if job not in self._futures:
            argv = ["python", "tests/vllm/inside_release.py", *job[1:]]
            self._futures[job] = self._pool.submit(run_inside, "vllm", job[0], argv)
        return self._futures[job]

    def get(self, version):
        if not self._futures:
            for job in _jobs():  # start every release at once: the suite needs all of them
                self._submit(job)
        return self._submit((version, *OPTIONS.get(version, ()))).result()

    def close(self):
        self._pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def vllm_runs():
    runs = Runs()
    yield runs
    runs.close()


@pytest.fixture(scope="session")
def observe_in(vllm_runs):
    """``observe_in(version)[patch_id]`` -> ``{"state", "reason", "cases": {case: {"off", "on"}}}``."""
    return lambda version: vllm_runs.get(version)["observe"]


@pytest.fixture(scope="session")
def opt_in_in(vllm_runs):
    """``opt_in_in(version)`` -> vllm.uniform_decode_sizes's scenario with its flag ``on``."""
    return lambda version: vllm_runs.get(version)["opt_in"]["vllm.uniform_decode_sizes"]


@pytest.fixture(scope="session")
def family100_in(vllm_runs):
    """``family100_in(version)`` -> ``{"shipped", "uniform": {row: sizes}}`` on capability family 100."""
    return lambda version: vllm_runs.get(version)["family100"]


@pytest.fixture(scope="session")
def plugins_in(vllm_runs):
    """``plugins_in(version)[run][patch_id]`` -> ``{"state", "reason", "targets": {target: kind}}``."""
    return lambda version: vllm_runs.get(version)["plugins"]


@pytest.fixture(scope="session")
def unsafe_build(vllm_runs):
    """``{"plugins", "observe", "family100"}`` for the PR-50488 build reconstructed from 0.29.0's source."""
    return vllm_runs.get(UNSAFE)["unsafe"]


@pytest.fixture(scope="session")
def plain_grid_revert(vllm_runs):
    """vllm.cudagraph_sizes's decisions on a plain-grid revert of 0.29.0's method (flag auto, then on)."""
    return vllm_runs.get(UNSAFE)["revert"]


@pytest.fixture(scope="session")
def mutants_in(vllm_runs):
    """``mutants_in(version)[name]`` -> ``{"rc", "rows"}`` of ``graphfix verify --json`` ("control": real)."""
    return lambda version: vllm_runs.get(version)["mutants"]


def check_left_as_shipped(runs, run, pid):
    """After plugin-loader run ``run`` (a flag off, ``GRAPHFIX=0`` or another plugin allowlisted), every
    target of ``pid`` is exactly as shipped, and the patch says why."""
    state = runs[run][pid]
    assert set(state["targets"].values()) == {"shipped"}, state
    if run == "other_plugin":
        assert runs[run]["register_calls"] == 0
    else:
        assert state["state"] == "disabled", state
