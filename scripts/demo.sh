#!/usr/bin/env bash
# Sets up everything on a fresh machine and runs the demo: CPU environments of real affected engine
# releases (harness/), then `graphfix status` and `graphfix verify` inside each, before -> after.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e .
exec .venv/bin/python scripts/demo.py "$@"
