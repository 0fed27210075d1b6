"""The shipped capture_stream scenario (what `graphfix verify` runs in the user's environment) changes no
attribute of torch or SGLang, not even for its duration, except the parallel-group globals that
``graph_capture()`` insists on (``sglang_graphfix/scenarios/single_rank.py``), and leaves them restored."""

import json

import pytest

from tests.conftest import ROOT, release

pytestmark = pytest.mark.engine
PARALLEL_STATE = "sglang.srt.distributed.parallel_state."


def test_capture_stream_scenario_touches_only_the_parallel_groups():
    # 0.5.19: its own stream store makes the capture stream (through torch.get_device_module), the
    # path that once needed torch.cuda.Stream replaced
    proc = release("sglang", "0.5.19").run(
        ["python", "tests/inside/scenario_globals.py", "sglang", "sglang.capture_stream"],
        cwd=str(ROOT), check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["errors"] == {} and out["watched"] > 100, out
    assert out["assigned"] and all(a.startswith(PARALLEL_STATE + "_") for a in out["assigned"]), out["assigned"]
    assert not [c for c in out["changed_after"] if c.startswith("torch") or c.startswith(PARALLEL_STATE)], out
