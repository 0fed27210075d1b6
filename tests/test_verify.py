"""`graphfix verify` inside real releases: before -> after for every applicable patch, exit status 0;
on releases where nothing applies it changes nothing and still exits 0."""

import functools
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from graphfix.registry import REGISTRY
from tests.conftest import ROOT, release, releases

pytestmark = pytest.mark.engine


def affected(engine):
    """Every harness release that some patch of ``engine`` claims, plus the newest release."""
    specs = [p.specifier for p in REGISTRY.load(engine)]
    claimed = [v for v in releases(engine) if any(s.contains(v, prereleases=True) for s in specs)]
    return sorted(set(claimed) | {releases(engine)[-1]}, key=releases(engine).index)


CASES = [("sglang", v) for v in affected("sglang")] + [("vllm", v) for v in affected("vllm")]


@functools.lru_cache(maxsize=None)
def verify(engine, version, *options):
    env = release(engine, version)
    return env.run(["python", "-m", "graphfix", "verify", *options], cwd=str(ROOT), check=False, timeout=900)


@pytest.mark.parametrize("engine,version", CASES)
def test_verify_turns_every_applicable_patch_into_the_fixed_behaviour(engine, version):
    proc = verify(engine, version, "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()  # vLLM logs to stdout too: the report starts at a lone "["
    rows = json.loads("\n".join(lines[len(lines) - 1 - lines[::-1].index("["):]))
    ours = [r for r in rows if r["id"].startswith(engine + ".")]
    assert ours, proc.stdout[-2000:]
    for row in ours:
        if row["state"] == "applied":
            assert row["ok"] is True and row["after_fixed"] is True, row
        else:
            assert row["ok"] is None and row["after"] is None, row
    for pid in {r["id"] for r in ours if r["state"] == "applied"}:  # unpatched shows the bug somewhere
        assert any(r["before_fixed"] is False for r in ours if r["id"] == pid), pid


@pytest.mark.parametrize("engine,version", [("sglang", "0.5.14"), ("vllm", "0.25.1")])
def test_verify_prints_before_and_after(engine, version):
    proc = verify(engine, version)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    applied = [p for p in REGISTRY.load(engine) if p.specifier.contains(version)]
    for patch in applied:
        assert f"{patch.id} [" in proc.stdout and "FIXED" in proc.stdout, proc.stdout
    assert "before:" in proc.stdout and "after:" in proc.stdout
