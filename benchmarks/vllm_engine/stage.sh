#!/usr/bin/env bash
# Runs HERE (the machine with a package registry): the cu13 vLLM 0.25.1 wheel and the cp312 wheels it needs
# on the lent H200 (python 3.12 + torch 2.11.0+cu130 there), trimmed as docs/benchmarks.md ("Real engine:
# vLLM") says, plus a graphfix wheel from a checkout's HEAD, packed into tar.xz pieces of < 58 MiB under
# <checkout>/.gpu/vllm/ next to the device-side scripts (bin/). Nothing of this is committed (.gpu/ is
# git-ignored through .git/info/exclude). Helpers shared with the SGLang benchmark: ../engine_stage.sh.
#   bash benchmarks/vllm_engine/stage.sh [CHECKOUT=/work/main] [GRAPHFIX_SRC=CHECKOUT]
# Parts: p1 vllm without its compiled attention/MLA/QuTLASS/vllm-rs/third_party payloads (~95 MiB, 2 pieces);
#        p2 FlashAttention 3 (the FLASH_ATTN backend; 146 MB -> ~11 MiB) + the carried dependencies;
#        p3 graphfix (re-made whenever main moves; ONLY_P3=1 re-makes only p3).
# Env: CACHE (default ~/.cache/graphfix-gpu-wheels/vllm), PART_MB (default 58), REPACK=1 (re-make p1/p2).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../engine_stage.sh"
CO=$(cd "${1:-/work/main}" && pwd)
GFSRC=$(cd "${2:-$CO}" && pwd)
CACHE=${CACHE:-$HOME/.cache/graphfix-gpu-wheels/vllm}
DST=$CO/.gpu/vllm
grep -qx '/.gpu/' "$CO/.git/info/exclude" 2>/dev/null || { mkdir -p "$CO/.git/info"; echo '/.gpu/' >> "$CO/.git/info/exclude"; }
ENGINE=(vllm==0.25.1)
# what vLLM 0.25.1 imports on the way to LLM.generate that the device image lacks (or has in a clashing version)
DEPS=(blake3==1.0.11 cachetools==8.0.2 fastapi==0.136.3 starlette==1.10.0 prometheus-fastapi-instrumentator==8.1.0
      lm-format-enforcer==0.11.3 interegular==0.3.3 llguidance==1.7.6 outlines_core==0.2.14 diskcache==5.6.3
      lark==1.2.2 xgrammar==0.2.9 apache-tvm-ffi==0.1.11 partial-json-parser==0.2.1.1.post7 jsonschema==4.26.0
      referencing==0.37.0 rpds-py==2026.9.1 jsonschema-specifications==2025.9.1 pyzmq==27.3.0 msgspec==0.23.0
      mistral_common==1.13.1 pydantic-extra-types==2.11.1 compressed-tensors==0.17.0 depyf==0.20.0 astor==0.8.1
      dill==0.4.1 watchfiles==1.3.0 python-json-logger==4.2.0 pybase64==1.5.1 cbor2==6.3.0 ijson==3.6.0
      setproctitle==1.3.8 openai-harmony==0.0.8 opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2
      opentelemetry-exporter-otlp==1.45.2 opentelemetry-semantic-conventions==0.66b2
      opentelemetry-semantic-conventions-ai==0.5.1 mcp==2.3.0 mcp-types==2.3.0 model-hosting-container-standards==0.1.16
      jmespath==1.1.0 python-multipart==0.0.34 sse-starlette==3.7.0 uvicorn==0.54.0 loguru==0.7.3
      docstring-parser==0.18.0 flashinfer-python==0.6.13 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0
      typing-inspection==0.4.5 jiter==0.19.0 distro==1.9.0 sniffio==1.3.1 openai==2.54.0 anthropic==0.71.0)
t0=$(date +%s)
stage_fetch "$CACHE" "${ENGINE[@]}" "${DEPS[@]}"
echo "download: $(( $(date +%s) - t0 )) s"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
mkdir -p "$DST/bin"; rm -f "$DST"/part-*.tar.xz.* "$DST"/bin/parts.txt
if [ "${ONLY_P3:-0}" != 1 ]; then
  stage_unzip "$W/p1" "$(stage_whl "$CACHE" vllm==0.25.1)"
  mkdir -p "$W/p2/vllm/vllm_flash_attn"  # FA3 goes to p2 (vLLM imports it even to inspect a model)
  mv "$W"/p1/vllm/vllm_flash_attn/_vllm_fa3_C*.so "$W/p2/vllm/vllm_flash_attn/"
  # third_party: keep the *.py files (pynvml.py: without it vLLM cannot detect CUDA), drop the payloads
  find "$W/p1/vllm/third_party" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
  rm -rf "$W"/p1/vllm/vllm_flash_attn/_vllm_fa2_C*.so "$W"/p1/vllm/_flashmla*.so "$W"/p1/vllm/_qutlass*.so "$W/p1/vllm/vllm-rs"
  for s in "${DEPS[@]}"; do stage_unzip "$W/p2" "$(stage_whl "$CACHE" "$s")"; done
  du -sh "$W"/p1 "$W"/p2
fi
stage_graphfix "$GFSRC" "$W/p3"
for p in p1 p2 p3; do  # p1/p2 tarballs are reused from CACHE unless REPACK=1; p3 always re-made
  reuse=1; { [ "$p" = p3 ] || [ "${REPACK:-0}" = 1 ]; } && reuse=0
  stage_pack "$W/$p" "$p" "$DST" "$CACHE" "$reuse"
done
cp "$HERE"/device.sh "$HERE"/engine_run.py "$HERE"/sitecustomize.py "$HERE"/../engine_unpack.sh "$HERE"/../engine_common.py "$DST"/bin/
python3 "$HERE"/engine_run.py --write-configs "$DST/bin/models"
cat "$W/p3/GRAPHFIX_REV"; ls -la "$DST" "$DST"/bin; du -sh "$DST"
# each device call carries .gpu/vllm/bin plus the pieces it stages (< 64 MiB in all), e.g.
#   carry [".gpu/vllm/bin", ".gpu/vllm/part-p1.tar.xz.0"]                       bash .gpu/vllm/bin/device.sh stage
#   carry [".gpu/vllm/bin", ".gpu/vllm/part-p1.tar.xz.1", ".gpu/vllm/part-p2.tar.xz.0"]   ... stage
#   carry [".gpu/vllm/bin", ".gpu/vllm/part-p3.tar.xz.0"]   bash .gpu/vllm/bin/device.sh run NAME[:ENV=VAL,...] ...
