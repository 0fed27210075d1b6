"""Back here on a CPU machine: turn the real-engine runs' logs into one JSON, a markdown table and a chart.

  python benchmarks/sglang_engine/report.py RUN_DIR [RUN_DIR ...] --json OUT.json [--png OUT.png] [--markdown]

RUN_DIR holds what device.sh wrote for each arrangement: NAME.log (engine + scheduler output), NAME.json
(engine_run.py's result), NAME.hook.jsonl (the benchmark hook's allocator reading after each capture pass).
"""

import argparse
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from engine_common import error_of, is_graphfix_line  # noqa: E402

CAPTURE_END = re.compile(r"Capture (?P<what>[\w ]+?) (?:CUDA graph|cuda graph) end\. elapsed=(?P<s>[\d.]+) ?s, "
                         r"mem usage=(?P<gb>-?[\d.]+) GB, avail mem=(?P<avail>[\d.]+) GB")
BUILT = re.compile(r"Built adaptive runtime state steps=(?P<steps>\d+): elapsed=(?P<s>[\d.]+)s, mem=(?P<gb>-?[\d.]+)GB")
BUILD_BEGIN = re.compile(r"adaptive state build begin steps=(\d+)")
BUILD_END = re.compile(r"adaptive state build end steps=(\d+)")
KV = re.compile(r"KV Cache is allocated\. dtype: (?P<dtype>[\w.]+), #tokens: (?P<tokens>\d+), "
                r"(?:K size: (?P<k>[\d.]+) GB, V size: (?P<v>[\d.]+) GB|KV size: (?P<kv>[\d.]+) GB)")
AVAIL_BEGIN = re.compile(r"Capture [\w ]+? (?:CUDA graph|cuda graph) begin\..*avail mem=(?P<avail>[\d.]+) GB")


def parse_log(path):
    text = open(path, errors="replace").read()
    captures, builds, graphfix, errors, nested, kv, first_avail = [], [], [], [], 0, [], None
    for line in text.splitlines():
        if BUILD_BEGIN.search(line):
            nested += 1
        elif BUILD_END.search(line):
            nested -= 1
        m = CAPTURE_END.search(line)
        if m:
            captures.append({"what": m["what"], "elapsed_s": float(m["s"]), "mem_gb": float(m["gb"]),
                             "avail_gb": float(m["avail"]), "nested_in_adaptive_build": nested > 0})
        m = AVAIL_BEGIN.search(line)
        if m and first_avail is None:
            first_avail = float(m["avail"])
        m = BUILT.search(line)
        if m:
            builds.append({"steps": int(m["steps"]), "elapsed_s": float(m["s"]), "mem_gb": float(m["gb"])})
        m = KV.search(line)
        if m:
            size = float(m["kv"]) if m["kv"] else float(m["k"]) + float(m["v"])
            kv.append({"dtype": m["dtype"], "tokens": int(m["tokens"]), "gb": round(size, 2)})
        if is_graphfix_line(line):
            graphfix.append(line.strip()[:400])
        err = error_of(line)
        if err:
            errors.append(err)
    top = [c for c in captures if not c["nested_in_adaptive_build"]]
    total = sum(c["mem_gb"] for c in top) + sum(b["mem_gb"] for b in builds)
    return {"captures": captures, "adaptive_builds": builds, "graph_mem_gb_engine": round(total, 2),
            "avail_before_capture_gb": first_avail, "kv_cache": kv, "graphfix_lines": graphfix,
            "errors": list(dict.fromkeys(errors))}


def parse_hook(path):
    if not os.path.exists(path):
        return None
    rows = [json.loads(x) for x in open(path) if x.strip()]
    if not rows:
        return None
    last = rows[-1]
    return {"passes": len(rows), "graph_pool_bytes": last["graph_bytes"], "pools": last["pools"],
            "streams": last["streams"], "per_pass": [{k: r.get(k) for k in (
                "pass", "runner", "req_width", "max_bs", "n_bs", "capture_s", "graph_bytes", "pools", "streams",
                "snapshot_ms")} for r in rows]}


def collect(dirs):
    runs = {}
    for d in dirs:
        summary = os.path.join(d, "summary.json")
        rows = {r["name"]: r for r in json.load(open(summary))} if os.path.exists(summary) else {}
        for log in sorted(glob.glob(os.path.join(d, "*.log"))):
            name = os.path.basename(log)[:-4]
            res = os.path.join(d, name + ".json")
            run = {"name": name, "result": json.load(open(res)) if os.path.exists(res) else None,
                   **parse_log(log), "hook": parse_hook(os.path.join(d, name + ".hook.jsonl"))}
            row = rows.get(name, {})
            run["driver"] = {k: row.get(k) for k in ("env", "rc", "elapsed_s")}
            if run["result"] is None:  # the engine never came up: its process tree was ended (rc) or hung
                run["result"] = {"outcome": f"start-up failed (rc {row.get('rc')})", "wall_s": row.get("elapsed_s")}
            runs[name] = run
    return runs


def compare(runs, off, on):
    a, b = runs.get(off), runs.get(on)
    if not a or not b:
        return None
    out = {"off": off, "on": on}
    for key, get in (("graph_mem_gb_engine", lambda r: r["graph_mem_gb_engine"]),
                     ("graph_pool_gib", lambda r: r["hook"] and r["hook"]["graph_pool_bytes"] / 2**30)):
        x, y = get(a), get(b)
        if x and y is not None:
            out[key] = {"off": round(x, 2), "on": round(y, 2), "saved": round(x - y, 2),
                        "saved_pct": round(100 * (x - y) / x, 1)}
    return out


def markdown(runs):
    rows = ["| arrangement | env | outcome | graph mem, engine's lines (GB) | graph pool, allocator (GiB) | pools | streams | "
            "capture passes | KV cache tokens (GB) | start s | error |", "|---|---|---|--:|--:|--:|--:|--:|--:|--:|---|"]
    for r in runs.values():
        res, hook = r["result"] or {}, r["hook"] or {}
        kv = r["kv_cache"][0] if r["kv_cache"] else None
        rows.append("| {} | `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            r["name"], (r.get("driver") or {}).get("env") or "(flags unset)", res.get("outcome", "?"), r["graph_mem_gb_engine"],
            round(hook["graph_pool_bytes"] / 2**30, 2) if hook else "—", hook.get("pools", "—"),
            hook.get("streams", "—"), hook.get("passes", "—"), f"{kv['tokens']} ({kv['gb']})" if kv else "—",
            round(res["start_s"], 1) if res.get("start_s") else "—",
            ("`" + r["errors"][0][:120] + "`") if r["errors"] else ""))
    return "\n".join(rows)


def chart(runs, pairs, png):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, (title, key, unit) in zip(axes, (
            ("CUDA-graph memory, SGLang's own capture lines", "graph_mem_gb_engine", "GB"),
            ("graph-pool bytes, caching allocator", "graph_pool_gib", "GiB"))):
        labels, off, on = [], [], []
        for pair in pairs:
            c = compare(runs, *pair[:2])
            if c and key in c:
                labels.append(pair[2] if len(pair) > 2 else f"{pair[0]}\nvs {pair[1]}")
                off.append(c[key]["off"])
                on.append(c[key]["on"])
        xs = range(len(labels))
        ax.bar([x - 0.2 for x in xs], off, 0.4, label="capture_stream off", color="#c44e52")
        ax.bar([x + 0.2 for x in xs], on, 0.4, label="graphfix defaults", color="#4c72b0")
        for x, a, b in zip(xs, off, on):
            ax.text(x - 0.2, a, f"{a:.2f}", ha="center", va="bottom", fontsize=8)
            ax.text(x + 0.2, b, f"{b:.2f}\n(-{100 * (a - b) / a:.0f}%)", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(list(xs), labels, fontsize=8)
        ax.set_ylabel(unit)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle("Real SGLang 0.5.16 engine on an H200: Llama 8B-shape (dummy bf16) + EAGLE, adaptive steps [1,3,7]",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--json", required=True)
    ap.add_argument("--png")
    ap.add_argument("--pair", action="append", default=[], help="OFF:ON[:LABEL] arrangement names to compare")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    runs = collect(a.dirs)
    pairs = [tuple(p.split(":")) for p in a.pair]
    data = {"runs": runs, "comparisons": [compare(runs, *p[:2]) for p in pairs]}
    with open(a.json, "w") as f:
        json.dump(data, f, indent=1, default=str)
    if a.png and pairs:
        chart(runs, pairs, a.png)
    if a.markdown:
        print(markdown(runs))
        for c in data["comparisons"]:
            print(json.dumps(c))


if __name__ == "__main__":
    main()
