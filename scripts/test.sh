#!/usr/bin/env bash
# Sets up everything on a fresh machine and runs the whole test suite:
# a venv with graphfix[test], the cached CPU environments of the real engine releases (harness/), pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
if [ -d harness ]; then
  .venv/bin/python -m harness build --all
fi
.venv/bin/python -m pytest -q -rs "$@"
