"""Back here on a CPU machine: turn the real vLLM runs' logs into one JSON and a markdown table.

  python benchmarks/vllm_engine/report.py RUN_DIR [RUN_DIR ...] --json OUT.json [--markdown]

RUN_DIR holds what device.sh wrote per arrangement: NAME.log (front end + engine core), NAME.json
(engine_run.py's result), NAME.hook.jsonl (sitecustomize.py's capture and draft-prefill records) and
NAME.hook.jsonl.dispatch.json (graph dispatch counts while serving).
"""

import argparse
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from engine_common import errors_in, graphfix_lines  # noqa: E402

CAPTURED = re.compile(r"Graph capturing finished in (?P<s>[\d.]+) secs, took (?P<gib>-?[\d.]+) GiB")
KV_GIB = re.compile(r"Available KV cache memory: (?P<gib>-?[\d.]+) GiB")
KV_TOKENS = re.compile(r"GPU KV cache size: (?P<tokens>[\d,]+) tokens")
FACTS = {"v2_runner": re.compile(r"Using V2 Model Runner"), "attention": re.compile(r"Using (\w+) attention backend"),
         "fa_version": re.compile(r"FlashAttention(?: version)? ?(\d)")}


def parse_log(path):
    text = open(path, errors="replace").read()
    out = {"captured": None, "kv_gib": None, "kv_tokens": None}
    m = CAPTURED.search(text)
    if m:
        out["captured"] = {"secs": float(m["s"]), "gib": float(m["gib"])}
    m = KV_GIB.search(text)
    out["kv_gib"] = float(m["gib"]) if m else None
    m = KV_TOKENS.search(text)
    out["kv_tokens"] = int(m["tokens"].replace(",", "")) if m else None
    for key, rx in FACTS.items():
        m = rx.search(text)
        out[key] = (m.group(1) if m.groups() else True) if m else None
    out["graphfix_lines"] = graphfix_lines(text)
    out["errors"] = errors_in(text)
    return out


def parse_hook(path):
    if not os.path.exists(path):
        return None
    rows = [json.loads(x) for x in open(path) if x.strip()]
    cap = [r for r in rows if r["event"] == "capture_model"]
    warm = [r for r in rows if r["event"] == "draft_prefill_warmup"]
    ref = [r for r in rows if r["event"] == "draft_prefill_reference"]
    out = {"capture": None, "draft_prefill": None}
    if cap:
        c = cap[-1]
        # (free memory is read before vLLM's own empty_cache(): its delta is no graph size; the pool bytes are)
        out["capture"] = {k: c.get(k) for k in ("capture_s", "n_graphs", "max_capture_size", "cudagraph_mode")}
        out["capture"]["graph_pool_gib"] = round(c["graph_pool_bytes"] / 2**30, 3)
        out["capture"]["n_capture_sizes"] = len(c.get("capture_sizes") or [])
        out["capture"]["widest_target_graph"] = max(c["graphs"].get("target") or [[None]])
    if warm:
        out["draft_prefill"] = {
            "warmups": len(warm), "warmup_qsl_ok": sum(bool(r.get("qsl_ok")) for r in warm),
            "warmup_seq_lens_ok": sum(bool(r.get("seq_lens_ok")) for r in warm),
            "references": len(ref), "reference_fresh_ok": sum(bool(r.get("fresh_qsl_ok") and r.get("fresh_seq_lens_ok"))
                                                              for r in ref),
            "outputs_equal": sum(r["hidden_max_abs_diff"] == 0 for r in ref),
            "max_abs_diff": max([r["hidden_max_abs_diff"] for r in ref], default=None),
            "rows_differing": sum(r["hidden_rows_differing"] for r in ref),
            "rows": sum(r["num_reqs"] for r in ref),
            "example": {k: warm[0].get(k) for k in ("num_reqs", "num_tokens", "qsl_head", "seq_lens_head", "max_query_len")},
        }
    disp = path + ".dispatch.json"
    if os.path.exists(disp):
        out["dispatch"] = json.load(open(disp))["counts"]
    return out


def collect(dirs):
    runs = {}
    for d in dirs:
        summary = os.path.join(d, "summary.json")
        rows = {r["name"]: r for r in json.load(open(summary))} if os.path.exists(summary) else {}
        for log in sorted(glob.glob(os.path.join(d, "*.log"))):
            name = os.path.basename(log)[:-4]
            res = os.path.join(d, name + ".json")
            row = rows.get(name, {})
            run = {"name": name, "driver": {k: row.get(k) for k in ("env", "rc", "elapsed_s")},
                   "result": json.load(open(res)) if os.path.exists(res) else None,
                   **parse_log(log), "hook": parse_hook(os.path.join(d, name + ".hook.jsonl"))}
            if run["result"] is None:
                run["result"] = {"outcome": f"start-up failed (rc {row.get('rc')})", "wall_s": row.get("elapsed_s")}
            runs[name] = run
    return runs


def markdown(runs):
    rows = ["| arrangement | env | outcome | graphs (target / draft prefill / draft decode) | capture s | "
            "graph memory GiB (vLLM's line; allocator graph pool) | KV cache GiB (tokens) | output tok/s | "
            "draft-prefill warm-ups with the descriptor's own metadata | warm-up = fresh-metadata forward | error |",
            "|---|---|---|---|--:|--:|--:|--:|--:|--:|---|"]
    for r in runs.values():
        res, hook = r["result"] or {}, r["hook"] or {}
        cap, dp = hook.get("capture") or {}, hook.get("draft_prefill") or {}
        n = cap.get("n_graphs") or {}
        rows.append("| {} | `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            r["name"], (r["driver"] or {}).get("env") or "(flags unset)", res.get("outcome", "?"),
            " / ".join(str(n.get(k, "—")) for k in ("target", "draft_prefill", "draft_decode")) if n else "—",
            cap.get("capture_s", "—"),
            "{}; {}".format((r["captured"] or {}).get("gib", "—"), cap.get("graph_pool_gib", "—")),
            "{} ({})".format(r["kv_gib"], r["kv_tokens"]), res.get("output_tok_per_s", "—"),
            f"{dp['warmup_qsl_ok']}/{dp['warmups']}" if dp else "—",
            f"{dp['outputs_equal']}/{dp['references']} (max diff {dp['max_abs_diff']})" if dp else "—",
            ("`" + r["errors"][0][:120] + "`") if r["errors"] else ""))
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--json", required=True)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    runs = collect(a.dirs)
    with open(a.json, "w") as f:
        json.dump({"runs": runs}, f, indent=1, default=str)
    if a.markdown:
        print(markdown(runs))


if __name__ == "__main__":
    main()
