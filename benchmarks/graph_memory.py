#!/usr/bin/env python3
"""CUDA-graph pool memory of a released SGLang, graphfix patches off vs on, on any CUDA GPU.

Drives the release's real ``DecodeCudaGraphRunner.capture()`` / ``PrefillCudaGraphRunner.capture()``
(their ``graph_capture()`` stream handling included), the real ``FullCudaGraphBackend`` (decode) and
``BreakableCudaGraphBackend`` (prefill) and ``runner_utils.pool``, around a toy bf16 MLP that is
wide enough for graph scratch to dominate. Only the per-shape batch building of the runners is
replaced (see ``harness/sglang_process.py``). Every arrangement runs in a fresh process.

Passes (each one runner with its own backend, captured serially in the order given):
  prefill  target model, prefill-like token counts, BreakableCudaGraphBackend
  decode   target model, decode-like batch sizes x tokens per request, FullCudaGraphBackend
  draft    draft model (fewer layers, same width), decode-like shapes, FullCudaGraphBackend
Arrangements: prefill_decode = prefill, decode;  target_draft = decode, draft;
serve = prefill, decode, draft.  Singles (one pass alone) give the floor.

Measured (allocator statistics, not nvidia-smi): bytes of the segments that belong to private
(graph) pools in ``torch.cuda.memory_snapshot()``, grouped by pool and stream, after each pass;
and ``torch.cuda.memory_reserved()`` deltas. Floor of an arrangement = the largest of its passes
measured alone.

  driver:  python benchmarks/graph_memory.py run --sglang 0.5.14=/path/to/site14 \
               --sglang 0.5.16=/path/to/site16 --out results.json
  one:     python benchmarks/graph_memory.py one --arrangement serve --patches graph_pool,capture_stream
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import gc
import json
import os
import platform
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:  # run as a script from benchmarks/: graphfix and harness come from the checkout
    sys.path.insert(0, REPO)

ARRANGEMENTS = {
    "prefill": ("prefill",),
    "decode": ("decode",),
    "draft": ("draft",),
    "prefill_decode": ("prefill", "decode"),
    "target_draft": ("decode", "draft"),
    "serve": ("prefill", "decode", "draft"),
}
SINGLES = ("prefill", "decode", "draft")

# What each release is benchmarked for: (arrangement, patch sets) in run order.
PLANS = {
    # 0.5.14: both graph_pool and capture_stream are needed; each alone is shown too.
    "0.5.14": [
        ("prefill_decode", ["", "graph_pool", "capture_stream", "graph_pool,capture_stream"]),
        ("target_draft", ["", "graph_pool", "capture_stream", "graph_pool,capture_stream"]),
        ("serve", ["", "graph_pool,capture_stream"]),
    ],
    # 0.5.15-0.5.18 already share the pool (upstream fix); capture_stream alone.
    "default": [
        ("prefill_decode", ["", "capture_stream"]),
        ("target_draft", ["", "capture_stream"]),
        ("serve", ["", "capture_stream"]),
    ],
}

DEFAULTS = dict(
    hidden=8192, inter_mult=4, layers=4, draft_layers=1, tokens_per_bs=4,
    prefill_tokens=[256, 512, 1024, 2048],
    decode_bs=[1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256],
    prefill_backend="breakable", decode_backend="full",
)


# ---------------------------------------------------------------------------------------------
# one arrangement, in this process
# ---------------------------------------------------------------------------------------------
def _pool_segments(torch):
    """Private-pool (CUDA graph) segments: total bytes, grouped by (pool id, stream)."""
    groups = {}
    for seg in torch.cuda.memory_snapshot():
        pool = tuple(seg.get("segment_pool_id", (0, 0)))
        if pool == (0, 0):
            continue
        key = (pool, seg["stream"])
        g = groups.setdefault(key, {"pool": list(pool), "stream": seg["stream"], "bytes": 0,
                                    "allocated": 0, "segments": 0})
        g["bytes"] += seg["total_size"]
        g["allocated"] += seg["allocated_size"]
        g["segments"] += 1
    rows = sorted(groups.values(), key=lambda g: (g["pool"], g["stream"]))
    return {
        "bytes": sum(g["bytes"] for g in rows),
        "allocated": sum(g["allocated"] for g in rows),
        "pools": len({tuple(g["pool"]) for g in rows}),
        "streams": len({g["stream"] for g in rows}),
        "groups": rows,
    }


def run_one(cfg: dict) -> dict:
    t_start = time.time()
    from harness import sglang_process as P

    flags = P.set_patch_flags([p for p in cfg["patches"].split(",") if p])
    env = P.install_standins()
    import graphfix

    modules = P.import_available_patches()
    graphfix.apply("sglang")  # before sglang is imported: post-import hooks install the wrappers

    import torch

    torch.cuda.set_device(0)
    BenchDecodeRunner, BenchPrefillRunner = P.bench_runner_classes()
    P.install_single_rank_groups()
    t_import = time.time() - t_start
    status = P.graphfix_rows()

    hidden, inter = cfg["hidden"], cfg["hidden"] * cfg["inter_mult"]
    dev, dtype = "cuda", torch.bfloat16

    class ToyMLP(torch.nn.Module):
        """Residual GELU MLP blocks; activations of tokens x inter dominate graph scratch."""

        def __init__(self, layers, seed):
            super().__init__()
            g = torch.Generator(device=dev).manual_seed(seed)
            self.w1 = [torch.randn(hidden, inter, generator=g, device=dev, dtype=dtype) * hidden ** -0.5
                       for _ in range(layers)]
            self.w2 = [torch.randn(inter, hidden, generator=g, device=dev, dtype=dtype) * inter ** -0.5
                       for _ in range(layers)]

        def forward(self, x):
            for w1, w2 in zip(self.w1, self.w2):
                x = x + torch.nn.functional.gelu(x @ w1) @ w2
            return x

    target = ToyMLP(cfg["layers"], seed=1)
    draft = ToyMLP(cfg["draft_layers"], seed=2)
    decode_tokens = max(cfg["decode_bs"]) * cfg["tokens_per_bs"]
    prefill_tokens = max(cfg["prefill_tokens"])
    gen = torch.Generator(device=dev).manual_seed(3)

    def static(n):  # graph inputs: allocated before the measurement starts, kept alive
        return torch.randn(n, hidden, generator=gen, device=dev, dtype=dtype)

    def make(name):
        if name == "prefill":
            mr = P.fake_model_runner(target)
            return BenchPrefillRunner(mr, static(prefill_tokens), static(prefill_tokens),
                                      cfg["prefill_tokens"], cfg["prefill_backend"])
        model = target if name == "decode" else draft
        mr = P.fake_model_runner(model)
        return BenchDecodeRunner(mr, static(decode_tokens), static(decode_tokens), cfg["decode_bs"],
                                 cfg["tokens_per_bs"], cfg["decode_backend"])

    passes = ARRANGEMENTS[cfg["arrangement"]]
    runners = [make(name) for name in passes]
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.empty_cache()
    base_reserved, base_alloc = torch.cuda.memory_reserved(), torch.cuda.memory_allocated()
    rows = []
    for name, runner in zip(passes, runners):
        t0 = time.time()
        P.capture(runner, capture_mode=not name == "prefill")
        torch.cuda.synchronize()
        seg = _pool_segments(torch)
        rows.append({
            "pass": name, "runner": type(runner).__mro__[1].__name__,
            "backend": type(runner.backend).__name__,
            "shapes": list(getattr(runner, "capture_bs", None) or runner.capture_num_tokens),
            "graphs": len(runner.backend._graphs),
            "stream": runner.stream.cuda_stream if runner.stream is not None else None,
            "pool": list(runner.backend._pool) if runner.backend._pool is not None else None,
            "pool_bytes_cumulative": seg["bytes"], "pools": seg["pools"], "streams": seg["streams"],
            "reserved_delta_cumulative": torch.cuda.memory_reserved() - base_reserved,
            "capture_s": round(time.time() - t0, 2),
        })
    final = _pool_segments(torch)
    reserved_delta = torch.cuda.memory_reserved() - base_reserved
    allocated_delta = torch.cuda.memory_allocated() - base_alloc
    gc.collect()
    torch.cuda.empty_cache()
    reserved_delta_empty = torch.cuda.memory_reserved() - base_reserved

    # Sanity: every pass's largest graph still replays to what the model computes eagerly.
    checks = []
    for name, runner in zip(passes, runners):
        size = max(getattr(runner, "capture_bs", None) or runner.capture_num_tokens)
        n = runner.tokens(size)
        runner.static_x[:n].copy_(static(n))
        with runner.backend.replay_session():
            out = runner.backend.replay(runner.shape_key(size), None)
        out = out[:n].float().clone()
        ref = runner.model_runner.model(runner.static_x[:n]).float()
        err = ((out - ref).norm() / ref.norm()).item()
        checks.append({"pass": name, "size": size, "rel_err": err, "ok": err < 2e-2})

    applied = {r["id"]: r["state"] for r in status}
    requested = [p if "." in p else f"sglang.{p}" for p in cfg["patches"].split(",") if p]
    return {
        "arrangement": cfg["arrangement"], "passes": list(passes), "patches": cfg["patches"] or "off",
        "requested_applied": {p: applied.get(p, "missing") for p in requested},
        "sglang": P.sglang_version(), "flags": flags, "patch_modules": modules, "graphfix": status,
        "stand_ins": env,
        "per_pass": rows,
        "graph_pool_bytes": final["bytes"], "graph_pool_allocated": final["allocated"],
        "pools": final["pools"], "streams": final["streams"], "groups": final["groups"],
        "reserved_delta": reserved_delta, "reserved_delta_after_empty_cache": reserved_delta_empty,
        "allocated_delta": allocated_delta, "replay_checks": checks,
        "import_s": round(t_import, 1), "wall_s": round(time.time() - t_start, 1),
    }


# ---------------------------------------------------------------------------------------------
# driver: every arrangement in a fresh process
# ---------------------------------------------------------------------------------------------
def _worker_cmd(arrangement, patches, args):
    cmd = [sys.executable, os.path.abspath(__file__), "one", "--arrangement", arrangement,
           "--patches", patches]
    for key in ("hidden", "inter_mult", "layers", "draft_layers", "tokens_per_bs",
                "prefill_backend", "decode_backend"):
        cmd += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    cmd += ["--prefill-tokens", ",".join(map(str, args.prefill_tokens))]
    cmd += ["--decode-bs", ",".join(map(str, args.decode_bs))]
    return cmd


def _worker_env(path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([path, REPO] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("TQDM_DISABLE", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def warm_imports():
    """Import what a worker imports (writes the bytecode caches once, before workers run side by side)."""
    from harness import sglang_process as P

    P.install_standins()
    P.import_available_patches()
    P.bench_runner_classes()
    print("warm:", P.sglang_version())


def _run_worker(index, version, path, arrangement, patches, args, repeat):
    env = _worker_env(path)
    t0 = time.time()
    proc = subprocess.run(_worker_cmd(arrangement, patches, args), env=env, capture_output=True,
                          text=True, timeout=args.worker_timeout)
    result = None
    for line in proc.stdout.splitlines():
        if line.startswith("GRAPHMEM_JSON "):
            result = json.loads(line[len("GRAPHMEM_JSON "):])
    if result is None:
        result = {"arrangement": arrangement, "patches": patches or "off",
                  "error": f"worker exit {proc.returncode}", "stderr_tail": proc.stderr[-3000:]}
    result.update(job=index, version=version, repeat=repeat, process_s=round(time.time() - t0, 1))
    return result


def _gpu_meta():
    meta = {"python": platform.python_version(), "host": platform.node()}
    try:
        import torch

        meta.update(torch=torch.__version__, cuda=torch.version.cuda,
                    gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
    except Exception as exc:  # noqa: BLE001
        meta["torch_error"] = repr(exc)
    try:  # driver version only; memory numbers never come from nvidia-smi
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        meta["nvidia_smi"] = out.stdout.strip()
    except Exception as exc:  # noqa: BLE001
        meta["nvidia_smi"] = repr(exc)
    return meta


def summarize(runs):
    """Per release and arrangement: each patch set's graph-pool bytes, the floor, the ratios.

    floor = the largest single pass of the arrangement measured alone (what one pool on one stream
    should need: the larger phase, not the sum); floor_with_outputs adds the bytes the other passes'
    graphs keep allocated in the pool after capture (their live outputs), a stricter lower bound.
    """
    out = {}
    for version in sorted({r["version"] for r in runs}):
        vr = [r for r in runs if r["version"] == version and "error" not in r]
        singles, held = {}, {}
        for r in vr:
            if r["arrangement"] in SINGLES and r["patches"] == "off":
                singles.setdefault(r["arrangement"], []).append(r["graph_pool_bytes"])
                held.setdefault(r["arrangement"], []).append(r["graph_pool_allocated"])
        single = {k: max(v) for k, v in singles.items()}
        single_held = {k: max(v) for k, v in held.items()}
        rows = {}
        for arrangement, passes in ARRANGEMENTS.items():
            if arrangement in SINGLES:
                continue
            by_mode = {}
            for r in vr:
                if r["arrangement"] == arrangement:
                    by_mode.setdefault(r["patches"], []).append(r)
            if not by_mode:
                continue
            floor = total = floor_out = None
            if all(p in single for p in passes):
                top = max(passes, key=lambda p: single[p])
                floor, total = single[top], sum(single[p] for p in passes)
                floor_out = floor + sum(single_held[p] for p in passes if p != top)
            modes = {}
            for mode, rs in by_mode.items():
                vals = [r["graph_pool_bytes"] for r in rs]
                modes[mode] = {
                    "graph_pool_bytes": max(vals), "all_repeats": vals,
                    "reserved_delta": max(r["reserved_delta"] for r in rs),
                    "per_pass_cumulative": [p["pool_bytes_cumulative"] for p in rs[0]["per_pass"]],
                    "pools": rs[0]["pools"], "streams": rs[0]["streams"],
                    "requested_applied": rs[0]["requested_applied"],
                    "replay_ok": all(c["ok"] for r in rs for c in r["replay_checks"]),
                }
            off = modes.get("off", {}).get("graph_pool_bytes")
            for mode, m in modes.items():
                v = m["graph_pool_bytes"]
                m["saving_pct_of_off"] = None if not off else round(100.0 * (off - v) / off, 1)
                m["over_floor"] = None if not floor else round(v / floor, 3)
                m["over_floor_with_outputs"] = None if not floor_out else round(v / floor_out, 3)
            rows[arrangement] = {"passes": list(passes), "floor_bytes": floor,
                                 "floor_with_outputs_bytes": floor_out,
                                 "sum_of_singles_bytes": total, "modes": modes}
        out[version] = {"singles_bytes": single, "singles_held_bytes": single_held, "arrangements": rows}
    return out


def run_all(args):
    t0 = time.time()
    jobs = []
    for spec in args.sglang:
        version, _, path = spec.partition("=")
        plan = PLANS.get(version, PLANS["default"])
        for repeat in range(args.repeat):
            for name in SINGLES:
                jobs.append((version, path, name, "", repeat))
            for arrangement, modes in plan:
                for patches in modes:
                    jobs.append((version, path, arrangement, patches, repeat))
    t_warm = time.time()
    warm = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "warm"], env=_worker_env(spec.partition("=")[2]))
            for spec in args.sglang]
    for proc in warm:
        proc.wait()
    print(f"graph_memory: bytecode caches warmed in {time.time() - t_warm:.0f} s; "
          f"{len(jobs)} fresh processes, {args.jobs} at a time", flush=True)
    runs = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(_run_worker, i, *job[:4], args, job[4]) for i, job in enumerate(jobs)]
        for fut in concurrent.futures.as_completed(futures):
            r = fut.result()
            runs.append(r)
            tag = f"{r['version']} {r['arrangement']:<15} {r['patches']:<28}"
            if "error" in r:
                print(f"  {tag} ERROR {r['error']}\n{r.get('stderr_tail', '')[-1500:]}", flush=True)
            else:
                print(f"  {tag} pool {r['graph_pool_bytes'] / 2**20:8.1f} MiB  pools {r['pools']} "
                      f"streams {r['streams']}  applied {r['requested_applied']}  ({r['process_s']} s)",
                      flush=True)
    runs.sort(key=lambda r: r["job"])
    result = {
        "meta": dict(_gpu_meta(), argv=sys.argv, started=datetime.datetime.now(datetime.timezone.utc).isoformat(),
                     config={k: getattr(args, k) for k in DEFAULTS}, repeat=args.repeat,
                     isolation="one fresh python process per arrangement and patch set"),
        "runs": runs, "summary": summarize(runs), "wall_s": round(time.time() - t0, 1),
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)
    print_table(result["summary"])
    print(f"graph_memory: wrote {args.out} ({result['wall_s']} s)")
    return 0 if all("error" not in r for r in runs) else 1


def print_table(summary):
    mib = lambda b: "-" if b is None else f"{b / 2**20:.0f}"  # noqa: E731
    for version, data in summary.items():
        print(f"\nSGLang {version}   singles (MiB): " +
              ", ".join(f"{k} {mib(v)}" for k, v in data["singles_bytes"].items()))
        print(f"  {'arrangement':<15} {'patches':<28} {'pool MiB':>9} {'pools':>5} {'strm':>4} "
              f"{'floor':>6} {'sum':>6} {'save%':>6} {'x floor':>7}")
        for arrangement, row in data["arrangements"].items():
            for mode, m in row["modes"].items():
                print(f"  {arrangement:<15} {mode:<28} {mib(m['graph_pool_bytes']):>9} {m['pools']:>5} "
                      f"{m['streams']:>4} {mib(row['floor_bytes']):>6} {mib(row['sum_of_singles_bytes']):>6} "
                      f"{m['saving_pct_of_off'] if m['saving_pct_of_off'] is not None else '-':>6} "
                      f"{m['over_floor'] if m['over_floor'] is not None else '-':>7}")


def _ints(text):
    return [int(x) for x in text.split(",") if x]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("warm", help="import what a worker imports, then exit")
    for name in ("run", "one"):
        p = sub.add_parser(name)
        p.add_argument("--hidden", type=int, default=DEFAULTS["hidden"])
        p.add_argument("--inter-mult", type=int, default=DEFAULTS["inter_mult"])
        p.add_argument("--layers", type=int, default=DEFAULTS["layers"])
        p.add_argument("--draft-layers", type=int, default=DEFAULTS["draft_layers"])
        p.add_argument("--tokens-per-bs", type=int, default=DEFAULTS["tokens_per_bs"])
        p.add_argument("--prefill-tokens", type=_ints, default=DEFAULTS["prefill_tokens"])
        p.add_argument("--decode-bs", type=_ints, default=DEFAULTS["decode_bs"])
        p.add_argument("--prefill-backend", choices=("breakable", "full"), default=DEFAULTS["prefill_backend"])
        p.add_argument("--decode-backend", choices=("breakable", "full"), default=DEFAULTS["decode_backend"])
    run = sub.choices["run"]
    run.add_argument("--sglang", action="append", required=True, metavar="VERSION=PATH",
                     help="a release and the folder to put first on PYTHONPATH for it (repeatable)")
    run.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "graph_memory.json"))
    run.add_argument("--jobs", type=int, default=6, help="fresh processes run side by side")
    run.add_argument("--repeat", type=int, default=1)
    run.add_argument("--worker-timeout", type=int, default=400)
    one = sub.choices["one"]
    one.add_argument("--arrangement", choices=sorted(ARRANGEMENTS), required=True)
    one.add_argument("--patches", default="", help="comma-separated patch names to turn on; the rest off")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        return run_all(args)
    if args.cmd == "warm":
        warm_imports()
        return 0
    cfg = {k: getattr(args, k) for k in DEFAULTS}
    cfg.update(arrangement=args.arrangement, patches=args.patches)
    result = run_one(cfg)
    print("GRAPHMEM_JSON " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
