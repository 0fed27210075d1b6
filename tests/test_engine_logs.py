"""graphfix's lines in a real engine's own log (issue 12): after the engine's plugin loader and its own
logging set-up, each decision is there exactly once, in the engine's format, plus one summary line."""

import json
import re

import pytest

from tests.conftest import ROOT, release

pytestmark = pytest.mark.engine

DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
# (engine, version, stream, prefix of a decision line in the engine's format, prefix of the summary line)
CASES = {
    # SGLang's configure_logger: "[%(asctime)s TP0] %(message)s" on root; the summary comes from
    # load_plugins(), which runs before it: graphfix's stderr line in the same shape, without the rank
    "sglang": ("0.5.16", "stderr", rf"\[{DATE} TP0\] ", rf"\[{DATE}\] "),
    # vLLM's "vllm" handler (stdout by default): "INFO 11-30 12:00:00 [file.py:12] message"
    "vllm": ("0.25.1", "stdout", r"INFO \d\d-\d\d \d\d:\d\d:\d\d \[logs\.py:\d+\] ",
             r"INFO \d\d-\d\d \d\d:\d\d:\d\d \[logs\.py:\d+\] "),
}


@pytest.mark.parametrize("engine", sorted(CASES))
def test_each_decision_once_in_the_engines_own_log_format(engine):
    version, stream, decision, summary = CASES[engine]
    proc = release(engine, version).run(["python", "tests/inside/log_lines.py", engine], cwd=str(ROOT),
                                        check=False, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    states = json.loads(proc.stdout.splitlines()[-1])
    decided = {pid: s for pid, s in states.items()
               if s in ("applied", "retired", "not-affected", "drifted", "disabled")}  # disabled: opt-in patches
    assert decided == states and len(states) >= 2, states
    ours = [line for line in (proc.stdout + proc.stderr).splitlines() if re.search(r"\bgraphfix[: ]", line)
            and not line.startswith("{")]
    text = getattr(proc, stream)
    for pid, state in states.items():
        level = "WARNING" if state == "drifted" else "INFO"
        pattern = rf"^{decision.replace('INFO', level)}graphfix: {re.escape(pid)}: {state} \(.+\)$"
        assert len(re.findall(pattern, text, re.M)) == 1, (pid, state, ours)
    assert len(re.findall(rf"^{summary}graphfix \S+ on {engine} {re.escape(version)}: ", text, re.M)) == 1, ours
    assert len(ours) == len(states) + 1, ours  # nothing twice, nothing else
