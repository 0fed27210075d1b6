"""Core behaviour on fake engines: flags, hook order, idempotence, removal, drift, failure, processes."""

import multiprocessing
import subprocess
import sys
import types

import pytest
import wrapt

import graphfix
from graphfix import FlagError, Patch, Verdict
from graphfix.patch import lookup
from graphfix.probes import attr_reads, code_refs, params
from tests.unit.conftest import BUGGY_SRC


def wrappers_on(obj):
    return len(list(wrapt.wrapper_chain(obj))) - 1


# -- flags -----------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["maybe", "2", "", "enable", "auto-ish", " o n "])
def test_bad_patch_flag_is_a_clear_error(engine, monkeypatch, value):
    eng = engine()
    patch = eng.patch()
    monkeypatch.setenv(patch.flag, value)
    with pytest.raises(FlagError) as err:
        eng.registry.apply(eng.dist)
    msg = str(err.value)
    assert patch.flag in msg and repr(value) in msg
    for allowed in ("auto", "on", "off", "true", "false", "yes", "no", "1", "0"):
        assert allowed in msg
    assert eng.state().state == "disabled" and patch.flag in eng.state().reason


@pytest.mark.parametrize("value", ["maybe", "auto", "2"])
def test_bad_master_flag_is_a_clear_error(engine, monkeypatch, value):
    eng = engine()
    eng.patch()
    monkeypatch.setenv("GRAPHFIX", value)
    with pytest.raises(FlagError, match=r"GRAPHFIX=.*allowed values: 1, true, yes, on, 0, false, no, off"):
        eng.registry.apply(eng.dist)


@pytest.mark.parametrize("value,state", [
    ("auto", "applied"), ("AUTO", "applied"), ("on", "applied"), ("1", "applied"), ("True", "applied"),
    ("yes", "applied"), ("off", "disabled"), ("0", "disabled"), ("FALSE", "disabled"), ("no", "disabled"),
])
def test_patch_flag_values(engine, monkeypatch, value, state):
    eng = engine()
    patch = eng.patch()
    eng.imported()
    monkeypatch.setenv(patch.flag, value)
    eng.registry.apply(eng.dist)
    assert eng.state().state == state
    assert (eng.imported().Runner().size(3) == 12) is (state == "applied")


def test_master_switch_turns_everything_off(engine, monkeypatch):
    eng = engine()
    eng.patch()
    monkeypatch.setenv("GRAPHFIX", "0")
    eng.registry.apply(eng.dist)
    assert eng.state().state == "disabled" and "GRAPHFIX=0" in eng.state().reason
    assert eng.imported().Runner().size(3) == 6


# -- post-import hooks ------------------------------------------------------------------------
def test_target_imported_before_apply(engine):
    eng = engine()
    eng.patch()
    mod = eng.imported()
    eng.registry.apply(eng.dist)
    assert eng.state().state == "applied"
    assert mod.Runner().size(3) == 12


def test_target_imported_after_apply(engine):
    eng = engine()
    eng.patch()
    eng.registry.apply(eng.dist)
    assert eng.module not in sys.modules
    assert eng.state().state == "pending"
    assert eng.imported().Runner().size(3) == 12
    assert eng.state().state == "applied"


def test_apply_is_idempotent(engine):
    eng = engine()
    eng.patch()
    eng.registry.apply(eng.dist)
    eng.registry.apply(eng.dist)
    mod = eng.imported()
    eng.registry.apply(eng.dist)
    assert wrappers_on(vars(mod.Runner)["size"]) == 1
    assert mod.Runner().size(3) == 12


def test_a_second_registry_sees_the_wrapper_already_in_place(engine):
    """Two copies of the plugin in one process (or a forked child) must not stack wrappers."""
    eng = engine()
    patch = eng.patch()
    mod = eng.imported()
    eng.registry.apply(eng.dist)
    from graphfix.registry import Registry
    from graphfix.patch import Patch

    twin_registry = Registry()
    twin = Patch(id=patch.id, engine=eng.dist, affected=patch.affected, fixed_in="2.0", upstream="",
                 summary="", registry=twin_registry)
    twin.targets = list(patch.targets)
    twin.probe(patch._probe)
    twin_registry.apply(eng.dist)
    assert twin_registry.status(eng.dist)[0].state == "applied"
    assert "already wrapped" in twin_registry.status(eng.dist)[0].reason
    assert wrappers_on(vars(mod.Runner)["size"]) == 1


def test_remove_restores_the_very_same_objects(engine):
    eng = engine()
    eng.patch()
    mod = eng.imported()
    original = vars(mod.Runner)["size"]
    eng.registry.apply(eng.dist)
    assert vars(mod.Runner)["size"] is not original
    eng.registry.remove()
    assert vars(mod.Runner)["size"] is original
    assert eng.state().state == "disabled" and "removed" in eng.state().reason
    eng.registry.apply(eng.dist)  # and it can come back
    assert mod.Runner().size(3) == 12
    eng.registry.remove()
    assert vars(mod.Runner)["size"] is original


def test_remove_runs_on_remove_hooks(engine):
    eng = engine()
    patch = eng.patch()
    calls = []
    patch.on_remove(lambda: calls.append(1))
    eng.imported()
    eng.registry.apply(eng.dist)
    eng.registry.remove()
    assert calls == [1]


# -- version ranges and probes ----------------------------------------------------------------
def test_fixed_release_retires(engine):
    eng = engine(version="2.0", source="class Runner:\n    def size(self, n):\n        fixed_marker = 1\n        return n * 2\n")
    eng.patch(affected=">=1.0,<2")
    mod = eng.imported()
    original = vars(mod.Runner)["size"]
    eng.registry.apply(eng.dist)
    assert eng.state().state == "retired" and "marker present" in eng.state().reason
    assert vars(mod.Runner)["size"] is original


def test_buggy_code_outside_range_is_not_affected_unless_forced(engine, monkeypatch):
    eng = engine(version="0.9")
    patch = eng.patch(affected=">=1.0,<2")
    mod = eng.imported()
    eng.registry.apply(eng.dist)
    assert eng.state().state == "not-affected" and patch.flag + "=on" in eng.state().reason
    assert mod.Runner().size(3) == 6
    eng.registry.remove()
    monkeypatch.setenv(patch.flag, "on")
    eng.registry.apply(eng.dist)
    assert eng.state().state == "applied" and mod.Runner().size(3) == 12


def test_engine_not_installed(engine):
    eng = engine()
    patch = eng.patch()
    patch.engine = "no-such-engine-dist"
    eng.registry.apply("no-such-engine-dist")
    assert eng.registry.status("no-such-engine-dist")[0].state == "not-installed"


@pytest.mark.parametrize("source,why", [
    ("class Runner:\n    def length(self, n):\n        return n * 2\n", "not found"),            # renamed
    ("class Runner:\n    def size(self):\n        return 4\n", "target shape not recognised"),  # signature
    ("class Runner:\n    def size(self, k):\n        return k * 2\n", "target shape not recognised"),  # body
])
def test_drifted_target_is_left_alone(engine, source, why):
    eng = engine(source=source)
    eng.patch()
    mod = eng.imported()
    before = dict(vars(mod.Runner))
    eng.registry.apply(eng.dist)  # no exception
    row = eng.state()
    assert row.state == "drifted" and why in row.reason
    assert dict(vars(mod.Runner)) == before


def test_probe_that_raises_means_drifted(engine):
    eng = engine()

    def broken(t):
        raise RuntimeError("boom")

    eng.patch(probe=broken)
    mod = eng.imported()
    eng.registry.apply(eng.dist)
    assert eng.state().state == "drifted" and "boom" in eng.state().reason
    assert mod.Runner().size(3) == 6


def test_installer_that_raises_means_failed_and_untouched(engine):
    eng = engine()
    patch = eng.patch()
    patch.wraps(eng.module, "helper")(lambda wrapped, instance, args, kwargs: 0)
    mod = eng.imported()
    original_size = vars(mod.Runner)["size"]
    original_helper = mod.helper

    class Frozen(types.ModuleType):  # a module that refuses new attributes after the first wrapper
        def __setattr__(self, name, value):
            if name == "helper":
                raise TypeError("read-only module attribute")
            super().__setattr__(name, value)

    mod.__class__ = Frozen
    eng.registry.apply(eng.dist)  # no exception
    row = eng.state()
    assert row.state == "failed" and "read-only" in row.reason
    assert vars(mod.Runner)["size"] is original_size and mod.helper is original_helper
    mod.__class__ = types.ModuleType


# -- processes --------------------------------------------------------------------------------
def _child_depth(paths, module, dist, qualname):
    sys.path[:0] = paths
    import importlib

    from tests.unit.conftest import FakeEngine
    from pathlib import Path

    eng = FakeEngine.__new__(FakeEngine)
    eng.dist, eng.module, eng.root, eng.version = dist, module, Path(paths[0]), "1.0"
    from graphfix.registry import Registry

    eng.registry = Registry()
    eng.patch()
    eng.registry.apply(dist)  # the plugin loader may run twice in one process
    eng.registry.apply(dist)
    mod = importlib.import_module(module)
    return wrappers_on(vars(mod.Runner)["size"]), mod.Runner().size(3)


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_child_processes_are_patched_once(engine, method):
    eng = engine()
    eng.patch()
    eng.imported()
    eng.registry.apply(eng.dist)  # the parent is patched before the child starts
    ctx = multiprocessing.get_context(method)
    import tests  # noqa: F401  - the repo root must be importable in the child
    paths = [str(eng.root), str(__import__("pathlib").Path(__file__).parents[2])]
    with ctx.Pool(1) as pool:
        depth, value = pool.apply(_child_depth, (paths, eng.module, eng.dist, "Runner.size"))
    assert (depth, value) == (1, 12)


# -- probe helpers ----------------------------------------------------------------------------
def _sample(self, attn_backend):
    hook = getattr(self.model_runner.attn_backend, "on_after_cuda_graph_warmup", None)
    return [x for x in helper_name(attn_backend)] if hook else None


def test_probe_helpers():
    refs = code_refs(_sample)
    assert {"getattr", "model_runner", "attn_backend", "on_after_cuda_graph_warmup", "helper_name", "x"} <= refs
    assert params(_sample) == ("self", "attn_backend")
    assert ("self.model_runner", "attn_backend") in attr_reads(_sample)
    assert code_refs(42) == frozenset() and params(None) == ()


def test_status_cli_works_without_engines():
    out = subprocess.run([sys.executable, "-m", "graphfix", "status", "--json", "--no-import"],
                         capture_output=True, text=True, check=True).stdout
    import json

    rows = json.loads(out)
    assert rows and {"id", "engine", "engine_version", "flag", "flag_value", "state", "reason"} <= set(rows[0])
    assert {r["id"] for r in rows} >= {"sglang.graph_pool"}


def test_patch_spanning_two_modules_decides_once(engine, tmp_path):
    eng = engine()
    patch = eng.patch()
    second = eng.module + "_b"
    (eng.root / f"{second}.py").write_text("def helper(x):\n    return x + 1\n")
    patch.wraps(second, "helper")(lambda wrapped, instance, args, kwargs: wrapped(*args, **kwargs) * 10)
    eng.registry.apply(eng.dist)
    mod = eng.imported()  # the hook imports the sibling module itself
    row = eng.state()
    assert row.state == "applied" and "already wrapped" not in row.reason
    assert mod.Runner().size(3) == 12 and sys.modules[second].helper(1) == 20


def test_a_sibling_still_being_imported_is_waited_for(engine):
    """Import cycle: module B (a target) imports module A (a target) before defining its class."""
    eng = engine()
    patch = eng.patch()
    second = eng.module + "_cyc"
    (eng.root / f"{second}.py").write_text(
        f"import {eng.module}\n\nclass Late:\n    def go(self):\n        return 1\n")
    patch.wraps(second, "Late.go")(lambda wrapped, instance, args, kwargs: wrapped(*args, **kwargs) + 1)
    eng.registry.apply(eng.dist)
    import importlib

    mod_b = importlib.import_module(second)  # A's hook fires while B is half-imported
    assert eng.state().state == "applied", eng.state().reason
    assert mod_b.Late().go() == 2 and eng.imported().Runner().size(3) == 12


@pytest.mark.parametrize("version,state", [("1.0", "drifted"), ("3.0", "not-affected")])
def test_a_target_module_missing_from_the_release(engine, version, state):
    eng = engine(version=version)
    patch = eng.patch()
    patch.needs(eng.module + "_gone")  # this release has no such module
    mod = eng.imported()
    eng.registry.apply(eng.dist)
    row = eng.state()
    assert row.state == state and "does not exist" in row.reason
    assert mod.Runner().size(3) == 6


# -- targets whose kind changed ---------------------------------------------------------------------
@pytest.mark.parametrize("decorator,kind", [
    ("staticmethod", "staticmethod"), ("classmethod", "classmethod"), ("property", "property"),
])
def test_a_target_that_is_no_longer_a_function_is_drifted(engine, decorator, kind):
    eng = engine(source=f"class Runner:\n    @{decorator}\n    def size(n):\n        return 2\n")
    eng.patch()
    mod = eng.imported()
    before = dict(vars(mod.Runner))
    eng.registry.apply(eng.dist)
    row = eng.state()
    assert row.state == "drifted" and kind in row.reason, row
    assert dict(vars(mod.Runner)) == before


def test_a_target_replaced_by_a_proxy_is_drifted(engine):
    eng = engine()
    eng.patch()
    mod = eng.imported()
    proxy = wrapt.FunctionWrapper(vars(mod.Runner)["size"], lambda w, i, a, k: w(*a, **k))  # someone else's
    mod.Runner.size = proxy
    eng.registry.apply(eng.dist)
    assert eng.state().state == "drifted" and "not a plain function" in eng.state().reason
    assert vars(mod.Runner)["size"] is proxy and mod.Runner().size(3) == 6


def test_a_duplicate_patch_id_raises(engine):
    eng = engine()
    eng.patch()
    with pytest.raises(ValueError, match="duplicate patch id"):
        eng.patch()


# -- where a looked-up object comes from ----------------------------------------------------------
def _fixed_renamed(self, bs):
    forward_batch, local_backend, proxies = self.capture_prepare(bs, num_tokens=bs * 2, extra=[1, 2])
    return getattr(local_backend, "on_after_cuda_graph_warmup", None)


def _misnamed(self, bs):
    forward_batch, backend, proxies = self.capture_prepare(bs)
    attn_backend = self.model_runner.attn_backend
    return getattr(attn_backend, "on_after_cuda_graph_warmup", None)


def _from_elsewhere(self, bs, attn_backend):
    return attn_backend.on_after_cuda_graph_warmup


def test_lookup_origins_follow_data_not_names():
    from graphfix.probes import lookup_origins

    hook = "on_after_cuda_graph_warmup"
    assert lookup_origins(_fixed_renamed, hook) == [{"self.capture_prepare()[]"}]
    assert lookup_origins(_misnamed, hook) == [{"self.model_runner.attn_backend"}]
    assert lookup_origins(_from_elsewhere, hook) == [{"attn_backend"}]  # a parameter: origin unknown


# -- fail safe at call time -----------------------------------------------------------------------
class Counting:
    """A fake engine target that counts its calls."""


def _counting_engine(engine, wrapper, source=None):
    eng = engine(source=source or "calls = []\n\nclass Runner:\n    def size(self, n):\n"
                 "        calls.append(n)\n        if n < 0:\n            raise ValueError('engine says no')\n"
                 "        return n * 2\n")
    eng.patch(wrapper=wrapper)
    mod = eng.imported()
    eng.registry.apply(eng.dist)
    assert eng.state().state == "applied"
    return eng, mod


def test_a_wrapper_that_fails_before_the_call_falls_back_to_shipped(engine, caplog):
    def broken(wrapped, instance, args, kwargs):
        raise KeyError("graphfix bug")

    eng, mod = _counting_engine(engine, broken)
    with caplog.at_level("WARNING", logger="graphfix"):
        assert mod.Runner().size(3) == 6 and mod.Runner().size(4) == 8  # shipped behaviour, no error
    assert mod.calls == [3, 4]
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and eng.dist + ".size" in warnings[0].getMessage()
    row = eng.state()
    assert row.state == "failed" and "fell back at call time" in row.reason and "graphfix bug" in row.reason


def test_a_wrapper_that_fails_after_the_call_returns_the_originals_result_once(engine):
    def broken_after(wrapped, instance, args, kwargs):
        result = wrapped(*args, **kwargs)
        return result.no_such_attribute

    eng, mod = _counting_engine(engine, broken_after)
    assert mod.Runner().size(5) == 10
    assert mod.calls == [5]  # the original ran once, not twice
    assert "fell back at call time" in eng.state().reason


def test_the_engines_own_exception_passes_through_unchanged(engine):
    def fine(wrapped, instance, args, kwargs):
        return wrapped(*args, **kwargs) * 2

    eng, mod = _counting_engine(engine, fine)
    with pytest.raises(ValueError, match="engine says no") as err:
        mod.Runner().size(-1)
    assert type(err.value) is ValueError and mod.calls == [-1]
    assert eng.state().state == "applied"  # not graphfix's failure
    assert mod.Runner().size(2) == 8


def test_a_wrapper_failing_while_the_engines_exception_passes_keeps_the_engines_exception(engine):
    def broken_handler(wrapped, instance, args, kwargs):
        try:
            return wrapped(*args, **kwargs)
        except ValueError:
            raise RuntimeError("graphfix bug in a handler")

    eng, mod = _counting_engine(engine, broken_handler)
    with pytest.raises(ValueError, match="engine says no"):
        mod.Runner().size(-1)
    assert mod.calls == [-1] and "fell back at call time" in eng.state().reason


def test_a_deliberate_refusal_passes_through(engine):
    def refuses(wrapped, instance, args, kwargs):
        raise graphfix.Refusal("two captures at once")

    eng, mod = _counting_engine(engine, refuses)
    with pytest.raises(graphfix.Refusal):
        mod.Runner().size(1)
    assert mod.calls == [] and eng.state().state == "applied"


def test_a_module_whose_attribute_access_raises_stays_importable(engine):
    eng = engine(source=BUGGY_SRC_WITH_LAZY_ATTRS)
    eng.patch(qualname="Lazy.size")
    eng.registry.apply(eng.dist)
    mod = eng.imported()  # the decision runs inside this import: it must not raise
    row = eng.state()
    assert row.state == "drifted" and "lazy attribute boom" in row.reason
    assert mod.Runner().size(3) == 6


BUGGY_SRC_WITH_LAZY_ATTRS = '''
class Runner:
    def size(self, n):
        return n * 2


def __getattr__(name):
    raise RuntimeError("lazy attribute boom")
'''


# -- processes, imports, removal ------------------------------------------------------------------
def test_a_child_forked_while_another_thread_holds_the_registry_lock_does_not_hang(engine):
    import os
    import threading
    import time

    eng = engine()
    eng.patch()
    eng.imported()
    held, release = threading.Event(), threading.Event()

    def hold():
        with eng.registry._lock:
            held.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    pid = os.fork()
    if pid == 0:  # child: the holder thread does not exist here
        try:
            eng.registry.apply(eng.dist)
            ok = eng.state().state == "applied" and eng.imported().Runner().size(3) == 12
        finally:
            os._exit(0 if ok else 3)
    try:
        for _ in range(600):  # up to 60 s; a hung child is killed and the test fails
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung on the registry lock")
    finally:
        release.set()
        holder.join()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_apply_called_from_inside_a_target_modules_import_decides_once_it_is_complete(engine, monkeypatch):
    """The engine's plugin loader runs while the target module is half-imported (its class not yet defined)."""
    import builtins

    eng = engine(source="import builtins\nbuiltins._graphfix_test_load_plugins()\n" + BUGGY_SRC)
    eng.patch()
    monkeypatch.setattr(builtins, "_graphfix_test_load_plugins", lambda: eng.registry.apply(eng.dist), raising=False)
    mod = eng.imported()
    row = eng.state()
    assert row.state == "applied", row.reason  # not "drifted: Runner.size not found", for good
    assert mod.Runner().size(3) == 12


def test_remove_completes_when_someone_else_replaced_a_target(engine):
    eng = engine()
    first = eng.patch()
    second = Patch(id=f"{eng.dist}.helper", engine=eng.dist, affected=">=1.0,<2", fixed_in="2.0", upstream="t",
                   summary="t", registry=eng.registry)
    second.wraps(eng.module, "helper")(lambda wrapped, instance, args, kwargs: wrapped(*args, **kwargs) + 100)
    second.probe(lambda t: Verdict.buggy("always"))
    mod = eng.imported()
    eng.registry.apply(eng.dist)
    assert mod.Runner().size(3) == 12 and mod.helper(1) == 102
    wrapped_size = vars(mod.Runner)["size"]

    def theirs(self, n):  # someone else's replacement, calling what was there (our wrapper) inside
        return wrapped_size(self, n) + 1

    mod.Runner.size = theirs
    eng.registry.remove()  # no exception, and every patch is removed
    assert vars(mod.Runner)["size"] is theirs  # their replacement stays
    assert mod.Runner().size(3) == 7  # our wrapper inside it now passes calls through
    assert mod.helper(1) == 2 and not hasattr(mod.helper, "__wrapped__")
    states = {r.id: r for r in eng.registry.status(eng.dist)}
    assert states[first.id].state == "disabled" and "replaced by someone else" in states[first.id].reason
    assert states[second.id].state == "disabled"


def test_status_reflects_outside_reassignment_and_reload(engine):
    import importlib

    eng = engine()
    eng.patch()
    mod = eng.imported()
    eng.registry.apply(eng.dist)
    assert eng.state().state == "applied"
    importlib.reload(mod)  # the class is rebuilt from source: the wrapper is gone
    assert mod.Runner().size(3) == 6
    row = eng.state()
    assert row.state == "drifted" and "replaced after graphfix wrapped it" in row.reason

    eng2 = engine()
    eng2.patch()
    mod2 = eng2.imported()
    eng2.registry.apply(eng2.dist)
    mod2.Runner.size = lambda self, n: n  # plain reassignment
    assert eng2.state().state == "drifted"


# -- inputs operators get wrong -------------------------------------------------------------------
def test_an_unknown_graphfix_variable_is_logged_with_the_closest_flag(engine, monkeypatch, caplog):
    eng = engine()
    patch = eng.patch()
    typo = patch.flag.replace("_SIZE", "SIZE")  # GRAPHFIX_FAKEENGxxxx_SIZE -> ..._FAKEENGxxxxSIZE
    monkeypatch.setenv(typo, "off")
    monkeypatch.setenv("GRAPHFIX_LOG", "debug")  # a graphfix variable that is not a patch flag: known
    with caplog.at_level("WARNING", logger="graphfix"):
        eng.registry.apply(eng.dist)
    messages = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert [m for m in messages if typo in m and f"did you mean {patch.flag}?" in m], messages
    assert not [m for m in messages if "GRAPHFIX_LOG" in m]
    assert eng.state().state == "pending"  # the typo did not switch anything off


def test_status_reports_unknown_variables_and_keeps_one_line_per_row(monkeypatch):
    env = dict(__import__("os").environ, GRAPHFIX_SGLANG_GRAPHPOOL="off", GRAPHFIX_SGLANG_LOGITS_ROWS="off\nauto")
    proc = subprocess.run([sys.executable, "-m", "graphfix", "status", "--no-import"], env=env,
                          capture_output=True, text=True)
    lines = proc.stdout.splitlines()
    assert any("GRAPHFIX_SGLANG_GRAPHPOOL" in line and "did you mean GRAPHFIX_SGLANG_GRAPH_POOL?" in line
               for line in lines), proc.stdout
    rows = [line for line in lines if line.split(" ")[0] in {p.id for p in graphfix.registry.REGISTRY.load()}]
    assert len(rows) == len(graphfix.registry.REGISTRY.load())  # the newline did not split a row
    (logits,) = [line for line in rows if line.startswith("sglang.logits_rows")]
    assert "GRAPHFIX_SGLANG_LOGITS_ROWS=off\\nauto" in logits and "disabled" in logits


def test_an_engine_without_dist_info_is_decided_from_its_version_attribute(engine, tmp_path, monkeypatch):
    eng = engine()
    patch = eng.patch()
    package = "srcengine" + eng.dist[-6:]
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text('__version__ = "1.0"\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    patch.engine = package  # a checkout on PYTHONPATH: no dist-info for it anywhere
    eng.imported()
    eng.registry.apply(package)
    (row,) = eng.registry.status(package)
    assert row.engine_version == "1.0" and row.state == "applied", row
    sys.modules.pop(package, None)


@pytest.mark.parametrize("version,affected,fixed_in,expected", [
    ("0.5.14.post1", "==0.5.14", "0.5.15", True),               # a post release of an affected release
    ("0.5.15.post1", ">=0.5.15,<0.5.19", "0.5.19", True),
    ("0.5.18+vendor.3", ">=0.5.15,<0.5.19", "0.5.19", True),    # a local build of an affected release
    ("0.5.19rc1", ">=0.5.15,<0.5.19", "0.5.19", True),          # pre-release of the fixed release: the probe decides
    ("0.5.19.dev12+gabc", ">=0.5.15,<0.5.19", "0.5.19", True),
    ("0.29.0rc1.dev12+gabc", ">=0.23.0", "0.29.0", True),
    ("0.29.0rc1.dev12+gabc", ">=0.23.0,<0.26.0", "0.26.0", False),
    ("0.5.20rc1", ">=0.5.15,<0.5.19", "0.5.19", False),
    ("0.5.13.post2", ">=0.5.14,<0.5.19", "0.5.19", False),
    ("not-a-version", ">=0.5.14", "0.5.19", False),
])
def test_post_dev_rc_and_local_versions(version, affected, fixed_in, expected):
    from graphfix.registry import _in_range

    patch = types.SimpleNamespace(specifier=__import__("packaging.specifiers").specifiers.SpecifierSet(affected),
                                  fixed_in=fixed_in)
    assert _in_range(patch, version) is expected


@pytest.mark.parametrize("source,state", [
    (BUGGY_SRC, "applied"),
    ("class Runner:\n    def size(self, n):\n        fixed_marker = 1\n        return n * 2\n", "retired"),
])
def test_a_pre_release_of_the_fixed_release_is_decided_by_the_probe(engine, source, state):
    eng = engine(version="2.0rc1", source=source)
    eng.patch(affected=">=1.0,<2")  # fixed_in 2.0
    eng.imported()
    eng.registry.apply(eng.dist)
    assert eng.state().state == state, eng.state().reason


# -- honest verify: what a case may be called -----------------------------------------------------
@pytest.fixture
def verdicts():
    from graphfix import scenarios

    scenarios.scenario("fake.judged", cases={"bug": {}, "ctl": {}, "guard": {}}, controls=("ctl",),
                       additions=("guard",), fixed=lambda o: o.get("good"))(lambda: {})
    yield scenarios
    scenarios._SCENARIOS.pop("fake.judged")


def test_verify_calls_a_case_fixed_only_where_before_shows_the_bug(verdicts):
    judge = verdicts.judge
    assert judge("fake.judged", "bug", {"good": False}, {"good": True}) == ("FIXED", True)
    assert judge("fake.judged", "bug", {"good": True}, {"good": True}) == ("unchanged", True)
    assert judge("fake.judged", "bug", {"good": True, "n": 1}, {"good": True, "n": 2}) == ("fixed before and after", True)
    assert judge("fake.judged", "bug", {"good": False}, {"good": False}) == ("NOT FIXED", False)
    assert judge("fake.judged", "bug", {"good": False}, {"error": "boom"}) == ("NOT FIXED", False)


def test_verify_controls_must_stay_the_same_and_additions_are_labelled(verdicts):
    judge = verdicts.judge
    assert judge("fake.judged", "ctl", {"good": True}, {"good": True}) == ("unchanged", True)
    assert judge("fake.judged", "ctl", {"good": True}, {"good": True, "x": 1}) == ("CHANGED", False)  # a wrong wrapper
    assert judge("fake.judged", "guard", {"good": False}, {"good": True}) == ("graphfix addition", True)
    assert judge("fake.judged", "guard", {"good": False}, {"good": False}) == ("ADDITION FAILED", False)
    assert verdicts.judge_patch({"bug": ("FIXED", True), "ctl": ("unchanged", True)}) == ("FIXED", True)
    assert verdicts.judge_patch({"bug": ("unchanged", True), "guard": ("graphfix addition", True)})[1] is False
    assert verdicts.judge_patch({"bug": ("FIXED", True), "ctl": ("CHANGED", False)}) == ("NOT FIXED", False)


def test_the_other_engines_flags_are_not_unknown(monkeypatch, caplog):
    monkeypatch.setenv("GRAPHFIX_VLLM_CUDAGRAPH_SIZES", "off")
    monkeypatch.setenv("GRAPHFIX_SGLANG_GRAPH_POOL", "on")
    from graphfix.registry import Registry

    assert Registry().unknown_variables() == []


def test_a_negative_answer_while_another_module_is_mid_import_is_not_final(engine):
    """The probe needs something a module still being imported defines at its end (a lazy import)."""
    import importlib

    eng = engine()
    outer = eng.module + "_outer"
    (eng.root / f"{outer}.py").write_text(f"import {eng.module}\n\nREADY = True\n")

    def probe(t):
        if not getattr(sys.modules.get(outer), "READY", False):
            return Verdict.drifted(f"{outer}.READY missing")
        return Verdict.buggy("ready")

    eng.patch(probe=probe)
    eng.registry.apply(eng.dist)
    importlib.import_module(outer)  # the target's hook fires while `outer` is half-imported
    assert eng.state().state == "applied", eng.state().reason
    assert eng.imported().Runner().size(3) == 12


def test_two_patches_may_wrap_one_target(engine):
    """graphfix's own wrapper on a target is not a 'target of another kind' for a second patch on it."""
    eng = engine()
    eng.patch()
    second = Patch(id=f"{eng.dist}.plus_one", engine=eng.dist, affected=">=1.0,<2", fixed_in="2.0",
                   upstream="test", summary="adds one", registry=eng.registry)
    second.wraps(eng.module, "Runner.size")(lambda wrapped, instance, args, kwargs: wrapped(*args, **kwargs) + 1)
    second.probe(lambda t: Verdict.buggy("stacked"))
    mod = eng.imported()
    eng.registry.apply(eng.dist)
    states = {r.id: r.state for r in eng.registry.status(eng.dist)}
    assert set(states.values()) == {"applied"}, states
    assert mod.Runner().size(3) == 13  # (3 * 2) * 2 + 1: both wrappers act
