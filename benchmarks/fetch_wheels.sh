#!/usr/bin/env bash
# Fills .whl/ (git-ignored) with what benchmarks/gpu_run.sh installs on a CUDA machine that has
# python 3.12 + torch 2.11 but no SGLang: the cp312 SGLang wheels (installed --no-deps into one
# folder per release) and the pure-Python / small binary dependencies their imports need.
# 46 MB in all, under the lent GPU machine's 64 MiB per-call transfer limit.
set -euo pipefail
cd "$(dirname "$0")/.."
P=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
   --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
   --platform manylinux_2_26_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
   --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64)
mkdir -p .whl/sglang
for v in 0.5.14 0.5.16; do python3 -m pip download -q "${P[@]}" -d .whl/sglang "sglang==$v"; done
python3 -m pip download -q "${P[@]}" -d .whl \
  transformers==5.12.1 tokenizers==0.22.2 pydantic==2.14.4 pydantic_core==2.50.5 annotated_types==0.8.0 \
  typing_inspection==0.4.5 typing_extensions==4.16.0 orjson==3.13.0 pybase64==1.5.1 pyzmq==27.3.0 \
  msgspec==0.23.0 openai==2.6.1 jiter==0.19.0 distro==1.9.0 sniffio==1.3.1 partial_json_parser==0.2.1.1.post7 \
  dill==0.4.1 compressed_tensors==0.20.1 gguf==0.19.0 loguru==0.7.3 ipython==9.18.1 traitlets==5.16.1 \
  starlette==1.10.0
du -sh .whl
