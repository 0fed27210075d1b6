"""Shared helpers for tests that run real engine releases on CPU through ``harness/``.

Each helper runs one subprocess inside a release and caches its JSON answer for the whole session, so a
parity suite costs one engine import per (release, environment) rather than one per assertion.
"""

import functools
import json
import os
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def releases(engine: str, specifier: str = "") -> list[str]:
    """The harness's releases of ``engine`` inside ``specifier`` (all of them for ``""``)."""
    from harness.engines import RELEASES

    spec = SpecifierSet(specifier)
    return [v for v in RELEASES[engine] if spec.contains(Version(v), prereleases=True)]


@functools.lru_cache(maxsize=None)
def release(engine: str, version: str):
    from harness.engines import ensure

    return ensure(engine, version)


def _json_tail(proc):
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("{", "["))]
    if proc.returncode or not lines:
        pytest.fail(f"subprocess failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return json.loads(lines[-1])


def run_inside(engine: str, version: str, argv: list[str], flags: tuple = ()):
    """Run ``argv`` (``python ...``) in the release with extra environment ``flags`` ((name, value), ...)."""
    env = release(engine, version)
    proc = env.run(argv, env=dict(flags), cwd=str(ROOT), check=False, timeout=900)
    return _json_tail(proc)


@functools.lru_cache(maxsize=None)
def observed(engine: str, version: str, flags: tuple = ()) -> dict:
    """``python -m graphfix.observe ENGINE`` in the release: every scenario off, then on."""
    return run_inside(engine, version, ["python", "-m", "graphfix.observe", engine], flags)


@functools.lru_cache(maxsize=None)
def plugin_state(engine: str, version: str, flags: tuple = (), loader: bool = True) -> dict:
    """Patch states and target kinds after the engine's own plugin loader ran (tests/inside/plugin_state.py)."""
    argv = ["python", "tests/inside/plugin_state.py", engine] + ([] if loader else ["--no-loader"])
    return run_inside(engine, version, argv, flags)


def pytest_collection_modifyitems(config, items):
    if os.environ.get("GRAPHFIX_SKIP_ENGINES") == "1":
        skip = pytest.mark.skip(reason="GRAPHFIX_SKIP_ENGINES=1")
        for item in items:
            if "engine" in item.keywords:
                item.add_marker(skip)
