"""The demo's output format (scripts/demo.py), on `graphfix verify` output made by the real CLI from canned
scenario results: no engine run."""

import importlib.util
import sys

import pytest

from graphfix import cli, scenarios
from graphfix.scenarios import Scenario

from .test_docs import ROOT

spec = importlib.util.spec_from_file_location("graphfix_demo", ROOT / "scripts" / "demo.py")
demo = sys.modules["graphfix_demo"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(demo)


def pools(obs):
    return f"{obs['pools']} pool(s)"


SCENARIOS = [
    Scenario("sglang.fake_pool", None, {"two_phases": {}, "one_phase": {}}, fixed=lambda o: o["pools"] == 1,
             describe=pools, controls=("one_phase",)),
    Scenario("sglang.fake_retired", None, {"default": {}}, fixed=lambda o: o["pools"] == 1, describe=pools),
]


def results(after_two_phases):
    return {
        "sglang.fake_pool": {"state": "applied", "reason": "each backend makes its own pool", "cases": {
            "two_phases": {"off": {"pools": 2}, "on": {"pools": after_two_phases}},
            "one_phase": {"off": {"pools": 1}, "on": {"pools": 1}}}},
        "sglang.fake_retired": {"state": "retired", "reason": "already has the upstream fix", "cases": {
            "default": {"off": {"pools": 1}, "on": None}}},
    }


@pytest.fixture
def verify_output(monkeypatch, capsys):
    """``graphfix verify [-v]`` stdout and exit status, as the real CLI prints them for canned results."""
    monkeypatch.setattr(cli, "_installed_engines", lambda: ["sglang"])
    monkeypatch.setattr(cli, "_import_targets", lambda engines: None)
    for sc in SCENARIOS:
        monkeypatch.setitem(scenarios._SCENARIOS, sc.patch_id, sc)

    def run(after_two_phases, *options):
        monkeypatch.setattr(scenarios, "observe", lambda engine: results(after_two_phases))
        rc = cli.main(["verify", *options])
        return rc, capsys.readouterr().out

    return run


ENGINE_LOG = "INFO 11-30 17:47:30 [scheduler.py:252] Chunked prefill is enabled with max_num_batched_tokens=100.\n"


def test_one_line_per_patch_and_the_release_verdict(verify_output):
    rc, out = verify_output(1)
    run = demo.Run("sglang==0.5.14", rc, ENGINE_LOG + out, verify_seconds=12)
    ok, lines = demo.report(run)
    assert ok and rc == 0
    assert lines[0] == "sglang 0.5.14  (verify 12 s)"
    pool, retired = lines[1:3]
    assert pool.split()[:3] == ["sglang.fake_pool", "applied", "FIXED"]
    assert "2 pool(s) \u2192 1 pool(s)" in pool and "(other cases: 1 unchanged)" in pool  # the control is no fix
    assert retired.split()[:3] == ["sglang.fake_retired", "retired", "-"] and "already has" in retired
    assert lines[3] == "  => ok: 1 applied, each FIXED before \u2192 after; 1 retired"
    assert len(lines) == 4  # the engine's own log lines are not shown
    assert demo.final([(run.spec, ok)], 30) == (
        "demo: ok on 1 release: every applied patch FIXED before \u2192 after (30 s)")


def test_verbose_shows_every_case(verify_output):
    rc, out = verify_output(1, "-v")
    ok, lines = demo.report(demo.Run("sglang==0.5.14", rc, out), verbose=True)
    assert ok and any(line.strip() == "[one_phase] unchanged" for line in lines)
    assert any(line.strip().startswith("before:") for line in lines)
    assert not any(line.strip().startswith("before:") for line in demo.report(demo.Run("sglang==0.5.14", rc, out))[1])


def test_a_patch_that_does_not_fix_fails_the_release_and_the_demo(verify_output):
    rc, out = verify_output(2)
    assert rc == 1
    ok, lines = demo.report(demo.Run("sglang==0.5.14", rc, out))
    assert not ok and "  => FAILED: sglang.fake_pool NOT FIXED" in lines
    assert demo.final([("sglang==0.5.14", ok), ("vllm==0.25.1", True)], 5).startswith(
        "demo: FAILED on sglang==0.5.14 (1 of 2 releases ok")


def test_a_run_without_patch_lines_is_an_error():
    ok, lines = demo.report(demo.Run("vllm==0.25.1", 2, ENGINE_LOG, "Traceback ...\nImportError: no vllm"))
    assert not ok and lines[1].startswith("  => ERROR") and lines[-1] == "  | ImportError: no vllm"


def test_releases_are_interleaved_by_engine():
    assert demo._interleaved(demo.DEFAULT) == [
        "sglang==0.5.14", "vllm==0.25.1", "sglang==0.5.18", "sglang==0.5.19"]
