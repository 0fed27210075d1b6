"""Scenario for ``sglang.capture_stream``: which stream each graph capture pass runs on.

Real: ``DecodeCudaGraphRunner.capture`` and ``PrefillCudaGraphRunner.capture`` (pdmux branch included),
the module-level ``graph_capture`` of ``parallel_state`` and ``GroupCoordinator.graph_capture`` -- which
makes a new stream when none is passed -- and, where the release has them, the runtime-context stream
store and ``get_or_create_global_graph_capture_stream`` (0.5.19+).
Stand-ins (local objects; no attribute of torch or SGLang is replaced): a single-rank ``GroupCoordinator``
whose device module is a CPU stand-in of ``torch.cuda`` (``single_rank.py``; the published ``ServerArgs``
say ``device="cpu"``, so 0.5.19's store makes a CPU stream), the runners' constructors (attributes set by
hand), their ``warmup`` and per-shape loop (``_capture_one_stream``: records the runner's stream), and a
graph backend whose ``capture_session`` records the stream it is given.
Streams are reported as ``s0``, ``s1``, ... in order of first appearance (``pdmux0``/``pdmux1`` for the
pdmux stream groups' own streams); ``None`` means ``graph_capture`` was given no stream.
Cases ``guard_*`` check what graphfix adds beyond upstream (0.5.19 has no such guard): a capture that
starts while another one holds the shared stream is refused.
"""

import contextlib
import gc
import importlib
import threading
import time
from types import SimpleNamespace

from graphfix.scenarios import scenario
from sglang_graphfix.scenarios.single_rank import CpuStream, single_rank_process

RUNNERS = "sglang.srt.model_executor.runner."
STORE_NAME = "cuda_graph_capture"


class _Recorder:
    """Per capture pass (one ``graph_capture`` call on the TP group): the streams each party saw."""

    def __init__(self, pdmux_streams=()):
        self.lock, self.local = threading.Lock(), threading.local()
        self.labels = {id(s): f"pdmux{i}" for i, s in enumerate(pdmux_streams)}
        self.keep = list(pdmux_streams)  # ids stay unique while we hold the objects
        self.captures = []

    def label(self, stream):
        if stream is None:
            return None
        with self.lock:
            if id(stream) not in self.labels:
                self.keep.append(stream)
                self.labels[id(stream)] = f"s{sum(v.startswith('s') for v in self.labels.values())}"
            return self.labels[id(stream)]

    def begin(self, stream):
        self.local.current = {"phase": self.local.phase, "graph_capture": self.label(stream)}
        with self.lock:
            self.captures.append(self.local.current)

    def note(self, key, stream):
        self.local.current[key] = self.label(stream)


def _spy_on_group(group, rec):
    shipped = group.graph_capture

    def graph_capture(graph_capture_context=None, stream=None):
        if graph_capture_context is None:  # the TP group's call: a capture pass starts
            rec.begin(stream)
        return shipped(graph_capture_context, stream) if stream is not None else shipped(graph_capture_context)

    group.graph_capture = graph_capture


class _GraphBackend:
    def __init__(self, rec, hold=None):
        self.rec, self.hold = rec, hold

    @contextlib.contextmanager
    def capture_session(self, stream):
        self.rec.note("capture_session", stream)
        if self.hold is not None:
            self.hold()
        yield


def _runner(kind, rec, pdmux_streams=(), hold=None):
    import torch

    cls = {
        "decode": importlib.import_module(RUNNERS + "decode_cuda_graph_runner").DecodeCudaGraphRunner,
        "prefill": importlib.import_module(RUNNERS + "prefill_cuda_graph_runner").PrefillCudaGraphRunner,
    }[kind]
    runner = object.__new__(cls)  # constructors need a real model; capture() is the release's own
    vars(runner).update(
        model_runner=SimpleNamespace(server_args=SimpleNamespace(enable_cudagraph_gc=True,
                                                                 enable_torch_compile=False)),
        enable_torch_compile=False, enable_profile_cuda_graph=False, seq_len_fill_value=1,
        enable_pdmux=bool(pdmux_streams), stream_groups=[(None, s) for s in pdmux_streams],
        buffers=SimpleNamespace(seq_lens=torch.ones(1), seq_lens_cpu=torch.ones(1),
                                reset_index_buffers=lambda: None),
        backend=_GraphBackend(rec, hold), stream=None, warmup=lambda: None,
        model_context=contextlib.nullcontext,
        _capture_one_stream=lambda *stream_idx: rec.note("runner", runner.stream),
    )
    return runner


def _capture(kind, rec, **kwargs):
    outer = vars(rec.local).copy()
    rec.local.phase = kind
    try:
        _runner(kind, rec, **kwargs).capture()
    finally:
        vars(rec.local).update(outer)


def _kept_in(rec):
    """Where the stream the captures shared lives after them: 0.5.19 keeps it in the runtime-context
    store; graphfix does too where the release has one. Where it is not in a store but the next capture
    pass gets it again, graphfix holds it (no release without a store keeps one)."""
    rc = importlib.import_module("sglang.srt.runtime_context")
    if hasattr(rc, "get_resources") and rc.get_resources().streams.get(STORE_NAME) is not None:
        return f"runtime_context:{rec.label(rc.get_resources().streams[STORE_NAME])}"
    shared = rec.captures[-1].get("capture_session")
    _capture("decode", rec)
    return f"graphfix:{shared}" if rec.captures[-1].get("capture_session") == shared else "nowhere"


@contextlib.contextmanager
def _cheap_gc():
    """The runners' ``freeze_gc`` runs a full ``gc.collect()`` per capture pass (~0.8 s with SGLang loaded,
    nothing to do with streams). Freezing the objects that exist before the scenario -- what SGLang's own
    ``freeze_gc`` does during capture -- makes those collections cheap; unfrozen on exit (left alone
    where something else froze objects already). Nothing of the engine is replaced."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def _clean_store():
    """Leave the runtime-context stream store as it was."""
    rc = importlib.import_module("sglang.srt.runtime_context")
    streams = rc.get_resources().streams if hasattr(rc, "get_resources") else {}
    before = dict(streams)
    try:
        yield
    finally:
        streams.clear()
        streams.update(before)


def _nested(rec, where):
    """A prefill capture started while a decode capture holds its session open."""
    outcome = {}

    def other_capture():
        try:
            _capture("prefill", rec)
            outcome["nested_capture"] = "ran"
        except Exception as exc:  # noqa: BLE001 - the observable
            outcome["nested_capture"] = f"refused ({type(exc).__name__})"

    def hold():
        if where == "same_thread":
            other_capture()
        else:
            thread = threading.Thread(target=other_capture, name="other-capture")
            thread.start()
            thread.join()

    _capture("decode", rec, hold=hold)
    return outcome


def _concurrent(rec, n=6):
    """``n`` threads start a decode capture at the same moment; each holds its session briefly."""
    barrier, lock, live, overlapped, outcomes = threading.Barrier(n), threading.Lock(), [0], [False], []

    def hold():
        with lock:
            live[0] += 1
            overlapped[0] |= live[0] > 1
        time.sleep(0.05)
        with lock:
            live[0] -= 1

    def one():
        barrier.wait()
        try:
            _capture("decode", rec, hold=hold)
            outcomes.append("ran")
        except Exception as exc:  # noqa: BLE001 - the observable
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=one, name=f"capture-{i}") for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"captures_overlapped": overlapped[0], "outcomes": sorted(set(outcomes)),
            "streams_used": len({c.get("capture_session") for c in rec.captures})}


def _fixed(obs):
    if "nested_capture" in obs:  # guard cases: graphfix's behaviour, not upstream's
        return obs["nested_capture"].startswith("refused")
    if "captures_overlapped" in obs:
        return not obs["captures_overlapped"] and obs["streams_used"] == 1
    if "shared_stream_kept_in" in obs:
        return obs["shared_stream_kept_in"].endswith(":s0")
    sessions = [c["capture_session"] for c in obs["captures"]]
    if sessions[0].startswith("pdmux"):
        return sessions == [c["graph_capture"] for c in obs["captures"]]
    return {c[k] for c in obs["captures"] for k in ("graph_capture", "runner", "capture_session")} == {"s0"}


def _describe(obs):
    if "nested_capture" in obs:
        return f"nested capture {obs['nested_capture']}"
    if "captures_overlapped" in obs:
        return f"simultaneous captures overlapped: {obs['captures_overlapped']} ({obs['outcomes']})"
    if "shared_stream_kept_in" in obs:
        return f"shared capture stream kept in: {obs['shared_stream_kept_in']}"
    return ", ".join(f"{c['phase']} on {c['capture_session']} (given {c['graph_capture']})"
                     for c in obs["captures"])


@scenario(
    "sglang.capture_stream",
    cases={"decode_prefill_decode": {"case": "serial"}, "pdmux_decode": {"case": "pdmux"},
           "store": {"case": "store"}, "guard_other_thread": {"case": "other_thread"},
           "guard_reentry": {"case": "same_thread"}, "guard_concurrent_start": {"case": "concurrent"}},
    additions=("guard_other_thread", "guard_reentry", "guard_concurrent_start"),  # upstream has no guard
    fixed=_fixed,
    describe=_describe,
)
def observe(case):
    rec = _Recorder([CpuStream(), CpuStream()] if case == "pdmux" else ())
    with single_rank_process(enable_cudagraph_gc=True) as group, _clean_store(), _cheap_gc():
        _spy_on_group(group, rec)
        if case == "serial":
            for kind in ("decode", "prefill", "decode"):
                _capture(kind, rec)
        elif case == "pdmux":
            _capture("decode", rec, pdmux_streams=rec.keep[:2])
        elif case == "store":
            _capture("decode", rec)
            _capture("prefill", rec)
            return {"shared_stream_kept_in": _kept_in(rec)}
        elif case == "concurrent":
            return _concurrent(rec)
        else:
            return _nested(rec, case)
    return {"captures": rec.captures}
