"""Runs INSIDE a real SGLang release (through the harness): replace a patch target by a *mutant* -- a
vendor-style variant of the installed code -- then let graphfix decide and run the patch's scenario.

usage: python tests/inside/sglang_mutants.py MUTANT [MUTANT ...]
Mutants are built at run time from the installed release's own code (nothing upstream is stored here):
  logits_widest_only     max_decode_logits_rows names resolve_candidate_steps_from_config but sizes
                         for the static and the widest candidate width only (still undersizes)
  warmup_misnamed_local  capture_one_shape (buggy) with capture_prepare's backend renamed, reading the
                         hook through a new local named attn_backend = self.model_runner.attn_backend
  warmup_renamed_fix     capture_one_shape (fixed) with capture_prepare's backend under another name
Prints ``{"observed": graphfix.scenarios.observe(...), "mutated": {...}}`` as JSON.

usage: python tests/inside/sglang_mutants.py --wrapper-raises
  graphfix's own helper inside the logits_rows wrapper raises (after the original ran): prints the rows the
  scenario's upstream geometry gets (twice) and the patch's status row.
usage: python tests/inside/sglang_mutants.py --reload
  importlib.reload(model_runner) after graphfix applied: states before, after, and after graphfix.remove().
"""

import importlib
import inspect
import json
import re
import sys
import textwrap

MR = "sglang.srt.model_executor.model_runner"
DECODE = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"

WIDEST_ONLY = '''
def max_decode_logits_rows(self):
    from sglang.srt.speculative.adaptive_spec_params import resolve_candidate_steps_from_config

    spec = get_spec()
    widths = [self.decode_num_tokens_per_req()]
    if spec.speculative_adaptive:
        widest = max(resolve_candidate_steps_from_config(spec.speculative_adaptive_config)) + 1
        widths.append(self.decode_num_tokens_per_req(num_draft_tokens=widest))
    return max(max(get_batch_sizes_to_capture(self, w)[0]) * w for w in widths)
'''


def _install(module, cls, source, name):
    namespace = {}
    exec(compile(source, f"<mutant {name}>", "exec"), vars(module), namespace)  # globals: the module's
    setattr(cls, name, namespace[name])
    return source


def _method_source(cls, name):
    return textwrap.dedent(inspect.getsource(vars(cls)[name]))


def logits_widest_only():
    mr = importlib.import_module(MR)
    return "sglang.logits_rows", _install(mr, mr.ModelRunner, WIDEST_ONLY, "max_decode_logits_rows")


def _rename_local(src):
    new, n = re.subn(r"(?<![\w.])attn_backend\b(?!\s*=(?!=))", "capture_local_backend", src)
    assert n, "no local attn_backend"
    return new


def warmup_misnamed_local():
    mod = importlib.import_module(DECODE)
    src = _rename_local(_method_source(mod.DecodeCudaGraphRunner, "capture_one_shape"))
    new, n = re.subn(r"\n(\s*)(post_warmup_hook = getattr\(\s*)self\.model_runner\.attn_backend,",
                     r"\n\1attn_backend = self.model_runner.attn_backend\n\1\2attn_backend,", src)
    assert n == 1, "the buggy hook lookup was not found"
    return "sglang.warmup_hook", _install(mod, mod.DecodeCudaGraphRunner, new, "capture_one_shape")


def warmup_renamed_fix():
    mod = importlib.import_module(DECODE)
    new = _rename_local(_method_source(mod.DecodeCudaGraphRunner, "capture_one_shape"))
    return "sglang.warmup_hook", _install(mod, mod.DecodeCudaGraphRunner, new, "capture_one_shape")


def wrapper_raises():
    import graphfix
    import sglang_graphfix.logits_rows as patch
    from sglang_graphfix.scenarios import logits_rows as scenario

    graphfix.apply("sglang")
    importlib.import_module(MR)  # decided (applied) with graphfix's helpers intact
    def broken(*args, **kwargs):
        raise KeyError("graphfix helper bug")

    patch._cover = broken
    first = scenario.observe(**scenario.GEOMETRIES["upstream"])
    second = scenario.observe(**scenario.GEOMETRIES["upstream"])
    (row,) = [r for r in graphfix.status("sglang") if r.id == "sglang.logits_rows"]
    return {"rows": [first, second], "state": row.state, "reason": row.reason}


def reloaded():
    import graphfix

    graphfix.apply("sglang")
    mr = importlib.import_module(MR)
    states = [{r.id: r.state for r in graphfix.status("sglang")}]
    importlib.reload(mr)  # the module runs again: a new ModelRunner class, without graphfix's wrapper
    row = {r.id: r for r in graphfix.status("sglang")}["sglang.logits_rows"]
    states.append({r.id: r.state for r in graphfix.status("sglang")})
    graphfix.remove()  # completes although the wrapped class is gone
    states.append({r.id: r.state for r in graphfix.status("sglang")})
    return {"states": states, "reason": row.reason}


if sys.argv[1:] == ["--wrapper-raises"]:
    print(json.dumps({"fallback": wrapper_raises()}))
    sys.exit(0)
if sys.argv[1:] == ["--reload"]:
    print(json.dumps({"reload": reloaded()}))
    sys.exit(0)

from graphfix.scenarios import observe  # noqa: E402

mutated = {}
for mutant in sys.argv[1:]:
    pid, source = globals()[mutant]()
    mutated[mutant] = pid
print(json.dumps({"observed": observe("sglang", only=sorted(set(mutated.values()))), "mutated": mutated},
                 sort_keys=True))
