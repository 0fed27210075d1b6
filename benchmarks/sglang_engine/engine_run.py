"""One real SGLang engine per process, on a CUDA machine (benchmark-side; nothing here is library code).

  python3 engine_run.py --write-configs DIR          (here) model configs + adaptive config into DIR
  python3 engine_run.py drive --models DIR --out OUT NAME[:ENV=VAL,ENV=VAL] ...
        (device) one fresh engine process per arrangement, one after another; logs + JSON into OUT
  python3 engine_run.py engine --models DIR --json FILE   (one engine; what `drive` runs)

The model is a Llama at an 8B-class shape (../engine_common.py: bf16, hidden 4096, 32 layers, 32/8 heads,
intermediate 14336, vocab 128256) with dummy weights, and a one-layer EAGLE draft (LlamaForCausalLMEagle); adaptive
speculative decoding with candidate steps [1, 3, 7]; triton attention; no tokenizer.
graphfix is *not* imported here: the engine's own plugin loader applies it in the scheduler process.
Env (per arrangement, set by ``drive`` from NAME:ENV=VAL,...): the GRAPHFIX* flags; BENCH_MAX_BS
(cuda_graph_max_bs_decode, default 128), BENCH_MAX_RUNNING (max_running_requests, default SGLang's),
BENCH_MEM_FRACTION (mem_fraction_static, default 0.4).
"""

import argparse
import json
import os
import sys
import threading
import time

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_here, os.path.dirname(_here)]  # engine_common.py: beside it on the device, in benchmarks/ here
from engine_common import drive, write_model  # noqa: E402

ADAPTIVE = {"1": {"candidate_steps": [1, 3, 7]}}
STEPS, DRAFT_TOKENS = 1, 2  # the static EAGLE shape; adaptive adds widths 2, 4, 8 tokens per request
MAX_BS = 128  # cuda_graph_max_bs_decode


def write_configs(root):
    write_model(root, "target")
    write_model(root, "draft", architectures=["LlamaForCausalLMEagle"], num_hidden_layers=1)
    with open(os.path.join(root, "adaptive.json"), "w") as f:
        json.dump(ADAPTIVE, f)


def engine_kwargs(models):
    return dict(
        model_path=os.path.join(models, "target"), load_format="dummy", skip_tokenizer_init=True,
        dtype="bfloat16", attention_backend="triton", sampling_backend="pytorch",
        mem_fraction_static=float(os.environ.get("BENCH_MEM_FRACTION", "0.4")),
        disable_prefill_cuda_graph=True, cuda_graph_max_bs_decode=int(os.environ.get("BENCH_MAX_BS", MAX_BS)),
        context_length=4096, **({"max_running_requests": int(os.environ["BENCH_MAX_RUNNING"])}
                                if os.environ.get("BENCH_MAX_RUNNING") else {}),
        speculative_algorithm="EAGLE", speculative_draft_model_path=os.path.join(models, "draft"),
        speculative_draft_load_format="dummy", speculative_num_steps=STEPS, speculative_eagle_topk=1,
        speculative_num_draft_tokens=DRAFT_TOKENS, speculative_adaptive=True,
        speculative_adaptive_config=os.path.join(models, "adaptive.json"), log_level="info",
    )


def _watch_children(result, path):
    """The engine's main process waits forever when its scheduler dies during start-up: notice that.
    Watched: the engine's spawned multiprocessing children (scheduler, detokenizer), not helpers."""
    import psutil

    me, seen = psutil.Process(), {}
    while not result.get("ready"):
        time.sleep(1.0)
        try:
            for child in me.children():
                try:
                    cmd = " ".join(child.cmdline())
                except psutil.Error:
                    continue
                if "spawn_main" in cmd and "resource_tracker" not in cmd:
                    seen.setdefault(child.pid, child)
            dead = []
            for pid, p in seen.items():
                try:
                    if not p.is_running() or p.status() == psutil.STATUS_ZOMBIE:
                        dead.append(pid)
                except psutil.NoSuchProcess:
                    dead.append(pid)
        except Exception as exc:  # keep watching
            sys.stderr.write(f"[bench] watchdog: {exc!r}\n")
            continue
        if dead and not result.get("ready"):
            result.update(outcome="child_died", dead_children=dead, wall_s=time.time() - result["t0"])
            with open(path, "w") as f:
                json.dump(result, f, indent=1, default=str)
            sys.stderr.write(f"[bench] engine child process(es) {dead} died during start-up\n")
            sys.stderr.flush()
            os._exit(3)


def engine(models, path, n_requests, max_new):
    result = {"t0": time.time(), "env": {k: v for k, v in os.environ.items() if k.startswith("GRAPHFIX")}}
    threading.Thread(target=_watch_children, args=(result, path), daemon=True).start()
    t = time.time()
    import sglang as sgl

    result["sglang"], result["import_s"] = sgl.__version__, time.time() - t
    t = time.time()
    llm = sgl.Engine(**engine_kwargs(models))
    result["ready"], result["start_s"] = True, time.time() - t
    prompts = [[(1000 + 37 * i + 11 * j) % 120000 for j in range(48)] for i in range(n_requests)]
    t = time.time()
    outs = llm.generate(input_ids=prompts, sampling_params={"max_new_tokens": max_new, "temperature": 0.0,
                                                            "ignore_eos": True})
    result["generate_s"] = time.time() - t
    result["completion_tokens"] = [len(o.get("output_ids") or []) for o in outs]
    result["meta"] = [{k: v for k, v in (o.get("meta_info") or {}).items()
                       if k in ("completion_tokens", "spec_verify_ct", "spec_accept_length")} for o in outs]
    result["outcome"] = "served" if all(n == max_new for n in result["completion_tokens"]) else "short"
    try:
        info = llm.get_server_info()
        result["max_total_num_tokens"] = info.get("max_total_num_tokens")
        result["internal_states"] = [{k: s.get(k) for k in ("avg_spec_accept_length", "memory_usage")
                                      if k in s} for s in info.get("internal_states", [])]
    except Exception as exc:  # optional detail only
        result["server_info_error"] = repr(exc)
    result["wall_s"] = time.time() - result["t0"]
    with open(path, "w") as f:
        json.dump(result, f, indent=1, default=str)
    sys.stderr.write(f"[bench] served: {result['outcome']} in {result['wall_s']:.1f} s\n")
    sys.stderr.flush()
    os._exit(0)  # the driver ends the engine's process group (no shutdown wait)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--write-configs":
        return write_configs(sys.argv[2])
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("engine", "drive"))
    ap.add_argument("--models", required=True)
    ap.add_argument("--json")
    ap.add_argument("--out")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("arrangements", nargs="*")
    a = ap.parse_intermixed_args()
    if a.mode == "engine":
        engine(a.models, a.json, a.requests, a.max_new)
    else:
        drive(__file__, a.out, a.arrangements, a.timeout,
              ["--models", a.models, "--requests", str(a.requests), "--max-new", str(a.max_new)])


if __name__ == "__main__":
    main()
