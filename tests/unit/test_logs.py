"""graphfix's log lines (graphfix/logs.py): where they go, once each, and GRAPHFIX_LOG.

Logging set-up is process-global, so each routing case runs in a fresh interpreter: it calls the
entry points' ``logs.route()`` and configures logging around it the way a host or an engine would.
"""

import logging
import os
import re
import subprocess
import sys
import textwrap

import pytest

import graphfix
from graphfix import FlagError, logs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SGLANG_LIKE = '"[%(asctime)s TP0] %(message)s"'  # what SGLang's configure_logger puts on root
DECISIONS = """
logs.decision("p.a", "pending", "waiting")
logs.decision("p.a", "applied", "buggy here")
logs.decision("p.b", "drifted", "odd shape")
logs.decision("p.c", "retired", "fixed here")
"""


def run(code, **env):
    """Run ``code`` in a fresh interpreter; return its stdout+stderr lines that show a decision or the summary."""
    proc = subprocess.run([sys.executable, "-c", "import logging, sys\nfrom graphfix import logs\n"
                           + textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **env}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [line for line in (proc.stdout + proc.stderr).splitlines() if re.search(r"\bp\.[abc]: |graphfix \d", line)]


def test_routed_without_any_logging_config_in_an_engine_like_format():
    lines = run("logs.route('sglang')" + DECISIONS)
    assert [line.split("] ", 1)[1] for line in lines] == [
        "graphfix: p.a: applied (buggy here)", "graphfix: p.b: drifted (odd shape)",
        "graphfix: p.c: retired (fixed here)"]
    assert all(line.startswith("[20") for line in lines), lines


@pytest.mark.parametrize("order", ["host_before", "host_after", "both", "route_twice"])
def test_each_line_once_whatever_order_the_host_configures_logging(order):
    host = f"logging.basicConfig(level=logging.INFO, format={SGLANG_LIKE}, force=True)\n"
    code = {
        "host_before": host + "logs.route('sglang')\n" + DECISIONS,
        "host_after": "logs.route('sglang')\n" + host + DECISIONS,
        "both": host + "logs.route('sglang')\n" + host + DECISIONS,
        "route_twice": "logs.route('sglang')\nlogs.route('sglang')\n" + host + DECISIONS,
    }[order]
    lines = run(code)
    assert len(lines) == 3, lines
    assert all(" TP0] graphfix: p." in line for line in lines), lines  # through the host's handler


def test_split_around_the_engines_logging_setup():
    """SGLang's scheduler: plugins load, then configure_logger; each line once, in the format of its time."""
    lines = run("logs.route('sglang')\nlogs.decision('p.a', 'applied', 'early')\n"
                f"logging.basicConfig(level=logging.INFO, format={SGLANG_LIKE}, force=True)\n"
                "logs.decision('p.b', 'applied', 'late')\n")
    assert len(lines) == 2 and "TP0" not in lines[0] and " TP0] graphfix: p.b: applied (late)" in lines[1], lines


def test_engine_with_its_own_handler_gets_the_lines_and_root_does_not():
    """vLLM's layout: the ``vllm`` logger has its handler and does not propagate; the host also set up root."""
    lines = run(textwrap.dedent("""
        h = logging.StreamHandler(sys.stdout)
        h.setFormatter(logging.Formatter("ENGINE %(levelname)s [%(filename)s:%(lineno)d] %(message)s"))
        v = logging.getLogger("vllm"); v.addHandler(h); v.setLevel(logging.INFO); v.propagate = False
        logging.basicConfig(level=logging.INFO, format="ROOT %(message)s")
        logs.route("vllm")
    """) + DECISIONS)
    assert len(lines) == 3 and all(line.startswith("ENGINE ") and "graphfix: p." in line for line in lines), lines
    assert lines[1].startswith("ENGINE WARNING [logs.py:")


def test_the_engines_level_is_respected_but_warnings_stay():
    lines = run("logging.basicConfig(format='%(message)s')\nlogs.route('sglang')" + DECISIONS)  # root: WARNING
    assert lines == ["graphfix: p.b: drifted (odd shape)"]


def test_a_handler_the_host_puts_on_graphfix_takes_over():
    lines = run(textwrap.dedent("""
        logs.route("sglang")
        logging.basicConfig(level=logging.INFO, format="ROOT %(message)s")
        h = logging.StreamHandler(sys.stderr); h.setFormatter(logging.Formatter("MINE %(message)s"))
        logging.getLogger("graphfix").addHandler(h)
    """) + DECISIONS)
    assert lines == ["MINE p.a: applied (buggy here)", "MINE p.b: drifted (odd shape)",
                     "MINE p.c: retired (fixed here)"]


def test_formats_that_name_the_logger_get_no_second_graphfix():
    lines = run("logs.route('sglang')\nlogging.basicConfig(level=logging.INFO)" + DECISIONS)
    assert lines[0] == "INFO:graphfix:p.a: applied (buggy here)", lines


def test_graphfix_log_warning_keeps_only_warnings():
    lines = run("logs.route('sglang')\nlogging.getLogger('graphfix').info('vllm.x: an action line')" + DECISIONS,
                GRAPHFIX_LOG="Warning")
    assert len(lines) == 1 and lines[0].endswith("graphfix: p.b: drifted (odd shape)"), lines


@pytest.mark.parametrize("value", ["debug", "", "quiet", "warn"])
def test_bad_graphfix_log_is_a_clear_error(monkeypatch, value):
    monkeypatch.setenv("GRAPHFIX_LOG", value)
    with pytest.raises(FlagError, match=rf"GRAPHFIX_LOG={value!r} is not a valid value; allowed values: info, warning"):
        graphfix.apply("sglang")


def test_plain_apply_attaches_nothing_and_says_one_summary_line():
    """Library use: no handler forced on the host; its own config shows the summary, once per process."""
    lines = run("""
        import graphfix, os
        graphfix.apply("sglang"); graphfix.apply("sglang")
        g = logging.getLogger("graphfix")
        assert g.handlers == [] and g.propagate and logging.getLogger().handlers == [], g.handlers
        logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
        logs._announced.clear()  # as in a fresh process
        graphfix.apply("sglang"); graphfix.apply("sglang")
        if os.fork() == 0:  # a forked worker says its own summary once
            graphfix.apply("sglang"); graphfix.apply("sglang"); os._exit(0)
        os.wait()
    """)
    assert len(lines) == 2 and lines[0] == lines[1], lines
    assert lines[0].startswith("graphfix graphfix 0.1.0 on ") and "sglang." in lines[0], lines


def test_registry_decisions_levels(engine, caplog, monkeypatch):
    """Through the registry: pending is debug, applied info, drifted a warning; GRAPHFIX_LOG=warning
    turns applied down to debug and leaves the warning."""
    caplog.set_level(logging.DEBUG, logger="graphfix")
    loud, quiet = engine(), engine()
    odd = engine(source="class Runner:\n    def size(self, m):\n        return m\n")
    for eng in (loud, quiet, odd):
        eng.patch()
    loud.registry.apply(loud.dist)
    loud.imported()
    monkeypatch.setenv("GRAPHFIX_LOG", "warning")
    for eng in (quiet, odd):
        eng.registry.apply(eng.dist)
        eng.imported()
    levels = {r.getMessage().split(" (")[0]: r.levelname for r in caplog.records}
    assert levels == {
        f"{loud.dist}.size: pending": "DEBUG", f"{loud.dist}.size: applied": "INFO",
        f"{quiet.dist}.size: pending": "DEBUG", f"{quiet.dist}.size: applied": "DEBUG",
        f"{odd.dist}.size: pending": "DEBUG", f"{odd.dist}.size: drifted": "WARNING",
    }, levels
    loud.registry.apply(loud.dist)  # nothing new: nothing logged
    assert len(caplog.records) == 6
