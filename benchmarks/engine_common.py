"""Shared by benchmarks/*_engine/engine_run.py (benchmark-side; not library code): the dummy-weight model
shape, and the driver that runs one fresh engine process per arrangement, one after another, each in its own
process session, ended with its children afterwards.

An arrangement is ``NAME[:ENV=VAL,ENV=VAL...]``; the engine process gets those variables, plus
``BENCH_HOOK_OUT=OUT/NAME.hook.jsonl`` for the benchmark hook (sitecustomize.py), and writes
``OUT/NAME.log`` (stdout + stderr) and ``OUT/NAME.json`` (its own result). ``OUT/summary.json`` lists them.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

# Llama at an 8B-class shape (bf16), loaded with dummy weights: no download, no tokenizer
LLAMA_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
    "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
    "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": 128000, "eos_token_id": 128001,
    "attention_bias": False, "mlp_bias": False, "initializer_range": 0.02,
}


def write_model(root, name, **overrides):
    """ROOT/NAME/config.json: LLAMA_8B with OVERRIDES; returns the folder."""
    path = os.path.join(root, name)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({**LLAMA_8B, **overrides}, f, indent=1)
    return path


def parse_arrangement(spec):
    """``NAME:A=1,B=2`` -> (``NAME``, ``A=1,B=2``, {"A": "1", "B": "2"})."""
    name, _, extra = spec.partition(":")
    env = {}
    for kv in filter(None, extra.split(",")):
        k, _, v = kv.partition("=")
        env[k] = v
    return name, extra, env


def wait_gpu_free(limit_s=60, below_mib=2000):
    """Until the ended engine's GPU memory is back (the next engine sizes itself from free memory)."""
    t = time.time()
    while time.time() - t < limit_s:
        try:
            used = int(subprocess.check_output(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                               text=True).split()[0])
        except Exception:
            used = 0
        if used < below_mib:
            return
        time.sleep(1)


def drive(script, out, arrangements, timeout, engine_args, budget_s=None):
    """Run ``python script engine --json OUT/NAME.json *engine_args`` once per arrangement.
    ``budget_s``: skip the arrangements that would start after that many seconds (recorded as skipped)."""
    os.makedirs(out, exist_ok=True)
    summary, t_all = [], time.time()
    for spec in arrangements:
        name, extra, env_extra = parse_arrangement(spec)
        if budget_s is not None and time.time() - t_all > budget_s:
            summary.append({"name": name, "env": extra, "rc": "skipped (driver budget spent)"})
            print(f"[bench] {name}: skipped, {time.time() - t_all:.0f} s of {budget_s} s spent", flush=True)
            continue
        env = {**os.environ, **env_extra, "BENCH_HOOK_OUT": os.path.join(out, f"{name}.hook.jsonl")}
        log, js = os.path.join(out, f"{name}.log"), os.path.join(out, f"{name}.json")
        t = time.time()
        with open(log, "w") as f:
            proc = subprocess.Popen([sys.executable, os.path.abspath(script), "engine", "--json", js, *engine_args],
                                    stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            try:
                rc = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                rc = "timeout"
            try:  # the engine's own children (engine core, scheduler, ...) live in the session started here
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        row = {"name": name, "env": extra, "rc": rc, "elapsed_s": round(time.time() - t, 1)}
        if os.path.exists(js):
            with open(js) as f:
                row.update({k: v for k, v in json.load(f).items() if k != "env"})
        summary.append(row)
        print(f"[bench] {name}: rc={rc} outcome={row.get('outcome')} {row['elapsed_s']} s", flush=True)
        wait_gpu_free()
        with open(os.path.join(out, "summary.json"), "w") as f:  # after each: a later kill loses nothing
            json.dump(summary, f, indent=1, default=str)
    return summary


# --- log reading, back on the CPU machine (report.py) ---
# graphfix's own lines: its summary names it; a decision reads "<engine>.<patch>: <state> (<reason>)"
GRAPHFIX = re.compile(r"\bgraphfix\b|\b(?:vllm|sglang)\.[a-z_]+: [a-z-]+ \(")
ERROR = re.compile(r"^(?:\S+ )*?(?P<err>(?:AssertionError|RuntimeError|ValueError|torch\.OutOfMemoryError|"
                   r"[A-Za-z_.]*Error): .+)$")


def is_graphfix_line(line):
    """A line graphfix logged (not one of the benchmark hook's own)."""
    return bool(GRAPHFIX.search(line)) and "[bench-hook" not in line


def graphfix_lines(text, limit=400):
    return [line.strip()[:limit] for line in text.splitlines() if is_graphfix_line(line)]


def error_of(line):
    """The 'SomethingError: message' part of a log line, or None."""
    m = ERROR.search(line.strip())
    return m["err"][:400] if m and "Traceback" not in line else None


def errors_in(text):
    return list(dict.fromkeys(e for e in map(error_of, text.splitlines()) if e))
