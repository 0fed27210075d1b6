"""Runs inside a release env (stdlib only): import the checks given as JSON in argv[1].

Prints one line "HARNESS-PROBE <json>" with per-check results and some facts
about the environment.  Engines log to stdout too, hence the prefix.
"""

import importlib
import importlib.metadata as md
import importlib.util
import json
import sys
import time
import traceback


def _exists(module):
    try:
        return importlib.util.find_spec(module) is not None
    except Exception:  # noqa: BLE001 - a parent failed to import; the import below says why
        return False


def _check(label, candidates):
    present = [c for c in candidates if _exists(c.partition(":")[0])]
    target = (present or candidates)[0]
    module, _, attr = target.partition(":")
    start = time.monotonic()
    result = {"label": label, "module": module, "ok": False, "alternatives": len(candidates) > 1}
    try:
        mod = importlib.import_module(module)
        if attr:
            getattr(mod, attr)
        result["ok"] = True
    except BaseException as exc:  # noqa: BLE001 - report anything, including SystemExit
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc(limit=-6)
    result["seconds"] = round(time.monotonic() - start, 2)
    return result


def main():
    spec = json.loads(sys.argv[1])
    start = time.monotonic()
    results = [_check(label, candidates) for label, candidates in spec["checks"]]
    info = {"import_seconds": round(time.monotonic() - start, 2)}
    for dist in (spec["engine"], "torch", "transformers", "graphfix"):
        try:
            info[dist] = md.version(dist)
        except md.PackageNotFoundError:
            info[dist] = None
    info["entry_points"] = sorted(f"{ep.name}={ep.value}" for ep in md.entry_points(group=spec["group"]))
    print("HARNESS-PROBE " + json.dumps({"results": results, "info": info}), flush=True)


if __name__ == "__main__":
    main()
