"""Real-engine tooling for graphfix's tests, demo and benchmarks (not part of the shipped package).

    from harness import ensure
    env = ensure("sglang", "0.5.14")          # builds or reuses the CPU env
    env.run(["python", "-c", "import sglang"])

``harness.engines`` (re-exported here): CPU environments of real releases and the one pin list;
``harness.standins``: the stand-in toolkit; ``harness.sglang_process``: a fake SGLang process
around the real graph runners, for one GPU. See harness/README.md and ``python -m harness --help``.
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
