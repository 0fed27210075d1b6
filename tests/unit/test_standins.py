"""The stand-in toolkit (``harness.standins``) that the harness CPU environments (triton,
torchvision), ``tests/gpu`` and ``benchmarks/graph_memory.py`` (sgl_kernel, xgrammar) rely on."""

import importlib
import json
import sys
import textwrap

import pytest

from harness import engines, standins
from tests.conftest import ROOT, release


@pytest.fixture
def isolated():
    """Undo the meta-path finders and modules a test adds."""
    finders, modules = list(sys.meta_path), set(sys.modules)
    yield
    sys.meta_path[:] = finders
    for name in set(sys.modules) - modules:
        del sys.modules[name]


def test_absent_package_imports_and_its_functions_raise_when_called(isolated):
    assert standins.install_missing(["gf_absent_kernel"]) == {"gf_absent_kernel": "stand-in"}
    from gf_absent_kernel.ops.fused import rmsnorm  # any submodule, any name

    with pytest.raises(RuntimeError, match="rmsnorm called, but only a stand-in of gf_absent_kernel"):
        rmsnorm(1, 2)
    table = {"u4": importlib.import_module("gf_absent_kernel").scalar_types.uint4b8}  # module-level tables build
    with pytest.raises(RuntimeError):
        table["u4"]()
    finders = len(sys.meta_path)
    assert standins.install_missing(["gf_absent_kernel"]) == {"gf_absent_kernel": "stand-in"}
    assert len(sys.meta_path) == finders  # idempotent


def test_capitalised_names_are_real_classes(isolated):
    standins.install_missing(["gf_absent_grammar"])
    import gf_absent_grammar
    from gf_absent_grammar import StructuralTag
    from gf_absent_grammar.sub import StructuralTag as OtherTag

    assert gf_absent_grammar.StructuralTag is StructuralTag  # one class per (module, name)
    assert OtherTag is not StructuralTag and isinstance(StructuralTag, type)
    tag = StructuralTag("begin", end="end")
    assert isinstance(tag, StructuralTag) and not isinstance(tag, OtherTag)

    class Mine(StructuralTag):
        pass

    assert issubclass(Mine, StructuralTag) and isinstance(Mine(), StructuralTag)
    with pytest.raises(RuntimeError):  # class attributes are stand-ins of the same kind
        StructuralTag.from_json("{}")


def test_installed_package_is_left_real(isolated):
    json_module = sys.modules["json"]
    assert standins.install_missing(["json"]) == {"json": "real"}
    assert sys.modules["json"] is json_module and not standins.is_standin(json_module)


def test_inert_package_passes_decorators_through_and_real_files_win(tmp_path, monkeypatch, isolated):
    pkg = tmp_path / "gf_inert_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        from harness.standins import make_package

        def _populate(module):
            if module.__name__ == "gf_inert_pkg.backends":
                module.backends = {}

        make_package(__name__, _populate)
    """))
    (pkg / "real.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import gf_inert_pkg as tl
    from gf_inert_pkg.real import VALUE
    from gf_inert_pkg.runtime.jit import JITFunction
    from gf_inert_pkg.backends import backends

    def kernel(x):
        return x + 1

    assert tl.jit(kernel) is kernel  # @triton.jit
    assert tl.autotune(configs=[], key=["n"])(kernel) is kernel  # @triton.autotune(...)
    assert tl.heuristics({"B": lambda a: 1})(kernel) is kernel
    assert tl.language.constexpr(3) is not None  # inert: calling does not raise
    assert VALUE == 42 and backends == {}
    assert isinstance(JITFunction(kernel), JITFunction)
    assert repr(tl.transforms.InterpolationMode.BILINEAR) == \
        "<stand-in gf_inert_pkg.transforms.InterpolationMode.BILINEAR>"
    assert standins.is_standin(tl) and standins.is_standin(sys.modules["gf_inert_pkg.runtime.jit"])


def test_gpu_pins_are_the_harness_pins():
    gpu = engines.pins("sglang", for_gpu=True)
    harness_pins = set(engines.pins("sglang"))
    assert [p for p in gpu if p not in harness_pins] == list(engines.GPU_ONLY_PINS["sglang"])
    assert not any(p.startswith("torch==") for p in gpu)  # the CUDA machine brings its own torch
    with pytest.raises(engines.HarnessError):
        engines.pins("vllm", for_gpu=True)


# Inside a real SGLang release on CPU (harness): what tests/gpu and benchmarks/graph_memory.py do
# before importing SGLang on a CUDA machine without sgl_kernel / xgrammar, forced here.
IN_RELEASE = r"""
import importlib, json
import pydantic, torch
from harness import sglang_process as P

done = P.install_standins(force=True)
import sgl_kernel, xgrammar

class Request(pydantic.BaseModel):  # SGLang's protocol models use xgrammar classes as field types
    tag: xgrammar.StructuralTag

out = {"done": done, "pydantic": type(Request(tag=xgrammar.StructuralTag()).tag).__name__}
try:
    sgl_kernel.fused_add_rmsnorm(torch.zeros(1), torch.zeros(1))
except RuntimeError as exc:
    out["kernel_call"] = str(exc)
for module in ("sglang.srt.model_executor.runner_backend.full_cuda_graph_backend",
               "sglang.srt.model_executor.runner_backend.breakable_cuda_graph_backend",
               "sglang.srt.function_call.function_call_parser"):
    importlib.import_module(module)
decode, prefill = P.bench_runner_classes()
ps = importlib.import_module(P.PARALLEL_STATE)
group = P.single_rank_group(torch.device("cpu"), torch.cuda, "graphfix_cpu")
previous = P.set_parallel_groups(group)
out["groups"] = [ps.get_tp_group() is group, ps.get_pp_group() is group, ps.get_world_group() is group]
P.set_parallel_groups(previous)
out["restored"] = ps._TP is previous["_TP"]
from sglang_graphfix.scenarios.single_rank import single_rank_process  # the scenarios' CPU process
shipped_stream = torch.cuda.Stream
with single_rank_process(enable_cudagraph_gc=True) as cpu_group:
    out["process_groups"] = [ps.get_tp_group() is cpu_group, ps._TP is cpu_group]
out["process_restored"] = [ps._TP is previous["_TP"], torch.cuda.Stream is shipped_stream]
out["runners"] = [c.__mro__[1].__name__ for c in (decode, prefill)]
out["xgrammar_in_parser"] = importlib.import_module("sglang.srt.function_call.inkling_detector").StructuralTag \
    is xgrammar.StructuralTag
print(json.dumps(out))
"""


@pytest.mark.engine
def test_gpu_standins_import_a_real_sglang_release():
    proc = release("sglang", "0.5.16").run(["python", "-c", IN_RELEASE], cwd=str(ROOT), check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["done"] == {"sgl_kernel": "stand-in", "xgrammar": "stand-in", "register_fake": "tolerant"}
    assert out["pydantic"] == "StructuralTag"
    assert "fused_add_rmsnorm called, but only a stand-in of sgl_kernel" in out["kernel_call"]
    assert out["groups"] == [True, True, True] and out["restored"]
    assert out["process_groups"] == [True, True] and out["process_restored"] == [True, True]
    assert out["runners"] == ["DecodeCudaGraphRunner", "PrefillCudaGraphRunner"]
    assert out["xgrammar_in_parser"]
