"""The real-engine benchmarks' shared helpers (benchmarks/engine_common.py) and the vLLM report's reading of
the hook records, on lines and records as the H200 runs wrote them (benchmarks/results/vllm_engine_h200/)."""

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "benchmarks")
RESULTS = os.path.join(BENCH, "results", "vllm_engine_h200")
sys.path.insert(0, BENCH)

import engine_common as ec  # noqa: E402


def _module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_arrangement_names_and_environment():
    assert ec.parse_arrangement("default") == ("default", "", {})
    name, extra, env = ec.parse_arrangement("pw_on:BENCH_CG_MODE=FULL_AND_PIECEWISE,GRAPHFIX_X=on")
    assert (name, extra) == ("pw_on", "BENCH_CG_MODE=FULL_AND_PIECEWISE,GRAPHFIX_X=on")
    assert env == {"BENCH_CG_MODE": "FULL_AND_PIECEWISE", "GRAPHFIX_X": "on"}


def test_graphfix_lines_and_errors_in_engine_logs():
    worker = ("(EngineCore pid=1512) INFO 11-30 17:52:43 [logs.py:65] graphfix: vllm.spec_prefill_metadata: "
              "applied (vllm 0.25.1: draft prefill capture reuses the attention states saved by the target capture)")
    assert ec.is_graphfix_line(worker)
    assert ec.is_graphfix_line("[2026-11-30 16:40:01] sglang.capture_stream: applied (one stream)")
    assert not ec.is_graphfix_line("[bench-hook pid=3] graphfix-like words from the hook")
    assert not ec.is_graphfix_line("(EngineCore pid=1) INFO [gpu_worker.py:360] Using V2 Model Runner")
    assert ec.error_of("(EngineCore pid=1) RuntimeError: CUDA error: an illegal memory access") == \
        "RuntimeError: CUDA error: an illegal memory access"
    assert ec.error_of("Traceback (most recent call last):") is None
    assert ec.errors_in("a ValueError: x\nb ValueError: x\nc KeyError: y") == ["ValueError: x", "KeyError: y"]


def test_vllm_report_reads_the_recorded_draft_prefill_observable():
    report = _module(os.path.join(BENCH, "vllm_engine", "report.py"), "vllm_engine_report")
    shipped = report.parse_hook(os.path.join(RESULTS, "call10", "spec_off.hook.jsonl"))["draft_prefill"]
    patched = report.parse_hook(os.path.join(RESULTS, "call10", "default.hook.jsonl"))["draft_prefill"]
    assert (shipped["warmups"], shipped["warmup_qsl_ok"], shipped["outputs_equal"]) == (36, 1, 1)
    assert shipped["max_abs_diff"] > 0 and shipped["example"]["qsl_head"][:3] == [0, 3, 3]
    assert (patched["warmups"], patched["warmup_qsl_ok"], patched["outputs_equal"]) == (36, 36, 36)
    assert patched["max_abs_diff"] == 0
    run = report.parse_log(os.path.join(RESULTS, "call10", "uniform_on.log"))
    assert run["v2_runner"] and run["kv_gib"] == 52.4 and run["captured"]["gib"] == 0.59
    assert any("vllm.uniform_decode_sizes: applied" in line for line in run["graphfix_lines"])
