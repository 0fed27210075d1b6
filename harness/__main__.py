"""python -m harness {build,run,path,check,pins} -- see harness/README.md."""

import argparse
import json
import logging
import os
import subprocess
import sys
import time

from harness import engines


class _Elapsed(logging.Formatter):
    def format(self, record):
        return f"[{record.relativeCreated / 1000:6.1f}s] {record.getMessage()}"


def _specs(args):
    if getattr(args, "all", False) or not (args.specs or args.engine):
        return [f"{e}=={v}" for e, vs in engines.RELEASES.items() for v in vs]
    specs = list(args.specs)
    for engine in args.engine or ():
        specs += [f"{engine}=={v}" for v in engines.RELEASES[engine]]
    for spec in specs:
        engines.parse_spec(spec)
    return specs


def _ensure(spec, args):
    engine, version = engines.parse_spec(spec)
    return engines.ensure(engine, version, graphfix=not args.no_graphfix, repo=args.repo)


def cmd_build(args):
    start = time.monotonic()
    specs = engines.build_all(_specs(args), jobs=args.jobs)
    if args.graphfix:
        engines.ensure_graphfix(args.repo)
    logging.getLogger("harness").info("%d release(s) ready in %.1fs under %s",
                                      len(specs), time.monotonic() - start, engines.CACHE)
    return 0


def cmd_run(args):
    argv = list(args.command_argv)
    if not argv:
        sys.exit("harness run: give the command after --, e.g. run sglang==0.5.14 -- python -c 'import sglang'")
    env = _ensure(args.spec, args)
    if argv[0] == "python":
        argv[0] = str(env.python)
    return subprocess.call(argv, env=env.env())


def cmd_path(args):
    env = _ensure(args.spec, args)
    info = {"spec": env.spec, "python": str(env.python), "pythonpath": [str(p) for p in env.pythonpath],
            "graphfix": str(env.graphfix) if env.graphfix else None, "cache": str(engines.CACHE)}
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for k, v in info.items():
            print(f"{k:10} {os.pathsep.join(v) if isinstance(v, list) else v}")
        print(f"# export PYTHONPATH={os.pathsep.join(info['pythonpath'])}")
    return 0


def cmd_check(args):
    reports, failed = [], 0
    for spec in _specs(args):
        env = _ensure(spec, args)
        report = engines.check(env)
        report["spec"] = spec
        reports.append(report)
        failed += not report["ok"]
        if not args.json:
            _print_report(report, args.verbose)
    if args.json:
        print(json.dumps(reports, indent=2))
    else:
        print(f"\n{len(reports) - failed} passed, {failed} failed")
    return 1 if failed else 0


def cmd_pins(args):
    print("\n".join(engines.pins(args.engine, for_gpu=args.for_gpu)))
    return 0


def _print_report(report, verbose):
    info = report.get("info", {})
    chosen = [f"{r['label']}: {r['module']}" for r in report["results"] if r.get("alternatives")]
    print(f"{'PASS' if report['ok'] else 'FAIL'} {report['spec']:20} {report['seconds']:6.1f}s"
          f"  imports {info.get('import_seconds', '?')}s  {'; '.join(chosen)}", flush=True)
    for r in report["results"]:
        if verbose or not r["ok"]:
            print(f"    {'ok ' if r['ok'] else 'ERR'} {r['label']:32} {r['module']} ({r['seconds']}s)")
        if not r["ok"]:
            print(f"        {r['error']}" + ("\n" + r.get("traceback", "") if verbose else ""))
    if verbose:
        print(f"    versions: torch {info.get('torch')}, transformers {info.get('transformers')},"
              f" graphfix {info.get('graphfix')}")
        print(f"    entry points: {', '.join(info.get('entry_points') or ()) or '(none)'}")
    if "output" in report:
        print("    probe output (tail):\n" + "\n".join("      " + line for line in report["output"].splitlines()))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m harness", description=engines.__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging / tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)

    def env_opts(p):
        p.add_argument("--no-graphfix", action="store_true", help="leave graphfix off the path")
        p.add_argument("--repo", help="checkout whose graphfix to install (default: this one)")

    def select_opts(p):
        p.add_argument("specs", nargs="*", metavar="ENGINE==VERSION")
        p.add_argument("--all", action="store_true", help="every supported release (the default)")
        p.add_argument("--engine", action="append", choices=sorted(engines.RELEASES))

    p = sub.add_parser("build", help="build bases and release trees")
    select_opts(p)
    p.add_argument("--jobs", type=int, default=2, help="release trees built at once (default 2)")
    p.add_argument("--graphfix", action="store_true", help="also install this repo's graphfix")
    p.add_argument("--repo")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("run", help="run a command inside a release: run SPEC [--no-graphfix] -- python ...")
    p.add_argument("spec", metavar="ENGINE==VERSION")
    env_opts(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("path", help="print a release's python and PYTHONPATH")
    p.add_argument("spec", metavar="ENGINE==VERSION")
    env_opts(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_path)

    p = sub.add_parser("check", help="import the patched modules in each release")
    select_opts(p)
    env_opts(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("pins", help="print an engine's pinned requirements, one a line")
    p.add_argument("engine", choices=sorted(engines.RELEASES))
    p.add_argument("--for-gpu", action="store_true",
                   help="those that benchmarks/fetch_wheels.sh carries to a CUDA machine")
    p.set_defaults(func=cmd_pins)

    argv = list(sys.argv[1:] if argv is None else argv)
    command_argv = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.command_argv = command_argv
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Elapsed())
    logger = logging.getLogger("harness")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    try:
        return args.func(args)
    except (engines.HarnessError, subprocess.CalledProcessError, ValueError) as exc:
        logger.error("%s", exc)
        return 2


if __name__ == "__main__":
    sys.exit(main())
