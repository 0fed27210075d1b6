"""sglang.capture_stream's per-pass graph-pool report (graphfix's own addition), on CPU.

The allocator snapshot is a stand-in with the fields torch.cuda.memory_snapshot() returns (segment_pool_id,
stream, device, total_size); the real one was read on the H200 (docs/benchmarks.md, "Real engine")."""

import contextlib
import logging
import sys
import types

import pytest

from sglang_graphfix import capture_stream as cs

GiB = 2**30


def seg(pool, stream, size, device=0):
    return {"segment_pool_id": pool, "stream": stream, "total_size": size, "allocated_size": 0, "device": device}


class FakeCuda:
    def __init__(self, segments, initialized=True):
        self.segments, self.calls, self.initialized = segments, 0, initialized

    def is_initialized(self):
        return self.initialized

    def current_device(self):
        return 0

    def memory_snapshot(self):
        self.calls += 1
        if isinstance(self.segments, Exception):
            raise self.segments
        return list(self.segments)


@pytest.fixture(autouse=True)
def graphfix_records(caplog):
    """caplog's handler on the graphfix logger itself (it may not propagate once routed into an engine)."""
    logger = logging.getLogger("graphfix")
    logger.addHandler(caplog.handler)
    yield
    logger.removeHandler(caplog.handler)


@pytest.fixture
def fake_torch(monkeypatch):
    def install(segments, initialized=True):
        cuda = FakeCuda(segments, initialized)
        monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
        return cuda

    monkeypatch.setattr(cs, "_report", {"passes": 0, "bytes": 0, "broken": False})
    return install


def lines(caplog):
    return list(dict.fromkeys(r.getMessage() for r in caplog.records if r.name == "graphfix"))


def test_report_counts_only_graph_pools_of_this_device(fake_torch, caplog):
    cuda = fake_torch([
        seg((0, 0), 7, 5 * GiB),  # the default pool: not graph memory
        seg((0, 1), 11, 2 * GiB), seg((0, 1), 11, GiB),  # one graph pool, one stream
        seg((0, 2), 11, GiB // 2),  # a second pool on the same stream
        seg((0, 3), 13, GiB, device=1),  # another device
    ])
    with caplog.at_level(logging.INFO, logger="graphfix"):
        cs.report_graph_pools()
    (line,) = lines(caplog)
    assert "capture pass 1: CUDA-graph pools hold 3.500 GiB (+3.500 GiB this pass) in 2 pool(s) on 1 stream(s)" in line
    cuda.segments.append(seg((0, 1), 17, GiB))
    with caplog.at_level(logging.INFO, logger="graphfix"):
        cs.report_graph_pools()
    assert "capture pass 2: CUDA-graph pools hold 4.500 GiB (+1.000 GiB this pass) in 2 pool(s) on 2 stream(s)" in lines(caplog)[-1]


def test_no_report_and_no_warning_without_a_cuda_context(fake_torch, caplog):
    cuda = fake_torch(RuntimeError("would fail"), initialized=False)  # e.g. CPU stand-ins, NPU/XPU runners
    with caplog.at_level(logging.INFO, logger="graphfix"):
        cs.report_graph_pools()
    assert cuda.calls == 0 and not lines(caplog)
    assert not cs._report["broken"]


def test_report_failure_never_reaches_the_engine_and_is_logged_once(fake_torch, caplog):
    cuda = fake_torch(RuntimeError("snapshot unavailable"))
    with caplog.at_level(logging.INFO, logger="graphfix"):
        cs.report_graph_pools()
        cs.report_graph_pools()
    assert cuda.calls == 1  # turned off after the first failure
    (line,) = lines(caplog)
    assert "graph-pool report turned off" in line and "snapshot unavailable" in line
    assert caplog.records[-1].levelno == logging.WARNING


def test_report_survives_a_snapshot_of_unexpected_shape(fake_torch, caplog):
    fake_torch([{"segment_pool_id": (0, 1)}])  # no stream / size fields
    with caplog.at_level(logging.INFO, logger="graphfix"):
        cs.report_graph_pools()
    assert "turned off" in lines(caplog)[0]


def test_one_report_after_each_successful_capture_and_none_after_a_failed_one(fake_torch, caplog, monkeypatch):
    cuda = fake_torch([seg((0, 1), 11, GiB)])
    stream = object()
    monkeypatch.setattr(cs, "_shared_stream", lambda: stream)
    seen = []

    @contextlib.contextmanager
    def graph_capture(stream=None):
        seen.append(stream)
        yield "ctx"

    with caplog.at_level(logging.INFO, logger="graphfix"):
        with cs._share_capture_stream(graph_capture, None, (), {}) as ctx:
            assert ctx == "ctx" and cuda.calls == 0  # nothing during the capture itself
        assert cuda.calls == 1 and seen == [stream]
        with pytest.raises(ValueError):
            with cs._share_capture_stream(graph_capture, None, (), {}):
                raise ValueError("capture failed")
    assert cuda.calls == 1 and len(lines(caplog)) == 1
    assert not cs._busy  # the shared stream is free again after the failure
