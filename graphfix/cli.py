"""The ``graphfix`` command: ``status`` (one row per patch: state and reason), ``verify`` (each patch's
scenario on the installed engine, patch off then on: one line per patch) and ``matrix`` (the
supported-release table, generated from the patch registry)."""

from __future__ import annotations

import argparse
import dataclasses
from collections import Counter
import importlib
import json
import logging
import sys

from . import FlagError, apply, status
from .registry import ENGINE_PACKAGES, REGISTRY, engine_version


def _installed_engines() -> list[str]:
    return [e for e in ENGINE_PACKAGES if engine_version(e) is not None]


def _cell(text: str) -> str:
    """One table cell on one line: control characters (a newline in a flag value) shown escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _import_targets(engines: list[str]) -> None:
    """Import each patch's target modules in ``engines``, so that no decision waits for an import."""
    for patch in REGISTRY.load():
        if patch.engine not in engines:
            continue
        for module in patch.modules:
            try:
                importlib.import_module(module)
            except Exception as exc:  # noqa: BLE001 - absent in this release: the row says so
                logging.getLogger("graphfix").debug("cannot import %s: %s", module, exc)


def _resolve(engines: list[str], imports: bool) -> str | None:
    """Apply (so every decision is taken) and import each patch's target modules; return a flag error."""
    try:
        apply()
    except FlagError as exc:
        return str(exc)
    if imports:
        _import_targets(engines)
    return None


def cmd_status(args) -> int:
    engines = _installed_engines()
    error = _resolve(engines, imports=not args.no_import)
    rows = status()
    unknown = REGISTRY.unknown_variables()
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
        for message in unknown:
            print(f"graphfix: {message}", file=sys.stderr)
    else:
        fmt = "{:<30} {:<7} {:<11} {:<40} {:<15} {}"
        print(fmt.format("patch", "engine", "version", "flag", "state", "reason"))
        for r in rows:
            flag = f"{r.flag}={r.flag_value}"
            print(fmt.format(*map(_cell, (r.id, r.engine, r.engine_version or "-", flag, r.state, r.reason))))
        for message in unknown:
            print(_cell(f"warning: {message}"))
    if error:
        print(f"graphfix: {error}", file=sys.stderr)
        return 2
    return 0


def cmd_verify(args) -> int:
    from .scenarios import _SCENARIOS, is_fixed, judge, judge_patch, observe, render

    report, failed, lines = [], False, []
    for engine in _installed_engines():
        _import_targets([engine])  # a patch whose scenario never imports its targets is decided, not pending
        try:
            results = observe(engine)
        except FlagError as exc:
            print(f"graphfix: {exc}", file=sys.stderr)
            return 2
        for pid, res in results.items():
            applied, verdicts = res["state"] == "applied", {}
            for case, obs in res["cases"].items():
                before, after = obs.get("off"), obs.get("on")
                verdict, ok = judge(pid, case, before, after) if applied else (res["state"], None)
                verdicts[case] = (verdict, ok)
                report.append({
                    "id": pid, "case": case, "kind": _SCENARIOS[pid].kind(case), "state": res["state"],
                    "reason": res["reason"], "before": before, "after": after, "verdict": verdict,
                    "before_fixed": is_fixed(pid, before), "after_fixed": is_fixed(pid, after), "ok": ok,
                })
            if not applied:
                lines.append(f"{pid:<27} {res['state']:<13} -  {res['reason']}")
                continue
            verdict, ok = judge_patch(verdicts)
            failed |= not ok
            shown = next((c for c, (v, _) in verdicts.items() if v == verdict), next(iter(verdicts)))
            obs = res["cases"][shown]
            counts = Counter(v for c, (v, _) in verdicts.items() if c != shown)
            more = "  (other cases: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + ")" if counts else ""
            lines.append(f"{pid:<27} {res['state']:<13} {verdict}  [{shown}] {render(pid, obs.get('off'))} "
                         f"\u2192 {render(pid, obs.get('on'))}{more}")
            if args.details:
                lines.append(f"    ({res['reason']})")
                for case, (v, _) in verdicts.items():
                    c = res["cases"][case]
                    lines.append(f"    [{case}] {v}")
                    lines.append(f"        before: {render(pid, c.get('off'))}")
                    lines.append(f"        after:  {render(pid, c.get('on'))}")
    if args.json:
        print(json.dumps(report, indent=2))
    elif not report:
        print("graphfix verify: no supported engine installed")
    else:
        print("\n".join(lines))
    return 1 if failed else 0


def matrix() -> str:
    """The supported-release matrix as a Markdown table, generated from the patch registry."""
    lines = ["| patch | engine | affected releases | first fixed | flag | upstream |",
             "|---|---|---|---|---|---|"]
    for p in sorted(REGISTRY.load(), key=lambda p: (p.engine, p.id)):
        lines.append(f"| `{p.id}` | {p.engine} | `{p.affected}` | {p.fixed_in} | `{p.flag}` | {p.upstream} |")
    return "\n".join(lines)


def cmd_matrix(args) -> int:
    print(matrix())
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="graphfix", description=__doc__)
    ap.add_argument("-v", "--verbose", action="store_true", help="log every patch decision to stderr")
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("status", help="one row per known patch: engine, flag, state, reason")
    st.add_argument("--json", action="store_true")
    st.add_argument("--no-import", action="store_true", help="do not import the engines' target modules")
    ve = sub.add_parser("verify", help="run each applicable patch's scenario off, then on: one line per patch")
    ve.add_argument("--json", action="store_true")
    ve.add_argument("-v", "--verbose", dest="details", action="store_true", help="every case, before and after")
    sub.add_parser("matrix", help="print the supported-release matrix (Markdown)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(name)s: %(message)s")
    return {"status": cmd_status, "verify": cmd_verify, "matrix": cmd_matrix}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
