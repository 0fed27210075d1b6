"""sglang.capture_stream reaches every speculative graph runner, in every affected release.

Revealed by the real 0.5.16 engine on the H200 (docs/benchmarks.md, "Real engine"): with adaptive EAGLE,
8 capture passes from three runner classes (target verify, EAGLE draft, EAGLE draft-extend; the adaptive
states build more of each) all ran on the one shared stream. That holds only because every speculative
runner inherits ``DecodeCudaGraphRunner.capture()``, whose module global ``graph_capture`` graphfix wraps.
A release where a runner brings its own ``capture()`` would escape the patch silently: this test says so.
"""

import pytest

from tests.conftest import run_inside
from tests.sglang.conftest import affected

PID = "sglang.capture_stream"
DECODE = "sglang.srt.model_executor.runner.decode_cuda_graph_runner.DecodeCudaGraphRunner"
pytestmark = pytest.mark.engine


@pytest.mark.parametrize("version", affected(PID))
def test_every_speculative_runner_captures_through_the_wrapped_graph_capture(version):
    seen = run_inside("sglang", version, ["python", "tests/inside/capture_runners.py"])
    assert not seen["import_failed"], seen["import_failed"]
    runners = seen["runners"]
    assert {"eagle_draft_cuda_graph_runner.EAGLEDraftCudaGraphRunner",
            "eagle_draft_extend_cuda_graph_runner.EAGLEDraftExtendCudaGraphRunner"} <= set(runners), runners
    own = {name: owner for name, owner in runners.items() if owner != DECODE}
    assert not own, f"runners with their own capture(), not covered by {PID}: {own}"
    assert seen["decode_graph_capture_wrapped_by_graphfix"]
