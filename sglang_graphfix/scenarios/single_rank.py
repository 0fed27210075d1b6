"""A single-rank SGLang process for the scenarios (and, on a GPU, for ``harness/sglang_process.py``).

One real ``GroupCoordinator`` of world size 1, built without ``torch.distributed`` and given the device
module it should use (on CPU :class:`CpuDevice`), so the release's own ``graph_capture()`` runs
unchanged -- including its "no stream given -> make one" branch -- and torch itself is never changed.
"""

import contextlib
import importlib

from graphfix.scenarios import replaced

PS = "sglang.srt.distributed.parallel_state"
GROUPS = ("_WORLD", "_TP", "_PP", "_ATTN_TP", "_ATTN_CP", "_DCP", "_MOE_DP", "_MOE_EP", "_MOE_TP")


class CpuStream:
    """What ``GroupCoordinator.graph_capture`` does with a stream: make one, ``wait_stream``."""

    def wait_stream(self, other):
        pass


class CpuDevice:
    """The parts of ``torch.cuda`` that ``GroupCoordinator.graph_capture`` and the runners use."""

    Stream = CpuStream

    @staticmethod
    def stream(stream):
        return contextlib.nullcontext()

    @staticmethod
    def is_current_stream_capturing():
        return False


def single_rank_group(device, device_module, unique_name="graphfix_single_rank"):
    """A ``GroupCoordinator`` of world size 1 without communicators (a local object)."""
    group = object.__new__(importlib.import_module(PS).GroupCoordinator)
    attrs = dict(
        unique_name=unique_name, rank=0, ranks=[0], world_size=1, local_rank=0,
        rank_in_group=0, local_size=1, device=device, device_module=device_module,
        ca_comm=None, qr_comm=None, pynccl_comm=None, pymscclpp_comm=None, torch_symm_mem_comm=None,
        mq_broadcaster=None, hpu_communicator=None, xpu_communicator=None, npu_communicator=None,
        use_pynccl=False, use_custom_allreduce=False, use_message_queue_broadcaster=False,
        cpu_group=None, device_group=None,
    )
    for name, value in attrs.items():
        try:
            setattr(group, name, value)
        except AttributeError:  # a read-only property in this release
            pass
    group.barrier = lambda *a, **k: None
    return group


def set_parallel_groups(groups) -> dict:
    """Set ``parallel_state``'s group globals to ``groups`` (one group for all) or, by name, to a dict (what an
    earlier call returned, to restore). Returns the previous values.

    The one engine global this helper sets, because the engine insists: the module-level ``graph_capture()``
    the runners call, and ``get_tp_group()``/``get_pp_group()`` (also called by graphfix's capture_stream
    wrapper), take no group argument and read ``parallel_state._TP``, ``_PP``, ...; releases before 0.5.23
    keep the groups nowhere else. Scenarios use :func:`parallel_groups`, which restores them."""
    ps = importlib.import_module(PS)
    values = groups if isinstance(groups, dict) else {n: groups for n in GROUPS if hasattr(ps, n)}
    previous = {name: getattr(ps, name) for name in values}
    for name, value in values.items():
        setattr(ps, name, value)
    return previous


@contextlib.contextmanager
def parallel_groups(group):
    """``group`` as every parallel group for the block (why: :func:`set_parallel_groups`), restored on exit."""
    ps = importlib.import_module(PS)
    with replaced(ps, **{name: group for name in GROUPS if hasattr(ps, name)}):
        yield group


@contextlib.contextmanager
def single_rank_process(**server_args):
    """A CPU single-rank group as every parallel group, and -- where the release can publish one -- a dummy
    ``ServerArgs`` with ``device="cpu"`` (so the release's own stream store makes CPU streams) plus
    ``server_args``, through the release's scoped overrides; all restored on exit."""
    import torch

    rc = importlib.import_module("sglang.srt.runtime_context")
    group = single_rank_group(torch.device("cpu"), CpuDevice, "graphfix_cpu")
    with contextlib.ExitStack() as stack:
        stack.enter_context(parallel_groups(group))
        if hasattr(rc.get_context(), "override_server_args"):  # 0.5.16+
            override = rc.get_context().override_server_args(device="cpu", **server_args)
            override.install()
            stack.callback(override.restore)
        if "tp_group" in dir(type(rc.get_parallel())):  # 0.5.23: the groups live in the context
            stack.enter_context(rc.get_parallel().override(
                tp_group=group, pp_group=group, tp_size=1, pp_size=1, tp_rank=0, pp_rank=0,
                moe_ep_size=1, moe_tp_size=1, attn_tp_size=1, attn_dp_size=1, attn_cp_size=1))
        yield group
