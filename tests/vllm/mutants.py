"""Wrong wrappers that ``graphfix verify`` must reject (issue 8): each mutant swaps one piece of a real
patch for a plausible mistake, runs ``graphfix verify --json`` in this process, and reports its exit
status and rows. Used by ``tests/vllm/inside_release.py --mutants``; never shipped.

- ``spec_draft_buffers``: vllm.spec_prefill_metadata prepares fresh metadata for every pass, but through
  the draft's own input buffers and attention groups instead of the target's (the graphs would bake the
  wrong addresses: the runtime refreshes the target's buffers).
- ``sizes_one_size``: vllm.uniform_decode_sizes adds only the widest uniform-decode batch
  max_num_seqs*(1+k) (when it fits under the ceiling) instead of 0.29.0's whole request grid.
- ``eagle_draft_buffers``: the same mistake as the first in vllm.eagle_prefill_metadata (0.21/0.22).
"""

import contextlib
import io
import json
import os
import types


def _spec_draft_buffers():
    from vllm_graphfix import spec_prefill_metadata as spm

    real = spm._FreshStates

    class DraftBuffers(real):
        def __init__(self, shipped, manager, speculator, runner, desc=None):
            draft = types.SimpleNamespace(input_buffers=speculator.input_buffers, attn_groups=speculator.attn_groups)
            super().__init__(shipped, manager, speculator, draft, desc)

    spm._FreshStates = DraftBuffers
    return lambda: setattr(spm, "_FreshStates", real)


def _eagle_draft_buffers():
    from vllm_graphfix import eagle_prefill_metadata as epm

    real = epm._Fresh

    class DraftBuffers(real):
        def __init__(self, shipped, manager, speculator, runner):
            super().__init__(shipped, manager, speculator, types.SimpleNamespace(
                input_buffers=speculator.input_buffers, attn_groups=speculator.attn_groups))

    epm._Fresh = DraftBuffers
    return lambda: setattr(epm, "_Fresh", real)


def _sizes_one_size():
    from vllm_graphfix import uniform_decode_sizes as udm

    real = udm._decode_sizes

    def one_size(config, k, pre, top):
        widest = config.scheduler_config.max_num_seqs * (1 + k)
        return {widest} if widest <= min(pre, top) else set()

    udm._decode_sizes = one_size
    return lambda: setattr(udm, "_decode_sizes", real)


MUTANTS = {"spec_draft_buffers": _spec_draft_buffers, "sizes_one_size": _sizes_one_size,
           "eagle_draft_buffers": _eagle_draft_buffers}


def verify(flags):
    """``graphfix verify --json`` in this process with ``flags`` set: ``{"rc", "rows"}``."""
    import graphfix
    from graphfix.cli import main

    graphfix.remove()
    os.environ.update(flags)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            rc = main(["verify", "--json"])
    finally:
        for name in flags:
            os.environ.pop(name, None)
        graphfix.remove()
    lines = out.getvalue().splitlines()  # the report starts at a lone "[" (vLLM may log to stdout)
    rows = json.loads("\n".join(lines[len(lines) - 1 - lines[::-1].index("["):])) if "[" in lines else []
    return {"rc": rc, "rows": [{k: r.get(k) for k in ("id", "case", "state", "ok")} for r in rows]}


def run(names, flags):
    """The real patches first (control), then each mutant in ``names``."""
    result = {"control": verify(flags)}
    for name in names:
        undo = MUTANTS[name]()
        try:
            result[name] = verify(flags)
        finally:
            undo()
    return result
