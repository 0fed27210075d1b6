#!/usr/bin/env bash
# The demo on a fresh machine: builds (first time) or reuses CPU environments of real engine releases
# (harness/, stdlib only: no venv needed here) and prints `graphfix verify` from each, before -> after.
# Options: scripts/demo.py --help (-v/--verbose for every case; releases as engine==version).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/demo.py "$@"
