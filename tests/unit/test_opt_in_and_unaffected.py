"""The two declarations the vLLM capture-size split needs from the core: an opt-in patch
(``Patch(default="off")``: flag ``auto`` means off, only ``on`` applies it) and a probe verdict saying the
installed code never had the bug (``Verdict.unaffected`` -> state ``not-affected``, even with ``on``)."""

import pytest

from graphfix import Verdict


@pytest.mark.parametrize("value,state", [(None, "disabled"), ("auto", "disabled"), ("off", "disabled"),
                                         ("on", "applied"), ("1", "applied")])
def test_opt_in_patch_applies_only_when_switched_on(engine, monkeypatch, value, state):
    eng = engine()
    patch = eng.patch(default="off")
    eng.imported()
    if value is not None:
        monkeypatch.setenv(patch.flag, value)
    eng.registry.apply(eng.dist)
    row = eng.state()
    assert row.state == state, row
    assert (eng.imported().Runner().size(3) == 12) is (state == "applied")
    if value in (None, "auto"):
        assert "opt-in" in row.reason and f"{patch.flag}=on" in row.reason


def test_default_patch_is_not_opt_in(engine):
    eng = engine()
    eng.patch()
    eng.imported()
    eng.registry.apply(eng.dist)
    assert eng.state().state == "applied"


@pytest.mark.parametrize("value", [None, "on"])
def test_unaffected_verdict_is_not_affected_and_wraps_nothing(engine, monkeypatch, value):
    eng = engine()
    patch = eng.patch(probe=lambda t: Verdict.unaffected("never had the bug"))
    eng.imported()
    if value:
        monkeypatch.setenv(patch.flag, value)
    eng.registry.apply(eng.dist)
    row = eng.state()
    assert row.state == "not-affected" and "never had the bug" in row.reason, row
    assert eng.imported().Runner().size(3) == 6  # as shipped
