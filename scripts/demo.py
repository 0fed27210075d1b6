"""Demo: graphfix on real affected engine releases (CPU). Used by scripts/demo.sh."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.engines import ensure  # noqa: E402

DEFAULT = ["sglang==0.5.14", "sglang==0.5.18", "sglang==0.5.19", "vllm==0.25.1", "vllm==0.29.0"]


def show(title, proc):
    print(f"\n$ {title}")
    print(proc.stdout.rstrip() or "(no output)")
    if proc.returncode:
        print(proc.stderr.rstrip()[-2000:])
        print(f"(exit status {proc.returncode})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("releases", nargs="*", default=DEFAULT, help="engine==version ...")
    args = ap.parse_args(argv)
    worst = 0
    for spec in args.releases:
        engine, version = spec.split("==")
        env = ensure(engine, version)
        print(f"\n==================== {engine} {version} ====================")
        show("graphfix status", env.run(["python", "-m", "graphfix", "status"], check=False))
        verify = env.run(["python", "-m", "graphfix", "verify"], check=False)
        show("graphfix verify", verify)
        worst = max(worst, verify.returncode)
    return worst


if __name__ == "__main__":
    sys.exit(main())
