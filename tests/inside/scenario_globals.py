"""Runs INSIDE a real engine release (through the harness): run one patch's shipped scenario (every case,
graphfix off) while recording every assignment to an attribute of a torch or engine module, and print
``{"assigned": [...], "changed_after": [...], "errors": {...}}`` as JSON. ``assigned``: attributes set from
outside a module (``module.x = ...``, ``setattr``), what a monkeypatch does; ``changed_after``: module
attributes not identical after the run (a module's own ``global`` writes included).

The scenario runs once first so that everything it imports is imported; then each loaded ``torch*`` and
engine module gets a recording module class for the second run (a test's own instrument).

usage: python tests/inside/scenario_globals.py sglang|vllm PATCH_ID
"""

import json
import sys
import types

from graphfix.scenarios import _run, load

engine, pid = sys.argv[1], sys.argv[2]
sc = load(engine)[pid]


def run_all():
    return {name: _run(sc, case) for name, case in sc.cases.items()}


run_all()
assigned = []


class Recording(types.ModuleType):
    def __setattr__(self, name, value):
        if name != "__class__":  # this script's own un-instrumenting
            assigned.append(f"{self.__name__}.{name}")
        super().__setattr__(name, value)

    def __delattr__(self, name):
        assigned.append(f"{self.__name__}.{name} (deleted)")
        super().__delattr__(name)


watched = {}
for name, mod in list(sys.modules.items()):
    if type(mod) is types.ModuleType and name.split(".")[0] in ("torch", engine):
        watched[name] = (mod, dict(vars(mod)))
        mod.__class__ = Recording
errors = {name: obs["error"] for name, obs in run_all().items() if "error" in obs}
for mod, _ in watched.values():
    mod.__class__ = types.ModuleType
MISSING = object()
changed = sorted(f"{name}.{attr}" for name, (mod, before) in watched.items() for attr in set(before) | set(vars(mod))
                 if before.get(attr, MISSING) is not vars(mod).get(attr, MISSING))
print(json.dumps({"assigned": sorted(set(assigned)), "changed_after": changed, "errors": errors,
                  "watched": len(watched)}))
