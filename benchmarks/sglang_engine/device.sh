#!/usr/bin/env bash
# Runs ON THE CUDA MACHINE, from the checkout root, with .gpu/ (made by stage.sh) carried along.
#   bash .gpu/bin/device.sh stage        unpack every carried part whose pieces are all present
#   bash .gpu/bin/device.sh run ARR...   stage, then one fresh engine process per arrangement
#                                        (ARR = NAME[:ENV=VAL,...], see engine_run.py); results -> $OUT
# Parts: pieces are moved to /tmp/gfparts (kept while the machine stays warm); p1, p2 unpack into
# /tmp/gfsite once; p3 (graphfix, re-made from the current main) replaces /tmp/gfgf every time it comes.
set -uo pipefail
G=$(cd "$(dirname "$0")" && pwd)  # .gpu/bin: scripts, models/, parts.txt; the part pieces are in .gpu/
OUT=${OUT:-/tmp/gfout}
PARTS=/tmp/gfparts SITE=/tmp/gfsite GF=/tmp/gfgf BENCH=/tmp/gfbench
mkdir -p "$OUT" "$BENCH"
. "$G/engine_unpack.sh"  # shared with the vLLM benchmark
cp "$G"/sitecustomize.py "$G"/engine_run.py "$G"/engine_common.py "$BENCH"/ && cp -r "$G"/models "$BENCH"/
engine_unpack "$G" "$SITE" "$GF" "$PARTS"
[ "${1:-stage}" = stage ] && exit 0
shift
engine_parts_ready "$SITE" p1 p2 p3 || exit 2
export PYTHONPATH=$BENCH:$GF:$SITE PYTHONUNBUFFERED=1 TQDM_DISABLE=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import sys, torch, wrapt, triton; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'wrapt', wrapt.__version__, 'triton', triton.__version__)"
  python3 -c "import importlib.metadata as m; print(*[d + ' ' + m.version(d) for d in ('sglang','sglang-kernel','transformers','flashinfer-python','xgrammar','graphfix')])"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
RUN=/tmp/gfrun/$(date +%H%M%S); mkdir -p "$RUN"
python3 "$BENCH"/engine_run.py drive --models "$BENCH"/models --out "$RUN" --timeout "${ENGINE_TIMEOUT:-300}" "$@"
cp "$RUN"/summary.json "$OUT"/
for f in "$RUN"/*.log; do
  echo "=== $(basename "$f")"
  grep -aE "graphfix|Capture .*(begin|end)|Built adaptive|KV Cache is allocated|max_total_num_tokens=|Error|error:|Traceback|\[bench" "$f" \
    | grep -av "^ *File " | cut -c1-400 | head -60
done | tee "$OUT/digest.txt"
tar -C "$RUN" -cJf "$OUT/run.tar.xz" . && ls -la "$OUT"
