#!/usr/bin/env bash
# Runs HERE (the machine with a package registry): downloads the cp312 wheels a real SGLang 0.5.16
# engine needs on the lent H200 (which has python 3.12 + torch 2.11.0+cu130 but no SGLang), trims the
# compiled payloads the H200 never loads, builds a graphfix wheel from the given checkout, unpacks all of
# it into one site folder and packs that into tar.xz parts of < 60 MiB under <checkout>/.gpu/, next to
# the device-side scripts. Nothing of this is committed: .gpu/ is git-ignored (.git/info/exclude).
#   bash benchmarks/sglang_engine/stage.sh [CHECKOUT=/work/main] [GRAPHFIX_SRC=CHECKOUT]
# CHECKOUT is the repository the device tool sends (parts go to CHECKOUT/.gpu); the graphfix wheel is
# built from GRAPHFIX_SRC's committed HEAD (e.g. a branch with main merged in).
# Env: CACHE (download cache, default ~/.cache/graphfix-gpu-wheels), PART_MB (default 58),
#      ONLY_P3=1 re-makes only the graphfix part (p1/p2 tarballs are cached in CACHE), REPACK=1 re-packs p1/p2.
# Helpers shared with the vLLM benchmark: ../engine_stage.sh.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../engine_stage.sh"  # shared with the vLLM benchmark
CO=$(cd "${1:-/work/main}" && pwd)
GFSRC=$(cd "${2:-$CO}" && pwd)
CACHE=${CACHE:-$HOME/.cache/graphfix-gpu-wheels}
DST=$CO/.gpu
grep -qx '/.gpu/' "$CO/.git/info/exclude" 2>/dev/null || { mkdir -p "$CO/.git/info"; echo '/.gpu/' >> "$CO/.git/info/exclude"; }
ENGINE=(sglang==0.5.16 sglang-kernel==0.4.5)
HEAVY=(xgrammar==0.2.1 flashinfer-python==0.6.14 sgl-deep-gemm==0.1.4.post1)
PURE=(transformers==5.12.1 tokenizers==0.22.2 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0
      typing-inspection==0.4.5 apache-tvm-ffi==0.1.11 compressed-tensors==0.18.0 dill==0.4.1 distro==1.9.0
      fastapi==0.165.0 gguf==0.19.0 ipython==9.18.1 traitlets==5.16.1 jiter==0.19.0 loguru==0.7.3
      msgspec==0.23.0 openai==2.6.1 opentelemetry-api==1.45.2 orjson==3.13.0 partial-json-parser==0.2.1.1.post7
      pybase64==1.5.1 pyzmq==27.3.0 setproctitle==1.3.7 sniffio==1.3.1 starlette==1.10.0 uvicorn==0.54.0)
t0=$(date +%s)
stage_fetch "$CACHE" "${ENGINE[@]}" "${HEAVY[@]}" "${PURE[@]}"
echo "download: $(( $(date +%s) - t0 )) s"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
if [ "${ONLY_P3:-0}" != 1 ]; then
# part 1: sglang + sgl_kernel (without flash_ops.abi3.so and sm100/) + the pure-Python dependencies
stage_unzip "$W/p1" "$(stage_whl "$CACHE" sglang==0.5.16)" "$(stage_whl "$CACHE" sglang-kernel==0.4.5)"
rm -rf "$W/p1/sgl_kernel/flash_ops.abi3.so" "$W/p1/sgl_kernel/sm100"
for s in "${PURE[@]}"; do stage_unzip "$W/p1" "$(stage_whl "$CACHE" "$s")"; done
# part 2: xgrammar, flashinfer, deep_gemm
for s in "${HEAVY[@]}"; do stage_unzip "$W/p2" "$(stage_whl "$CACHE" "$s")"; done
du -sh "$W"/p1 "$W"/p2
fi
# part 3 (small, re-made whenever main moves): the graphfix wheel
stage_graphfix "$GFSRC" "$W/p3"
mkdir -p "$DST/bin"; rm -f "$DST"/part*.tar.xz* "$DST"/bin/parts.txt
for p in p1 p2 p3; do  # p1/p2 tarballs are reused from CACHE unless REPACK=1; p3 always re-made
  reuse=1; { [ "$p" = p3 ] || [ "${REPACK:-0}" = 1 ]; } && reuse=0
  stage_pack "$W/$p" "$p" "$DST" "$CACHE" "$reuse"
done
cp "$HERE"/device.sh "$HERE"/engine_run.py "$HERE"/sitecustomize.py "$HERE"/../engine_unpack.sh "$HERE"/../engine_common.py "$DST"/bin/
python3 "$HERE"/engine_run.py --write-configs "$DST/bin/models"
cat "$W/p3/GRAPHFIX_REV"; ls -la "$DST" "$DST"/bin; du -sh "$DST"
# each device call carries .gpu/bin plus the part pieces it stages, e.g.
#   carry [".gpu/bin", ".gpu/part-p1.tar.xz.0"]      command: bash .gpu/bin/device.sh stage
#   carry [".gpu/bin", ".gpu/part-p2.tar.xz.0", ".gpu/part-p3.tar.xz.0"]
#                                                     command: bash .gpu/bin/device.sh run NAME[:ENV=VAL,...] ...
