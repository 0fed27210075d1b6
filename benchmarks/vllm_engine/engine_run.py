"""One real vLLM 0.25.1 engine (``LLM``) per process, on a CUDA machine (benchmark-side; not library code).

  python3 engine_run.py --write-configs DIR           (here) target + EAGLE draft config.json into DIR
  python3 engine_run.py --print-kwargs DIR            (here) the LLM(...) arguments, as JSON (dry run)
  python3 engine_run.py drive --models DIR --out OUT NAME[:ENV=VAL,...] ...
        (device) one fresh engine process per arrangement, one after another; logs + JSON into OUT
  python3 engine_run.py engine --models DIR --json FILE   (one engine; what ``drive`` runs)

Model: Llama at an 8B-class shape (bf16, dummy weights; ../engine_common.py) and a one-layer EAGLE draft
(a LlamaForCausalLM config, which vLLM turns into EagleLlamaForCausalLM), num_speculative_tokens K;
model runner V2; FULL CUDA graphs for uniform decode (cudagraph_mode FULL_DECODE_ONLY, torch.compile off,
so each start needs no compilation); FLASH_ATTN (FlashAttention 3 on the H200); no tokenizer.
graphfix is *not* imported here: vLLM's ``vllm.general_plugins`` loader applies it in every process.
Workload: MAX_SEQS requests decoding together, i.e. the widest uniform-decode batch MAX_SEQS * (1 + K)
tokens (a short warm-up generate first; then the timed one).
Env per arrangement (set by ``drive`` from NAME:ENV=VAL,...): the GRAPHFIX* flags; BENCH_MAX_SEQS (100),
BENCH_K (2), BENCH_GPU_UTIL (0.5), BENCH_CG_MODE (FULL_DECODE_ONLY), BENCH_COMPILE_MODE (0), BENCH_MAX_NEW (128),
BENCH_PROMPT (32 tokens).
"""

import argparse
import json
import os
import sys
import time

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_here, os.path.dirname(_here)]  # engine_common.py: beside it on the device, in benchmarks/ here
from engine_common import drive, write_model  # noqa: E402

MAX_SEQS, K = 100, 2


def write_configs(root):
    write_model(root, "target")
    write_model(root, "draft", num_hidden_layers=1)


def settings(env=os.environ):
    return {"max_seqs": int(env.get("BENCH_MAX_SEQS", MAX_SEQS)), "k": int(env.get("BENCH_K", K)),
            "gpu_util": float(env.get("BENCH_GPU_UTIL", "0.5")), "cg_mode": env.get("BENCH_CG_MODE", "FULL_DECODE_ONLY"),
            "compile_mode": int(env.get("BENCH_COMPILE_MODE", "0")), "max_new": int(env.get("BENCH_MAX_NEW", "128")),
            "prompt": int(env.get("BENCH_PROMPT", "32"))}


def llm_kwargs(models, s):
    return dict(
        model=os.path.join(models, "target"), load_format="dummy", skip_tokenizer_init=True, dtype="bfloat16",
        seed=0, gpu_memory_utilization=s["gpu_util"], max_model_len=2048, max_num_seqs=s["max_seqs"],
        speculative_config={"method": "eagle", "model": os.path.join(models, "draft"),
                            "num_speculative_tokens": s["k"]},
        compilation_config={"mode": s["compile_mode"], "cudagraph_mode": s["cg_mode"]},
    )


def prompts(n, length, salt=0):
    return [{"prompt_token_ids": [(1000 + 37 * i + 11 * j + salt) % 120000 for j in range(length)]} for i in range(n)]


def engine(models, path):
    s = settings()
    result = {"t0": time.time(), "settings": s,
              "env": {k: v for k, v in os.environ.items() if k.startswith(("GRAPHFIX", "VLLM_"))}}
    # no child watchdog: vLLM's front end raises by itself when its engine-core process dies during start-up
    # (a watchdog over all children misread vLLM's short-lived helper processes as a dead engine, run 1)
    t = time.time()
    import vllm
    from vllm import LLM, SamplingParams

    result["vllm"], result["import_s"] = vllm.__version__, time.time() - t
    t = time.time()
    llm = LLM(**llm_kwargs(models, s))
    result["ready"], result["start_s"] = True, time.time() - t
    n = s["max_seqs"]
    warm = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True, detokenize=False)
    t = time.time()
    llm.generate(prompts(n, s["prompt"], salt=7), warm, use_tqdm=False)
    result["warmup_generate_s"] = time.time() - t
    params = SamplingParams(max_tokens=s["max_new"], temperature=0.0, ignore_eos=True, detokenize=False)
    t = time.time()
    outs = llm.generate(prompts(n, s["prompt"]), params, use_tqdm=False)
    result["generate_s"] = time.time() - t
    counts = [len(o.outputs[0].token_ids) for o in outs]
    result["requests"], result["completion_tokens"] = n, sum(counts)
    result["output_tok_per_s"] = round(sum(counts) / result["generate_s"], 1)
    result["outcome"] = "served" if all(c == s["max_new"] for c in counts) else "short"
    result["wall_s"] = time.time() - result["t0"]
    with open(path, "w") as f:
        json.dump(result, f, indent=1, default=str)
    sys.stderr.write(f"[bench] served: {result['outcome']} {result['output_tok_per_s']} tok/s, "
                     f"{result['wall_s']:.1f} s\n")
    sys.stderr.flush()
    os._exit(0)  # the driver ends the engine's process group (no shutdown wait)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--write-configs":
        return write_configs(sys.argv[2])
    if len(sys.argv) == 3 and sys.argv[1] == "--print-kwargs":
        return print(json.dumps(llm_kwargs(sys.argv[2], settings()), indent=1))
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("engine", "drive"))
    ap.add_argument("--models", required=True)
    ap.add_argument("--json")
    ap.add_argument("--out")
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--budget", type=float, default=None, help="start no arrangement after this many seconds")
    ap.add_argument("arrangements", nargs="*")
    a = ap.parse_intermixed_args()
    if a.mode == "engine":
        engine(a.models, a.json)
    else:
        drive(__file__, a.out, a.arrangements, a.timeout, ["--models", a.models], budget_s=a.budget)


if __name__ == "__main__":
    main()
