"""CPU environments for real SGLang / vLLM releases (test harness, not shipped).

Layout under the cache root (``$GRAPHFIX_ENGINE_CACHE``, default
``~/.cache/graphfix-engines``)::

    base-sglang/            venv: CPU torch + pinned pure-Python extras (--no-deps)
    base-vllm/              venv: the same for vLLM
    sglang-<ver>/           `pip install --no-deps --target` of one release
    vllm-<ver>/             one release's wheel, unzipped without its compiled payload
    graphfix-<hash>/        this repo installed non-editably (dist-info + entry points)
    .lock-<name>            fcntl locks that serialise builds between processes

A release runs as ``<base>/bin/python`` with ``PYTHONPATH`` = release tree,
[stand-ins], [graphfix].  Every directory is built under a temporary name and
renamed into place only when complete, then marked with a stamp file; a
directory whose stamp does not match the current recipe is rebuilt.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("harness")

CACHE = Path(os.environ.get("GRAPHFIX_ENGINE_CACHE") or Path.home() / ".cache" / "graphfix-engines")
REPO_ROOT = Path(__file__).resolve().parent.parent
STANDINS = Path(__file__).resolve().parent / "standins"  # on PYTHONPATH: triton, torchvision stand-ins
PROBE = Path(__file__).resolve().parent / "_probe.py"

RELEASES = {
    "sglang": ("0.5.14", "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.23"),
    "vllm": ("0.21.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.28.0", "0.29.0", "0.33.0"),
}

# Installed into both base venvs with --no-deps.  "+cpu" pins the local CPU
# wheel: pip fails rather than fetch a CUDA torch from the index.
COMMON_PINS = (
    "torch==2.13.0+cpu",
    # torch's own dependencies
    "filelock==4.3.1", "fsspec==2026.9.0", "Jinja2==3.1.6", "MarkupSafe==3.0.4", "mpmath==1.3.0",
    "networkx==3.6.1", "sympy==1.14.0", "typing_extensions==4.16.0",
    # graphfix and its tests
    "wrapt==2.5.2", "packaging==26.4", "pytest==9.2.0", "iniconfig==2.3.1", "pluggy==1.7.0",
    "Pygments==2.21.0", "setuptools==84.2.1", "wheel==0.48.0",
    # used by both engines
    "numpy==2.3.5", "safetensors==0.8.0", "regex==2026.11.19", "PyYAML==6.0.4", "tqdm==4.70.1",
    "requests==2.34.2", "urllib3==2.8.0", "idna==3.20", "certifi==2026.10.19.post1",
    "pydantic==2.14.4", "pydantic_core==2.50.5", "annotated-types==0.8.0", "typing-inspection==0.4.5",
    "aiohttp==3.14.5", "aiohappyeyeballs==2.7.1", "aiosignal==1.4.0", "attrs==26.1.0",
    "frozenlist==1.8.0", "multidict==7.2.1", "propcache==0.5.4", "yarl==1.25.1",
    "anyio==4.16.0", "sniffio==1.3.1", "h11==0.16.0", "starlette==1.10.0", "annotated-doc==0.0.7",
    "pyzmq==27.3.0", "msgspec==0.23.0", "psutil==7.2.2", "pybase64==1.5.1", "pillow==13.0.0",
    "einops==0.8.2", "gguf==0.19.0", "partial-json-parser==0.2.1.1.post7", "apache-tvm-ffi==0.1.11",
)

# SGLang 0.5.14-0.5.23 pin transformers 5.8.1-5.19.0; 5.12.1 imports for all of them.
SGLANG_PINS = (
    "transformers==5.12.1", "tokenizers==0.22.2", "huggingface_hub==1.33.0",
    "httpx==0.28.1", "httpcore==1.0.9", "openai==2.6.1", "distro==1.9.0",
    "xgrammar==0.2.1", "compressed-tensors==0.18.0", "sentencepiece==0.2.3",
    "orjson==3.13.0", "dill==0.4.1", "loguru==0.7.3", "ipython==9.18.1", "traitlets==5.16.1",
    "fastapi==0.165.0", "opentelemetry-api==1.45.2", "uvicorn==0.54.0", "click==8.5.1",
)

# vLLM 0.33.0 wants transformers >=5.16.1,<5.21 and xgrammar 0.2.8; both import
# with every listed release (0.26.0 pins apache-tvm-ffi 0.1.10: 0.1.11 works).
VLLM_PINS = (
    "transformers==5.20.2", "tokenizers==0.23.3", "huggingface_hub==2.4.0",
    "httpx2==2.16.2", "httpcore2==2.16.2", "truststore==0.10.5", "openai==3.57.0",
    "openai-harmony==0.0.8", "xgrammar==0.2.8", "llguidance==1.7.6", "cachetools==8.0.2",
    "cbor2==6.3.0", "cloudpickle==3.1.3", "py-cpuinfo==9.0.0", "prometheus_client==0.26.0",
    "uvloop==0.23.0", "fastapi==0.136.3",
)

ENGINE_PINS = {"sglang": COMMON_PINS + SGLANG_PINS, "vllm": COMMON_PINS + VLLM_PINS}

# What benchmarks/fetch_wheels.sh carries to the CUDA machine (python 3.12 with torch and its
# own site-packages, no SGLang): these names of ENGINE_PINS, at the versions pinned there, and
# GPU_ONLY_PINS: jiter, a dependency of openai 2.6.1 that the CUDA runs carried; only openai's
# streaming helpers import it, which no CPU env reaches (base-sglang runs without it).
GPU_PIN_NAMES = {"sglang": (
    "transformers", "tokenizers", "pydantic", "pydantic_core", "annotated-types", "typing-inspection",
    "typing_extensions", "orjson", "pybase64", "pyzmq", "msgspec", "openai", "distro", "sniffio",
    "partial-json-parser", "dill", "compressed-tensors", "gguf", "loguru", "ipython", "traitlets",
    "starlette",
)}
GPU_ONLY_PINS = {"sglang": ("jiter==0.19.0",)}

# Engines whose releases need the stand-ins in harness/standins (triton, torchvision).
# vLLM copes without triton on its own (it logs "Triton not installed").
STANDIN_ENGINES = ("sglang",)

# Parts of a vLLM wheel not unpacked: compiled code that cannot load on CPU torch.
VLLM_SKIP_SUFFIXES = (".so",)
VLLM_SKIP_PREFIXES = ("vllm/vllm-rs", "vllm/third_party/deep_gemm/", "vllm/third_party/fmha_sm100/")

# What `graphfix-<hash>` is built from (relative to the repo root).
GRAPHFIX_PACKAGES = ("graphfix", "vllm_graphfix", "sglang_graphfix")
GRAPHFIX_METADATA = ("setup.cfg", "pyproject.toml", "setup.py", "MANIFEST.in")
GRAPHFIX_DOCS = ("README.md", "LICENSE")  # copied for the build when present, not hashed
GRAPHFIX_KEEP = 5  # graphfix-<hash> directories kept in the cache ...
GRAPHFIX_IN_USE_S = 2 * 3600  # ... and any built or used within this many seconds

# Entry-point groups through which each engine finds plugins.
PLUGIN_GROUPS = {"sglang": "sglang.srt.plugins", "vllm": "vllm.general_plugins"}

# Import checks: (label, candidates); the first candidate module that exists is
# imported, "module:attr" also requires the attribute.
CHECKS = {
    "sglang": (
        ("model_runner", ("sglang.srt.model_executor.model_runner:ModelRunner",)),
        ("decode_cuda_graph_runner",
         ("sglang.srt.model_executor.runner.decode_cuda_graph_runner:DecodeCudaGraphRunner",)),
        ("prefill_cuda_graph_runner",
         ("sglang.srt.model_executor.runner.prefill_cuda_graph_runner:PrefillCudaGraphRunner",)),
        ("full_cuda_graph_backend",
         ("sglang.srt.model_executor.runner_backend.full_cuda_graph_backend:FullCudaGraphBackend",)),
        ("breakable_cuda_graph_backend",
         ("sglang.srt.model_executor.runner_backend.breakable_cuda_graph_backend:BreakableCudaGraphBackend",)),
        ("tc_piecewise_cuda_graph_backend",
         ("sglang.srt.model_executor.runner_backend.tc_piecewise_cuda_graph_backend:TcPiecewiseCudaGraphBackend",)),
        ("runner_utils.pool", ("sglang.srt.model_executor.runner_utils.pool:get_global_graph_memory_pool",)),
        ("plugins", ("sglang.srt.plugins:load_plugins",)),
    ),
    "vllm": (
        ("VllmConfig", ("vllm.config:VllmConfig",)),
        ("config.vllm", ("vllm.config.vllm:VllmConfig",)),
        ("gpu.cudagraph_utils", ("vllm.v1.worker.gpu.cudagraph_utils:CudaGraphManager",)),
        ("spec_decode cudagraph", (
            "vllm.v1.worker.gpu.spec_decode.autoregressive.cudagraph_utils",  # 0.23 - 0.29
            "vllm.v1.worker.gpu.spec_decode.target_dependent_ar.cudagraph_utils",  # 0.33
            "vllm.v1.worker.gpu.spec_decode.eagle.cudagraph",  # 0.21, 0.22
        )),
        ("cudagraph_dispatcher", ("vllm.v1.cudagraph_dispatcher:CudagraphDispatcher",)),
        ("plugins", ("vllm.plugins:load_general_plugins",)),
    ),
}

_RECIPE_VERSION = "1"  # bump to force rebuilding every cached directory
_STAMP = ".harness-ok"


class HarnessError(RuntimeError):
    pass


class RunError(subprocess.CalledProcessError):
    """CalledProcessError whose message shows the end of the command's output."""

    def __str__(self):
        tail = "\n".join(((self.stdout or "") + (self.stderr or "")).splitlines()[-40:])
        return f"{super().__str__()}\n--- output (tail) ---\n{tail}"


@dataclass(frozen=True)
class EngineEnv:
    engine: str
    version: str
    python: Path
    pythonpath: tuple
    graphfix: Path | None = None
    cache: Path = CACHE

    @property
    def spec(self) -> str:
        return f"{self.engine}=={self.version}"

    def env(self, extra: dict | None = None) -> dict:
        """A copy of os.environ that runs this release (PYTHONPATH replaced, not extended)."""
        env = dict(os.environ)
        env.pop("PYTHONHOME", None)
        # Nothing is byte-compiled at build time: the first process to import a
        # module writes its bytecode under <cache>/pycache (also keeps the repo clean).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(self.cache / "pycache")
        bindir = str(self.python.parent)
        if self.graphfix is None:
            # Keep a checkout's graphfix (and an editable install's egg-info) in the
            # cwd or the script's directory off sys.path too.
            env["PYTHONSAFEPATH"] = "1"
        env.update(
            PYTHONPATH=os.pathsep.join(str(p) for p in self.pythonpath),
            PYTHONNOUSERSITE="1",
            VIRTUAL_ENV=str(self.python.parent.parent),
            PATH=bindir + os.pathsep + env.get("PATH", ""),
            GRAPHFIX_HARNESS_RELEASE=self.spec,
        )
        env.update(extra or {})
        return env

    def run(self, argv, env=None, cwd=None, timeout=None, check=True) -> subprocess.CompletedProcess:
        """Run argv inside the release ("python" as argv[0] means the base venv's python)."""
        argv = [str(a) for a in argv]
        if argv and argv[0] == "python":
            argv[0] = str(self.python)
        proc = subprocess.run(argv, check=False, env=self.env(env), cwd=cwd, timeout=timeout,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if check and proc.returncode:
            raise RunError(proc.returncode, argv, proc.stdout, proc.stderr)
        return proc


def pins(engine: str, for_gpu: bool = False) -> list[str]:
    """The pinned requirements of engine's base venv, or (for_gpu) those carried to a CUDA machine."""
    if not for_gpu:
        return list(ENGINE_PINS[engine])
    if engine not in GPU_PIN_NAMES:
        raise HarnessError(f"no GPU pin list for {engine} (only {sorted(GPU_PIN_NAMES)})")
    by_name = {_canonical(p.split("==")[0]): p for p in ENGINE_PINS[engine]}
    missing = [n for n in GPU_PIN_NAMES[engine] if _canonical(n) not in by_name]
    if missing:
        raise HarnessError(f"GPU_PIN_NAMES[{engine!r}] names {missing}, not pinned in ENGINE_PINS")
    return [by_name[_canonical(n)] for n in GPU_PIN_NAMES[engine]] + list(GPU_ONLY_PINS[engine])


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def parse_spec(spec: str) -> tuple[str, str]:
    """'sglang==0.5.14' -> ('sglang', '0.5.14')."""
    engine, sep, version = spec.partition("==")
    if not sep or engine not in RELEASES or not version:
        raise ValueError(f"expected sglang==X or vllm==X, got {spec!r}")
    return engine, version


def ensure(engine: str, version: str, *, graphfix: bool = True, repo: Path | str | None = None,
           cache: Path | str | None = None) -> EngineEnv:
    """Build (or reuse) the CPU environment for engine==version and describe it.

    graphfix=False leaves graphfix off the path entirely; repo is the checkout
    whose graphfix gets installed (default: the one holding this harness).
    """
    if engine not in RELEASES:
        raise ValueError(f"unknown engine {engine!r}; expected one of {sorted(RELEASES)}")
    if version not in RELEASES[engine]:
        log.warning("%s==%s is not in the supported list %s", engine, version, RELEASES[engine])
    cache = Path(cache or CACHE)
    python = ensure_base(engine, cache=cache)
    path = [ensure_release(engine, version, cache=cache)]
    if engine in STANDIN_ENGINES:
        path.append(STANDINS)
    gf = ensure_graphfix(repo, python=python, cache=cache) if graphfix else None
    if gf:
        path.append(gf)
    return EngineEnv(engine, version, python, tuple(path), gf, cache)


# --------------------------------------------------------------------- builds


def ensure_base(engine: str, *, cache: Path | str | None = None) -> Path:
    """The base venv for engine (torch + pinned extras); returns its python."""
    cache = Path(cache or CACHE)
    pins = ENGINE_PINS[engine]
    key = _key("base", sys.version, *pins)

    def build(tmp: Path, work: Path):
        _cmd([sys.executable, "-m", "venv", "--prompt", f"base-{engine}", str(tmp)])
        _pip(tmp / "bin" / "python", "install", "--no-deps", "--no-compile", *pins)

    dest = _materialize(cache, f"base-{engine}", key, build)
    return dest / "bin" / "python"


def ensure_release(engine: str, version: str, *, cache: Path | str | None = None) -> Path:
    """The --no-deps tree of one release; returns the directory to put on PYTHONPATH."""
    cache = Path(cache or CACHE)
    python = ensure_base(engine, cache=cache)
    key = _key("release", engine, version, sys.version_info[:2], *VLLM_SKIP_SUFFIXES, *VLLM_SKIP_PREFIXES)

    def build(tmp: Path, work: Path):
        if engine == "sglang":
            _pip(python, "install", "--no-deps", "--no-compile", "--target", str(tmp), f"sglang=={version}")
            shutil.rmtree(tmp / "bin", ignore_errors=True)
        else:  # the wheel (250-340 MB) lives in work/, deleted with it
            _pip(python, "download", "--no-deps", "--only-binary=:all:", "-d", str(work), f"vllm=={version}")
            (wheel,) = work.glob("vllm-*.whl")
            _unpack_without_payload(wheel, tmp)

    return _materialize(cache, f"{engine}-{version}", key, build)


def ensure_graphfix(repo: Path | str | None = None, *, python: Path | None = None,
                    cache: Path | str | None = None) -> Path:
    """graphfix installed non-editably from repo's current sources; returns the directory."""
    repo = Path(repo or REPO_ROOT).resolve()
    cache = Path(cache or CACHE)
    digest, files = _graphfix_sources(repo)
    if not ((repo / "setup.cfg").is_file() or (repo / "pyproject.toml").is_file()):
        raise HarnessError(f"{repo} has no setup.cfg/pyproject.toml: cannot build graphfix")
    python = python or ensure_base("sglang", cache=cache)

    def build(tmp: Path, work: Path):
        # Build from a copy in work/: an in-tree build would litter the checkout.
        for f in files + [repo / n for n in GRAPHFIX_DOCS if (repo / n).is_file()]:
            (work / f.relative_to(repo)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, work / f.relative_to(repo))
        _pip(python, "install", "--no-deps", "--no-build-isolation", "--no-compile",
             "--target", str(tmp), str(work))
        shutil.rmtree(tmp / "bin", ignore_errors=True)

    dest = cache / f"graphfix-{digest}"
    if not _is_built(dest, digest):
        _materialize(cache, dest.name, digest, build)
        _prune_graphfix(cache, keep=dest)
    else:
        os.utime(dest)  # in use: pruning spares copies used lately (test runs of other checkouts)
    return dest


def build_all(specs=None, *, jobs: int = 2, cache: Path | str | None = None) -> list:
    """Build the bases and release trees of specs (default: every supported release).

    jobs builds run at once (the two bases, then release trees): downloads and
    unpacking overlap well even on two cores.
    """
    specs = list(specs or (f"{e}=={v}" for e, vs in RELEASES.items() for v in vs))
    pairs = [parse_spec(s) for s in specs]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(lambda e: ensure_base(e, cache=cache), sorted({e for e, _ in pairs})))
        list(pool.map(lambda p: ensure_release(*p, cache=cache), pairs))
    return specs


# ------------------------------------------------------------------- checks


def check(env: EngineEnv, timeout: float = 600) -> dict:
    """Import the release's CHECKS in one fresh process.

    Returns {"ok": bool, "seconds": float, "results": [...], "info": {...},
    "output": str (only when the probe itself failed)}.
    """
    spec = {"checks": CHECKS[env.engine], "group": PLUGIN_GROUPS[env.engine], "engine": env.engine}
    start = time.monotonic()
    proc = env.run(["python", "-P", PROBE, json.dumps(spec)], timeout=timeout, check=False,
                   cwd=tempfile.gettempdir())
    seconds = time.monotonic() - start
    lines = [l[len("HARNESS-PROBE "):] for l in proc.stdout.splitlines() if l.startswith("HARNESS-PROBE ")]
    report = json.loads(lines[-1]) if lines else {"results": [], "info": {}}
    report["seconds"] = round(seconds, 1)
    report["ok"] = bool(report["results"]) and all(r["ok"] for r in report["results"]) and not proc.returncode
    if not lines or proc.returncode:
        report["output"] = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
    return report


# ------------------------------------------------------------------ helpers


def _key(*parts) -> str:
    return hashlib.sha256("\0".join(map(str, (_RECIPE_VERSION,) + parts)).encode()).hexdigest()[:16]


def _is_built(dest: Path, key: str) -> bool:
    try:
        return (dest / _STAMP).read_text() == key
    except OSError:
        return False


@contextlib.contextmanager
def _locked(cache: Path, name: str):
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".lock-{name}", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _materialize(cache: Path, name: str, key: str, build) -> Path:
    """Return cache/name, building it unless its stamp matches key.

    build(tmp, work) fills tmp (renamed to cache/name once complete, then
    stamped); work is an empty scratch directory, deleted afterwards.
    """
    dest = cache / name
    if _is_built(dest, key):
        return dest
    with _locked(cache, name):
        if _is_built(dest, key):  # another process built it while we waited
            return dest
        for stale in [*cache.glob(f".tmp-{name}-*"), *cache.glob(f".old-{name}-*")]:
            shutil.rmtree(stale, ignore_errors=True)  # left by a killed build
        tmp, work = cache / f".tmp-{name}-{os.getpid()}", cache / f".tmp-{name}-{os.getpid()}-work"
        work.mkdir()
        log.info("building %s ...", name)
        start = time.monotonic()
        try:
            build(tmp, work)
            _relocate_scripts(tmp, dest)
            if dest.exists():
                old = cache / f".old-{name}-{os.getpid()}"
                dest.rename(old)
                shutil.rmtree(old, ignore_errors=True)
            tmp.rename(dest)
            (dest / _STAMP).write_text(key)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)
        log.info("built %s in %.1fs (%s)", name, time.monotonic() - start, _du(dest))
    return dest


def _relocate_scripts(tmp: Path, dest: Path) -> None:
    """Venv scripts name their venv's absolute path: point them at the final one."""
    bindir = tmp / "bin"
    if not (tmp / "pyvenv.cfg").exists() or not bindir.is_dir():
        return
    old, new = str(tmp).encode(), str(dest).encode()
    for f in bindir.iterdir():
        if f.is_file() and not f.is_symlink():
            data = f.read_bytes()
            if old in data:
                f.write_bytes(data.replace(old, new))


def _unpack_without_payload(wheel: Path, dest: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist()
                 if not n.endswith(VLLM_SKIP_SUFFIXES) and not n.startswith(VLLM_SKIP_PREFIXES)]
        zf.extractall(dest, names)


def _graphfix_sources(repo: Path) -> tuple[str, list]:
    files = [repo / n for n in GRAPHFIX_METADATA if (repo / n).is_file()]
    for pkg in GRAPHFIX_PACKAGES:
        files += sorted(p for p in (repo / pkg).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo"))
    h = hashlib.sha256(_RECIPE_VERSION.encode())
    for f in files:
        h.update(str(f.relative_to(repo)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16], files


def _prune_graphfix(cache: Path, keep: Path) -> None:
    dirs = sorted((d for d in cache.glob("graphfix-*") if d != keep and d.is_dir()),
                  key=lambda d: d.stat().st_mtime, reverse=True)
    stale = time.time() - GRAPHFIX_IN_USE_S
    for d in dirs[GRAPHFIX_KEEP - 1:]:
        if d.stat().st_mtime < stale:  # another checkout's test run may still be importing it
            shutil.rmtree(d, ignore_errors=True)


def _pip(python: Path, *args) -> None:
    _cmd([str(python), "-m", "pip", *args[:1], "--no-cache-dir", "--disable-pip-version-check",
          "--no-input", *args[1:]])


def _cmd(argv) -> None:
    log.debug("$ %s", " ".join(map(str, argv)))
    proc = subprocess.run(argv, check=False, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode:
        raise RunError(proc.returncode, argv, proc.stdout, proc.stderr)


def _du(path: Path) -> str:
    total = sum(f.lstat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    return f"{total / 2**20:.0f} MiB"
