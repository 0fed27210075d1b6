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


def _json_rows(proc):
    lines = proc.stdout.splitlines()  # vLLM logs to stdout too: the report starts at a lone "["
    return json.loads("\n".join(lines[len(lines) - 1 - lines[::-1].index("["):]))


@pytest.mark.parametrize("engine,version", CASES)
def test_verify_turns_every_applicable_patch_into_the_fixed_behaviour(engine, version):
    proc = verify(engine, version, "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ours = [r for r in _json_rows(proc) if r["id"].startswith(engine + ".")]
    assert ours, proc.stdout[-2000:]
    for row in ours:
        if row["state"] != "applied":
            assert row["ok"] is None and row["after"] is None, row
            continue
        assert row["ok"] is not False, row
        if row["verdict"] == "FIXED":  # claimed only where before shows the bug and after the fix
            assert row["kind"] == "fix" and row["before_fixed"] is False and row["after_fixed"] is True, row
        if row["kind"] == "control":
            assert row["verdict"] == "unchanged" and row["before"] == row["after"], row
        if row["kind"] == "addition":
            assert row["verdict"] == "graphfix addition", row
        if row["verdict"] == "unchanged":
            assert row["before"] == row["after"], row
    for pid in {r["id"] for r in ours if r["state"] == "applied"}:  # unpatched shows the bug somewhere
        assert any(r["verdict"] == "FIXED" for r in ours if r["id"] == pid), pid


@pytest.mark.parametrize("engine,version", [("sglang", "0.5.14"), ("vllm", "0.25.1")])
def test_verify_prints_one_line_per_patch_and_details_with_v(engine, version):
    proc = verify(engine, version)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    patches = REGISTRY.load(engine)
    lines = [line for line in proc.stdout.splitlines() if line.split(" ")[0] in {p.id for p in patches}]
    assert sorted(line.split(" ")[0] for line in lines) == sorted(p.id for p in patches), proc.stdout
    for patch in patches:
        (line,) = [line for line in lines if line.startswith(patch.id + " ")]
        if patch.specifier.contains(version) and patch.default == "off":  # opt-in: off unless its flag is on
            assert " disabled " in line and "opt-in" in line, line
        elif patch.specifier.contains(version):
            assert " applied " in line and " FIXED " in line and "\u2192" in line, line
    assert "before:" not in proc.stdout
    detailed = verify(engine, version, "-v")
    assert detailed.returncode == 0 and "before:" in detailed.stdout and "after:" in detailed.stdout


def test_the_capture_stream_guard_is_labelled_as_graphfixs_own_addition():
    rows = [r for r in _json_rows(verify("sglang", "0.5.18", "--json")) if r["id"] == "sglang.capture_stream"]
    guards = [r for r in rows if r["case"].startswith("guard_")]
    assert guards and all(r["kind"] == "addition" and r["verdict"] == "graphfix addition" for r in guards)
    text = verify("sglang", "0.5.18").stdout
    (line,) = [line for line in text.splitlines() if line.startswith("sglang.capture_stream ")]
    assert "3 graphfix addition" in line, line
