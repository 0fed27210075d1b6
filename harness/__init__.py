"""Real-engine test harness for graphfix (not part of the shipped package).

    from harness import ensure
    env = ensure("sglang", "0.5.14")          # builds or reuses the CPU env
    env.run(["python", "-c", "import sglang"])

See harness/README.md and ``python -m harness --help``.
"""

from harness.engines import (
    CACHE,
    CHECKS,
    RELEASES,
    EngineEnv,
    HarnessError,
    RunError,
    build_all,
    check,
    ensure,
    ensure_base,
    ensure_graphfix,
    ensure_release,
    parse_spec,
)

__all__ = [
    "CACHE", "CHECKS", "RELEASES", "EngineEnv", "HarnessError", "RunError", "build_all", "check",
    "ensure", "ensure_base", "ensure_graphfix", "ensure_release", "parse_spec",
]
