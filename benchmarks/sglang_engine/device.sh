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
mkdir -p "$OUT" "$PARTS" "$SITE" "$BENCH"
cp "$G"/sitecustomize.py "$G"/engine_run.py "$BENCH"/ && cp -r "$G"/models "$BENCH"/
t0=$(date +%s.%N)
for piece in "$G"/../part-*.tar.xz.*; do [ -e "$piece" ] && cp "$piece" "$PARTS"/; done
while read -r name n; do
  have=$(ls "$PARTS"/part-"$name".tar.xz.* 2>/dev/null | wc -l)
  if [ "$have" -lt "$n" ]; then echo "part $name: $have/$n pieces here"; continue; fi
  if [ "$name" = p3 ]; then
    [ -e "$G/../part-p3.tar.xz.0" ] || { [ -d "$GF" ] && continue; }
    rm -rf "$GF"; mkdir -p "$GF"; dest=$GF
  else
    [ -e "$SITE/.done-$name" ] && continue; dest=$SITE
  fi
  t=$(date +%s.%N)
  cat "$PARTS"/part-"$name".tar.xz.* | xz -d -T0 | tar -x -C "$dest" && touch "$SITE/.done-$name"
  echo "part $name: unpacked in $(awk "BEGIN{print $(date +%s.%N) - $t}") s into $dest ($(du -sh "$dest" | cut -f1))"
done < "$G/parts.txt"
echo "stage: $(awk "BEGIN{print $(date +%s.%N) - $t0}") s"
[ -f "$GF/GRAPHFIX_REV" ] && cat "$GF/GRAPHFIX_REV"
[ "${1:-stage}" = stage ] && exit 0
shift
for p in p1 p2 p3; do [ -e "$SITE/.done-$p" ] || { echo "part $p missing: cannot run"; exit 2; }; done
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
