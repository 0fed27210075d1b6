#!/usr/bin/env bash
# Fills .whl/ (git-ignored) with what benchmarks/gpu_run.sh installs on a CUDA machine that has
# python 3.12 + torch 2.11 but no SGLang: the cp312 SGLang wheels (installed --no-deps into one
# folder per release) and the dependencies their imports need, at the versions the harness pins
# (`python -m harness pins sglang --for-gpu`, from harness/engines.py).
# About 46 MB in all, under the lent GPU machine's 64 MiB per-call transfer limit.
set -euo pipefail
cd "$(dirname "$0")/.."
P=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
   --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
   --platform manylinux_2_26_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
   --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64)
PINS=$(python3 -m harness pins sglang --for-gpu)
mkdir -p .whl/sglang
for v in 0.5.14 0.5.16; do python3 -m pip download -q "${P[@]}" -d .whl/sglang "sglang==$v"; done
# shellcheck disable=SC2086  # one requirement a line, none with spaces
python3 -m pip download -q "${P[@]}" -d .whl $PINS
du -sh .whl
