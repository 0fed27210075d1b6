"""Fake engines for the core's unit tests: a distribution with a version, and target modules
written to a temporary folder so they can be imported before or after ``apply()``."""

import importlib
import sys
import textwrap
import uuid

import pytest

from graphfix.patch import Patch, Verdict
from graphfix.probes import code_refs
from graphfix.registry import Registry

BUGGY_SRC = '''
class Runner:
    def size(self, n):
        return n * 2

def helper(x):
    return x + 1
'''


class FakeEngine:
    """One fake engine distribution (``name`` at ``version``) with one target module."""

    def __init__(self, root, version="1.0", source=BUGGY_SRC):
        self.root, self.version = root, version
        self.dist = "fakeeng" + uuid.uuid4().hex[:8]
        self.module = self.dist + "_mod"
        info = root / f"{self.dist}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {self.dist}\nVersion: {version}\n")
        (root / f"{self.module}.py").write_text(textwrap.dedent(source))
        self.registry = Registry()

    def imported(self):
        return importlib.import_module(self.module)

    def patch(self, affected=">=1.0,<2", wrapper=None, qualname="Runner.size", probe=None, **extra):
        patch = Patch(id=f"{self.dist}.size", engine=self.dist, affected=affected, fixed_in="2.0",
                      upstream="test", summary="doubles the result", registry=self.registry, **extra)

        def doubling(wrapped, instance, args, kwargs):
            return wrapped(*args, **kwargs) * 2

        patch.wraps(self.module, qualname)(wrapper or doubling)

        def default_probe(t):
            refs = code_refs(t[qualname])
            if "fixed_marker" in refs:
                return Verdict.fixed("marker present")
            if "n" in refs:
                return Verdict.buggy("multiplies n")
            return Verdict.drifted("unknown body")

        patch.probe(probe or default_probe)
        return patch

    def state(self):
        (row,) = self.registry.status(self.dist)
        return row


@pytest.fixture
def engine(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    made = []

    def make(**kw):
        sub = tmp_path / uuid.uuid4().hex[:6]
        sub.mkdir()
        monkeypatch.syspath_prepend(str(sub))
        importlib.invalidate_caches()
        made.append(FakeEngine(sub, **kw))
        return made[-1]

    yield make
    for eng in made:
        eng.registry.remove()
        sys.modules.pop(eng.module, None)
