"""``python -m graphfix.observe ENGINE [--patch ID ...] [--mode off|on|both]``: scenario results as JSON."""

import argparse
import json
import logging
import sys

from .scenarios import observe


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m graphfix.observe")
    ap.add_argument("engine", choices=("sglang", "vllm"))
    ap.add_argument("--patch", action="append", help="patch id (repeatable); default: all")
    ap.add_argument("--mode", choices=("off", "on", "both"), default="both")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    modes = ("off", "on") if args.mode == "both" else (args.mode,)
    result = observe(args.engine, only=args.patch, modes=modes)
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
