"""Demo: graphfix on real engine releases, in the CPU environments harness/ builds (scripts/demo.sh).

Per release: one line per patch of the engine installed there -- state, verdict and one case's
before -> after, as ``graphfix verify`` prints it -- then the release's verdict; at the end one verdict
for all. ``--verbose`` adds every case's before and after (``graphfix verify -v``), the build log and
more of the engine's own output where a run fails. Exit status 1 when any release fails.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import engines  # noqa: E402

# The fewest releases that show every SGLang patch and vllm.spec_prefill_metadata applied and fixed (0.5.14:
# graph_pool; 0.5.18: logits_rows; both: warmup_hook, capture_stream; vLLM 0.25.1) and a fixed release where
# the patches retire themselves (0.5.19). Others as arguments, e.g. vllm==0.22.1 vllm==0.29.0.
DEFAULT = ["sglang==0.5.14", "sglang==0.5.18", "sglang==0.5.19", "vllm==0.25.1"]


@dataclass
class Run:
    """One release's ``graphfix verify``: what it printed and how long the environment and the run took."""

    spec: str
    returncode: int
    stdout: str
    stderr: str = ""
    env_seconds: float = 0.0
    verify_seconds: float = 0.0


@dataclass
class Row:
    id: str
    state: str
    verdict: str  # FIXED, NOT FIXED, NO BUG SHOWN for an applied patch; "-" otherwise
    lines: list  # verify's line, then (with -v) its indented case lines


def rows(stdout: str, engine: str) -> list[Row]:
    """``graphfix verify``'s lines for ``engine``'s patches, with the case lines that follow them under
    ``-v``. Anything else on stdout (vLLM logs there) is dropped."""
    found: list[Row] = []
    for line in stdout.splitlines():
        m = re.match(rf"({re.escape(engine)}\.\w+) +(\S+) +(.+?)(?:  |$)", line)
        if m:
            found.append(Row(m.group(1), m.group(2), m.group(3), [line]))
        elif found and line.startswith("    "):
            found[-1].lines.append(line)
    return found


def verdict(run: Run, found: list[Row]) -> tuple[bool, str]:
    """(ok, one line) for one release."""
    if run.returncode not in (0, 1) or not found:
        return False, f"ERROR: graphfix verify exited with status {run.returncode} and no patch lines"
    failed = [r.id for r in found if r.state == "applied" and r.verdict != "FIXED"]
    if run.returncode or failed:
        return False, "FAILED: " + (", ".join(f"{r.id} {r.verdict}" for r in found if r.id in failed)
                                    or f"graphfix verify exited with status {run.returncode}")
    fixed = sum(r.state == "applied" for r in found)
    others = Counter(r.state for r in found if r.state != "applied")
    parts = [f"{fixed} applied, each FIXED before \u2192 after"] if fixed else ["nothing to fix here"]
    parts += [f"{n} {state}" for state, n in others.items()]
    return True, "ok: " + "; ".join(parts)


def report(run: Run, verbose: bool = False) -> tuple[bool, list[str]]:
    """The lines the demo prints for one release, and whether it passed."""
    engine, version = engines.parse_spec(run.spec)
    found = rows(run.stdout, engine)
    ok, summary = verdict(run, found)
    timing = f"verify {run.verify_seconds:.0f} s" + (f", environment {run.env_seconds:.0f} s"
                                                     if run.env_seconds >= 1 else "")
    out = [f"{engine} {version}  ({timing})"]
    out += ["  " + line for r in found for line in (r.lines if verbose else r.lines[:1])]
    out.append(f"  => {summary}")
    if not ok:  # the end of what the run printed (the engine's own output included), to see why
        tail = [line for line in (run.stdout + "\n" + run.stderr).splitlines() if line.strip()]
        out += ["  | " + line for line in tail[-40 if verbose else -8:]]
    return ok, out


def _releases(n: int) -> str:
    return f"{n} release" + ("s" if n != 1 else "")


def final(results: list[tuple[str, bool]], seconds: float) -> str:
    failed = [spec for spec, ok in results if not ok]
    if failed:
        ok = len(results) - len(failed)
        return f"demo: FAILED on {', '.join(failed)} ({ok} of {_releases(len(results))} ok; {seconds:.0f} s)"
    return f"demo: ok on {_releases(len(results))}: every applied patch FIXED before \u2192 after ({seconds:.0f} s)"


def verify(spec: str, verbose: bool) -> Run:
    engine, version = engines.parse_spec(spec)
    start = time.monotonic()
    env = engines.ensure(engine, version)
    ready = time.monotonic()
    # cwd outside the checkout: the release imports the graphfix harness installed, as an operator's would
    proc = env.run(["python", "-m", "graphfix", "verify", *(["-v"] if verbose else [])], check=False,
                   cwd=tempfile.gettempdir(), timeout=900)
    return Run(spec, proc.returncode, proc.stdout, proc.stderr, ready - start, time.monotonic() - ready)


def _interleaved(specs):
    """Alternate engines, so that the two base environments (and first imports) proceed side by side."""
    by_engine: dict[str, list] = {}
    for spec in specs:
        by_engine.setdefault(engines.parse_spec(spec)[0], []).append(spec)
    queues, out = list(by_engine.values()), []
    while any(queues):
        out += [q.pop(0) for q in queues if q]
    return out


def _prefetch(specs):
    """Build the release trees ahead of the runs (downloads overlap with the CPU work of earlier runs)."""
    for spec in specs:
        try:
            engines.ensure_release(*engines.parse_spec(spec))
        except Exception:  # noqa: BLE001 - the run of that release builds it again and reports the error
            pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("releases", nargs="*", default=DEFAULT, help=f"engine==version ... (default: {' '.join(DEFAULT)})")
    ap.add_argument("-v", "--verbose", action="store_true", help="every case's before and after, the build log")
    ap.add_argument("--jobs", type=int, default=2, help="releases verified at once (default 2)")
    args = ap.parse_args(argv)
    for spec in args.releases:
        try:
            engines.parse_spec(spec)
        except ValueError as exc:
            ap.error(str(exc))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("  [harness] %(message)s"))
    # a cold start builds the environments first: say so (one line per directory built), not silently
    handler.addFilter(lambda r: args.verbose or r.getMessage().startswith("built "))
    logging.getLogger("harness").addHandler(handler)
    logging.getLogger("harness").setLevel(logging.DEBUG if args.verbose else logging.INFO)

    start = time.monotonic()
    print(f"graphfix demo: graphfix verify in {_releases(len(args.releases))} of the engines, on CPU "
          f"(environments cached under {engines.CACHE}; a cold start builds them first)", flush=True)
    schedule = _interleaved(args.releases)
    threading.Thread(target=_prefetch, args=(schedule,), daemon=True).start()
    results = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {spec: pool.submit(verify, spec, args.verbose) for spec in schedule}
        for spec in args.releases:
            try:
                run = futures[spec].result()
            except Exception as exc:  # noqa: BLE001 - a build that failed: say so, go on with the others
                run = Run(spec, -1, "", f"{type(exc).__name__}: {exc}")
            ok, lines = report(run, args.verbose)
            print("\n" + "\n".join(lines), flush=True)
            results.append((spec, ok))
    print("\n" + final(results, time.monotonic() - start))
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
