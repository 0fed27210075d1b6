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
#      ONLY_P3=1 re-makes only the graphfix part (p1/p2 tarballs are cached in CACHE).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CO=$(cd "${1:-/work/main}" && pwd)
GFSRC=$(cd "${2:-$CO}" && pwd)
CACHE=${CACHE:-$HOME/.cache/graphfix-gpu-wheels}
PART_MB=${PART_MB:-58}
DST=$CO/.gpu
grep -qx '/.gpu/' "$CO/.git/info/exclude" 2>/dev/null || { mkdir -p "$CO/.git/info"; echo '/.gpu/' >> "$CO/.git/info/exclude"; }
P=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none
   --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
   --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
   --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64 --platform any)
ENGINE=(sglang==0.5.16 sglang-kernel==0.4.5)
HEAVY=(xgrammar==0.2.1 flashinfer-python==0.6.14 sgl-deep-gemm==0.1.4.post1)
PURE=(transformers==5.12.1 tokenizers==0.22.2 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0
      typing-inspection==0.4.5 apache-tvm-ffi==0.1.11 compressed-tensors==0.18.0 dill==0.4.1 distro==1.9.0
      fastapi==0.165.0 gguf==0.19.0 ipython==9.18.1 traitlets==5.16.1 jiter==0.19.0 loguru==0.7.3
      msgspec==0.23.0 openai==2.6.1 opentelemetry-api==1.45.2 orjson==3.13.0 partial-json-parser==0.2.1.1.post7
      pybase64==1.5.1 pyzmq==27.3.0 setproctitle==1.3.7 sniffio==1.3.1 starlette==1.10.0 uvicorn==0.54.0)
mkdir -p "$CACHE"
t0=$(date +%s)
for spec in "${ENGINE[@]}" "${HEAVY[@]}" "${PURE[@]}"; do
  name=${spec%%==*}; ver=${spec#*==}; glob=$(echo "$name" | tr - _)
  ls "$CACHE"/"$glob"-"$ver"-*.whl >/dev/null 2>&1 || ls "$CACHE"/"$name"-"$ver"-*.whl >/dev/null 2>&1 \
    || python3 -m pip download -q "${P[@]}" -d "$CACHE" "$spec"
done
echo "download: $(( $(date +%s) - t0 )) s"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
# graphfix from the checkout's HEAD (a clean export, not the working tree)
git -C "$GFSRC" archive --format=tar HEAD | (mkdir -p "$W/src" && tar -x -C "$W/src")
python3 -m pip wheel -q --no-deps -w "$W/gf" "$W/src"
GF_REV="$(git -C "$GFSRC" rev-parse --short HEAD) ($(git -C "$GFSRC" log -1 --format=%s | cut -c1-70))"
# unpack: one site folder per part; wheels are zips, so unzip == pip install --no-deps (plus .dist-info)
site() { mkdir -p "$W/$1"; shift; }
unz() { local to=$1; shift; for w in "$@"; do unzip -qo "$w" -d "$W/$to"; done; }
whl() { local s=$1 name ver glob; name=${s%%==*}; ver=${s#*==}; glob=$(echo "$name" | tr - _)
        ls "$CACHE"/"$glob"-"$ver"-*.whl "$CACHE"/"$name"-"$ver"-*.whl 2>/dev/null | head -1; }
if [ "${ONLY_P3:-0}" != 1 ]; then
# part 1: sglang + sgl_kernel (without flash_ops.abi3.so and sm100/) + the pure-Python dependencies
unz p1 "$(whl sglang==0.5.16)" "$(whl sglang-kernel==0.4.5)"
rm -rf "$W/p1/sgl_kernel/flash_ops.abi3.so" "$W/p1/sgl_kernel/sm100"
for s in "${PURE[@]}"; do unz p1 "$(whl "$s")"; done
# part 2: xgrammar, flashinfer, deep_gemm
for s in "${HEAVY[@]}"; do unz p2 "$(whl "$s")"; done
fi
# part 3 (small, re-made whenever main moves): graphfix wheel + the device scripts + model configs
mkdir -p "$W/p3"; unz p3 "$W"/gf/*.whl
echo "graphfix $GF_REV $(ls "$W"/gf)" > "$W/p3/GRAPHFIX_REV"
mkdir -p "$DST/bin"; rm -f "$DST"/part*.tar.xz* "$DST"/bin/parts.txt
du -sh "$W"/p*
for p in p1 p2 p3; do
  t=$(date +%s)
  if [ "$p" = p3 ] || [ ! -f "$CACHE/$p.tar.xz" ] || [ "${REPACK:-0}" = 1 ]; then
    tar -C "$W/$p" -cf - . | xz -T2 -6 > "$CACHE/$p.tar.xz.new" && mv "$CACHE/$p.tar.xz.new" "$CACHE/$p.tar.xz"
  fi
  split -b "${PART_MB}m" -d -a 1 "$CACHE/$p.tar.xz" "$DST/part-$p.tar.xz."
  echo "$p $(ls "$DST"/part-$p.tar.xz.* | wc -l)" >> "$DST/bin/parts.txt"
  echo "$p packed in $(( $(date +%s) - t )) s"
done
cp "$HERE"/device.sh "$HERE"/engine_run.py "$HERE"/sitecustomize.py "$DST"/bin/
python3 "$HERE"/engine_run.py --write-configs "$DST/bin/models"
ls -la "$DST" "$DST"/bin; du -sh "$DST"
# each device call carries .gpu/bin plus the part pieces it stages, e.g.
#   carry [".gpu/bin", ".gpu/part-p1.tar.xz.0"]      command: bash .gpu/bin/device.sh stage
#   carry [".gpu/bin", ".gpu/part-p2.tar.xz.0", ".gpu/part-p3.tar.xz.0"]
#                                                     command: bash .gpu/bin/device.sh run NAME[:ENV=VAL,...] ...
