"""``graphfix.scenarios.replaced``: the one way a shipped scenario changes a global it does not own."""

import types

import pytest

from graphfix.scenarios import replaced


def _module():
    mod = types.ModuleType("engine_stand_in")
    mod.helper = original = object()
    return mod, original


def test_globals_are_restored_after_the_block():
    mod, original = _module()
    with replaced(mod, helper="fake", added="new") as target:
        assert target is mod and mod.helper == "fake" and mod.added == "new"
    assert mod.helper is original
    assert not hasattr(mod, "added")  # what the module did not have is removed again


def test_globals_are_restored_when_the_block_raises():
    mod, original = _module()
    with pytest.raises(RuntimeError):
        with replaced(mod, helper="fake", added="new"):
            raise RuntimeError("scenario failed")
    assert mod.helper is original and not hasattr(mod, "added")


def test_nested_replacements_unwind_in_order():
    mod, original = _module()
    with replaced(mod, helper="outer"):
        with replaced(mod, helper="inner"):
            assert mod.helper == "inner"
        assert mod.helper == "outer"
    assert mod.helper is original


def test_an_inherited_class_attribute_is_not_copied_onto_the_subclass():
    class Base:
        value = 1

    class Sub(Base):
        pass

    with replaced(Sub, value=2):
        assert Sub.value == 2
    assert "value" not in vars(Sub) and Sub.value == 1
