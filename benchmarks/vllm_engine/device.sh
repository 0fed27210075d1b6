#!/usr/bin/env bash
# Runs ON THE CUDA MACHINE, from the checkout root, with .gpu/vllm/ (made by stage.sh) carried along.
#   bash .gpu/vllm/bin/device.sh stage        unpack every carried part whose pieces are all present
#   bash .gpu/vllm/bin/device.sh run ARR...   stage, then one fresh LLM process per arrangement
#                                             (ARR = NAME[:ENV=VAL,...], see engine_run.py); results -> $OUT
# Env: ENGINE_TIMEOUT (s per arrangement, default 240), DRIVE_BUDGET (s: start no arrangement after it).
set -uo pipefail
G=$(cd "$(dirname "$0")" && pwd)  # .gpu/vllm/bin: scripts, models/, parts.txt; the pieces are in .gpu/vllm/
OUT=${OUT:-/tmp/gvout}
PARTS=/tmp/gvparts SITE=/tmp/gvsite GF=/tmp/gvgf BENCH=/tmp/gvbench
mkdir -p "$OUT" "$BENCH"
. "$G/engine_unpack.sh"
cp "$G"/sitecustomize.py "$G"/engine_run.py "$G"/engine_common.py "$BENCH"/ && cp -r "$G"/models "$BENCH"/
engine_unpack "$G" "$SITE" "$GF" "$PARTS"
[ "${1:-stage}" = stage ] && exit 0
shift
engine_parts_ready "$SITE" p1 p2 p3 || exit 2
export PYTHONPATH=$BENCH:$GF:$SITE PYTHONUNBUFFERED=1 TQDM_DISABLE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_USE_V2_MODEL_RUNNER=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import sys, torch, wrapt, triton; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'wrapt', wrapt.__version__, 'triton', triton.__version__)"
  python3 -c "import importlib.metadata as m; print(*[d + ' ' + m.version(d) for d in ('vllm','transformers','flashinfer-python','xgrammar','graphfix')])"
  python3 -c "import importlib.metadata as m; print(*[(e.group, e.name, e.value) for e in m.entry_points(group='vllm.general_plugins')])"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
RUN=/tmp/gvrun/$(date +%H%M%S); mkdir -p "$RUN"
python3 "$BENCH"/engine_run.py drive --models "$BENCH"/models --out "$RUN" --timeout "${ENGINE_TIMEOUT:-240}" \
  ${DRIVE_BUDGET:+--budget "$DRIVE_BUDGET"} "$@"
cp "$RUN"/summary.json "$OUT"/ 2>/dev/null
for f in "$RUN"/*.log; do
  echo "=== $(basename "$f")"
  grep -aE "graphfix|(vllm|sglang)\.[a-z_]+: [a-z-]+ \(|Using V2|Graph capturing finished|Available KV cache|GPU KV cache size|Maximum concurrency|backend|Error|error:|Traceback|\[bench" "$f" \
    | grep -av "^ *File " | cut -c1-400 | head -50
  h="${f%.log}.hook.jsonl"
  [ -f "$h" ] && python3 - "$h" <<'EOF'
import json, sys
rows = [json.loads(x) for x in open(sys.argv[1]) if x.strip()]
for r in rows:
    if r["event"] == "capture_model":
        print("capture_model", r["capture_s"], "s", r["free_delta_gib"], "GiB free delta", r["graph_pool_bytes"] / 2**30, "GiB pool", r["n_graphs"])
w = [r for r in rows if r["event"] == "draft_prefill_warmup"]
ref = [r for r in rows if r["event"] == "draft_prefill_reference"]
print("warmups", len(w), "qsl_ok", sum(bool(r.get("qsl_ok")) for r in w), "seq_lens_ok", sum(bool(r.get("seq_lens_ok")) for r in w))
print("references", len(ref), "equal_hidden", sum(r["hidden_max_abs_diff"] == 0 for r in ref),
      "max_diff", max([r["hidden_max_abs_diff"] for r in ref] or [None]))
for r in (w[:2] + w[-1:]): print(" warmup", {k: r.get(k) for k in ("num_reqs", "num_tokens", "qsl_ok", "seq_lens_ok", "qsl_head", "seq_lens_head", "max_query_len", "max_seq_len")})
for r in (ref[:2] + ref[-1:]): print(" ref", {k: r.get(k) for k in ("num_reqs", "num_tokens", "hidden_max_abs_diff", "hidden_rows_differing", "draft_tokens_equal")})
EOF
done | tee "$OUT/digest.txt"
tar -C "$RUN" -cJf "$OUT/run.tar.xz" . && ls -la "$OUT"
