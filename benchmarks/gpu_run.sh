#!/usr/bin/env bash
# What one call on the lent GPU machine runs (any CUDA machine with python3 + torch 2.11 will do):
# installs the carried wheels (.whl/, see docs/benchmarks.md), runs the GPU tests for each carried
# SGLang release and the graph-memory benchmark; logs and JSON go to $OUT.
#   bash benchmarks/gpu_run.sh            (from the repository root; .whl/ next to it)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/graphfix-gpu-out}
WHL=${WHL:-.whl}
SITE=${SITE:-/tmp/gf-site}
JOBS=${JOBS:-8}
REPEAT=${REPEAT:-2}
mkdir -p "$OUT"
t0=$(date +%s)
pip_t() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$@"; }
pip_t "$SITE" "$WHL"/*.whl || exit 1
SPECS=()
for w in "$WHL"/sglang/sglang-*.whl; do
  v=$(basename "$w" | cut -d- -f2)
  pip_t "/tmp/gf-sg$v" "$w" || exit 1
  SPECS+=(--sglang "$v=/tmp/gf-sg$v")
done
export PYTHONPATH="$SITE" TQDM_DISABLE=1 PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc
  python3 -c "import sys, torch, wrapt; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'wrapt', wrapt.__version__)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
echo "install: $(( $(date +%s) - t0 )) s"
# GPU tests, one process per release, side by side with the benchmark's warm-up
for spec in "${SPECS[@]}"; do
  [ "$spec" = --sglang ] && continue
  v=${spec%%=*}; path=${spec#*=}
  ( PYTHONPATH="$path:$SITE:$PWD" timeout 300 python3 -m pytest tests/gpu -v -rs -p no:cacheprovider \
      > "$OUT/pytest_$v.log" 2>&1; echo "pytest $v exit $?" >> "$OUT/pytest_$v.log" ) &
done
timeout 500 python3 benchmarks/graph_memory.py run "${SPECS[@]}" --jobs "$JOBS" --repeat "$REPEAT" \
    --out "$OUT/graph_memory.json" 2>&1 | tee "$OUT/graph_memory.log"
wait
for f in "$OUT"/pytest_*.log; do echo "== $f"; grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed|exit" "$f" | tail -12; done
echo "total: $(( $(date +%s) - t0 )) s"
