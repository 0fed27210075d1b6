"""sglang.warmup_hook — post-warmup hook taken from the attention backend capture_prepare returned.

Symptom: illegal memory access on the first graph replay of an adaptive speculative runner (and of pdmux
stream-group captures): ``DecodeCudaGraphRunner.capture_one_shape`` takes ``on_after_cuda_graph_warmup``
from ``model_runner.attn_backend``, not from the backend the capture runs on, so that backend keeps its
warmup-upgraded metadata (raw -> full, FlashMLA scheduler metadata) and the graph freezes it.
Upstream fix: resolve the warmup hook from the capture-local backend (seed 000), released in 0.5.19: the
hook is read off the backend ``capture_prepare`` returned.
Affected: ``>=0.5.14,<0.5.19`` (0.5.14 - 0.5.18). Fixed in: 0.5.19.
Flag: ``GRAPHFIX_SGLANG_WARMUP_HOOK`` (auto | on | off).
Wrapper: for one ``capture_one_shape`` call, remember what ``capture_prepare`` returns, and give the hook's
two consumers -- ``self.backend.capture_one`` and (0.5.15+) ``maybe_flashinfer_autotune_speculative_draft``
-- that backend's hook. ``model_runner`` is not touched; runners overriding ``capture_one_shape`` (EAGLE
draft / draft-extend, MTP) are not wrapped. Probe: follows the hook's receiver through the bytecode.
Evidence (CPU parity, GPU replay) and limits: patches.md, section ``sglang.warmup_hook``.
"""

import contextlib
import inspect
import threading

import wrapt

from graphfix import Patch, Verdict, code_refs, receiver
from graphfix.probes import lookup_origins

PATCH = Patch(
    id="sglang.warmup_hook",
    engine="sglang",
    affected=">=0.5.14,<0.5.19",
    fixed_in="0.5.19",
    upstream="sgl-project/sglang: resolve the warmup hook from the capture-local backend (seed 000)",
    summary="post-warmup hook taken from the attention backend capture_prepare returned",
)
DECODE = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"
HOOK = "on_after_cuda_graph_warmup"
_captures = threading.local()  # .stack: the capture_one_shape calls running on this thread


class _Capture:
    def __init__(self, runner):
        self.runner, self.backend, self.prepared = runner, None, False

    def hook(self, given):
        """The capture's own backend's hook; ``given`` (shipped) before capture_prepare ran, or if reading it
        fails (graphfix's own work inside the engine's call: PATCH.fall_back)."""
        if not self.prepared:
            return given
        try:
            return getattr(self.backend, HOOK, None)
        except Exception as exc:  # noqa: BLE001 - e.g. a backend property that raises: keep the shipped hook
            PATCH.fall_back(exc)
            return given


class _BackendForCapture(wrapt.ObjectProxy):
    """The runner's graph backend, seen through one capture: ``capture_one`` gets the capture's hook."""

    def __init__(self, backend, capture):
        super().__init__(backend)
        self._self_capture = capture

    def capture_one(self, *args, **kwargs):
        if "post_warmup_hook" in kwargs:
            kwargs["post_warmup_hook"] = self._self_capture.hook(kwargs["post_warmup_hook"])
        return self.__wrapped__.capture_one(*args, **kwargs)


@contextlib.contextmanager
def _instance_attrs(obj, **attrs):
    """``attrs`` set on ``obj`` itself for the duration; its ``__dict__`` is as before afterwards."""
    saved = {k: vars(obj)[k] for k in attrs if k in vars(obj)}
    vars(obj).update(attrs)
    try:
        yield
    finally:
        for k in attrs:
            vars(obj).pop(k, None)
        vars(obj).update(saved)


@PATCH.wraps(DECODE, "DecodeCudaGraphRunner.capture_one_shape")
def _hook_from_capture_backend(wrapped, instance, args, kwargs):
    runner = receiver(instance, args)  # Class.method(non-instance): args[0]
    capture, prepare = _Capture(runner), runner.capture_prepare

    def recording_prepare(*a, **kw):
        result = prepare(*a, **kw)
        if isinstance(result, tuple) and len(result) > 1:  # (forward_batch, attn_backend, pp_proxy)
            capture.backend, capture.prepared = result[1], True
        return result

    stack = vars(_captures).setdefault("stack", [])
    stack.append(capture)
    try:
        backend = _BackendForCapture(runner.backend, capture)
        with _instance_attrs(runner, capture_prepare=recording_prepare, backend=backend):
            return wrapped(*args, **kwargs)
    finally:
        stack.pop()


@PATCH.wraps(DECODE, "maybe_flashinfer_autotune_speculative_draft", optional=True)  # 0.5.15+
def _autotune_gets_capture_hook(wrapped, instance, args, kwargs):
    stack = getattr(_captures, "stack", None)
    if stack and args and args[0] is stack[-1].runner and "post_warmup_hook" in kwargs:
        kwargs = dict(kwargs, post_warmup_hook=stack[-1].hook(kwargs["post_warmup_hook"]))
    return wrapped(*args, **kwargs)


FROM_PREPARE, FROM_MODEL_RUNNER = "self.capture_prepare()[]", "self.model_runner.attn_backend"


@PATCH.probe
def probe(t):
    method = t["DecodeCudaGraphRunner.capture_one_shape"]
    origins = lookup_origins(method, HOOK)  # per lookup of the hook: where its receiver comes from
    if origins and all(o == {FROM_PREPARE} for o in origins):
        return Verdict.fixed("capture_one_shape reads the hook off the backend capture_prepare() returned")
    if not origins or any(o != {FROM_MODEL_RUNNER} for o in origins):
        return Verdict.drifted(f"hook looked up on {[sorted(o) for o in origins] or 'nothing'}")
    refs = code_refs(method)
    if not {"capture_prepare", "backend", "capture_one"} <= refs:
        return Verdict.drifted("capture_one_shape does not prepare then call backend.capture_one")
    runner_cls = t.module(DECODE).DecodeCudaGraphRunner
    if any(hasattr(inspect.getattr_static(runner_cls, n, None), "__set__") for n in ("backend", "capture_prepare")):
        return Verdict.drifted("backend / capture_prepare are data descriptors: cannot shadow them per call")
    if ("maybe_flashinfer_autotune_speculative_draft" in refs) != (
        t["maybe_flashinfer_autotune_speculative_draft"] is not None
    ):
        return Verdict.drifted("autotune helper and its module global disagree")
    return Verdict.buggy("hook looked up on self.model_runner.attn_backend")
