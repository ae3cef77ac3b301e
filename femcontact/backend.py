"""The one place the kernel runtime is chosen and initialised: runtime, architecture, precision,
kernel cache. No other module imports ``taichi`` or ``quadrants``: they take ``ti`` from here.

Runtime: the kernels are written in the Taichi language and run unchanged on two runtimes.
``quadrants`` (the default; the Genesis team's maintained fork of Taichi, ``pip install
quadrants==1.3.3``) launches a kernel in ~6 µs + ~1 µs per ndarray argument on a 2-core CPU and
caches its front end; ``taichi`` (1.7.4, the last Taichi release, ``pip install taichi==1.7.4``)
costs ~20 µs + ~18 µs per ndarray argument (docs/PERFORMANCE.md). Pick one with the environment
variable ``FEMCONTACT_RUNTIME=quadrants|taichi``, ``femcontact run --runtime`` or ``select_runtime``;
it is fixed at the first use of ``ti`` (importing a kernel module declares its kernels), after which
another runtime is refused. The two agree to round-off, not bit for bit (different LLVM versions).

Architecture: ``auto`` tries CUDA, then Vulkan/Metal, then falls back to the CPU.
Override with ``init(arch=...)``, the CLI flag ``--arch`` or the environment
variable ``FEMCONTACT_ARCH`` (cpu, cuda, vulkan, metal, auto). Precision: float64
by default, float32 with ``precision="f32"``, ``--precision`` or
``FEMCONTACT_PRECISION``.

Kernel cache: compiled kernels persist between processes in ``cache_dir()``:
``FEMCONTACT_CACHE_DIR`` (default ``~/.cache/femcontact/kernels``) / ``<runtime>-<version>-<source
fingerprint>``. On quadrants every kernel uses the fast cache (``@kernel(fastcache=True)``: the
front end is skipped too). The fast cache keys a kernel by its own source and its arguments, not by
the module constants it reads (``SLOTS``, shape codes, ...); the folder's fingerprint hashes every
source file of femcontact, so a changed constant (or any changed line) compiles afresh instead of
loading a stale kernel. Taichi 1.7.4 writes its offline cache only when its program shuts down,
so ``init`` registers that shutdown at exit.

Compilation: on the CPU ``init`` turns the runtime's own control-flow-graph optimisation of its IR
off (``cfg_optimization=False``: store-to-load forwarding and dead-store elimination before LLVM). It
was two thirds of every kernel's compile time (the CPU seconds of the first launches of
panda_mat_fold's 19 kernels: 7.7 -> 2.5-2.7 s) and LLVM's own passes do the same work after it: the
LLVM IR that is cached comes out within 1 % of the same size, and the kernels' minimum times are the
same (docs/PERFORMANCE.md, "issue 28 closing measurements"). GPU backends keep it until a GPU run
has measured the same (tools/gpu_check.sh).

Determinism: threads adding into shared sums (assembly of A, contacts appended through atomic
counters) finish in an order that varies, so two runs of one scene agree only to round-off, and
detection may order contacts (and COND nodalize them) differently. ``FEMCONTACT_DETERMINISTIC=1`` (or
``init(..., deterministic=True)``) runs the CPU backend on one thread: every run, and every run
resumed from a checkpoint, then repeats bit for bit on the same machine and runtime. GPUs have no
such mode.

Banner: the runtimes print "[Taichi] version ..." / "[Quadrants] version ..." when imported.
femcontact names its runtime in its own messages, so this module turns that banner off unless
``ENABLE_TAICHI_HEADER_PRINT`` / ``ENABLE_QUADRANTS_HEADER_PRINT`` is set, and ``init`` swallows
the "Starting on arch" line: ``femcontact --help``, ``mesh`` and ``render`` print only their own
output, and ``run`` names the runtime and backend in its own first line.
``FEMCONTACT_CPU_THREADS=N`` caps the CPU backend's threads (sweeps set it in their workers).
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import io
import linecache
import os
import sys
import types
import warnings
from pathlib import Path

import numpy as np

from .errors import ParameterError

ARCHS = ("auto", "cpu", "cuda", "vulkan", "metal")
PRECISIONS = ("f64", "f32")
# name -> (module, pinned version, install command)
RUNTIMES = {"quadrants": ("quadrants", "1.3.3", "pip install quadrants==1.3.3"),
            "taichi": ("taichi", "1.7.4", "pip install taichi==1.7.4")}
DEFAULT_RUNTIME = "quadrants"

_config: dict | None = None


def _checked_runtime(name: str | None) -> str:
    """``name`` (default: ``FEMCONTACT_RUNTIME``, else quadrants) lower-cased, refused if unknown."""
    name = (name or os.environ.get("FEMCONTACT_RUNTIME") or DEFAULT_RUNTIME).strip().lower()
    if name not in RUNTIMES:
        raise ParameterError(f"unknown runtime {name!r} (FEMCONTACT_RUNTIME or --runtime); choose one of "
                             f"{', '.join(RUNTIMES)}: " + "; ".join(f"{n}: {c[2]}" for n, c in RUNTIMES.items()))
    return name


def requested_runtime() -> str:
    """The runtime in use, or else the one ``FEMCONTACT_RUNTIME`` asks for (default quadrants)."""
    return _active[0] if _active is not None else _checked_runtime(None)


class _ProbeOnLoad(importlib.abc.MetaPathFinder):
    """Finds ``<runtime>.lang.kernel_impl`` like the path finder does and installs the fast class probe
    (``_speed_up_class_probe``) as soon as that module has run: the runtime's own ``@func`` declarations
    at its import (~170 on quadrants) then use it too (~0.2-0.3 s of every start)."""

    def __init__(self, fullname: str):
        self.fullname = fullname

    def find_spec(self, fullname, path, target=None):
        if fullname != self.fullname:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec

        def exec_module(module, _run=loader.exec_module):
            _run(module)
            _speed_up_class_probe(module)

        loader.exec_module = exec_module
        return spec


def _import_runtime(name: str) -> types.ModuleType:
    module, _, install = RUNTIMES[name]
    os.environ.setdefault(f"ENABLE_{module.upper()}_HEADER_PRINT", "0")    # before the import (module docstring)
    finder = _ProbeOnLoad(f"{module}.lang.kernel_impl")
    sys.meta_path.insert(0, finder)
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        others = [n for n in RUNTIMES if n != name]
        raise ParameterError(f"the kernel runtime {name!r} is not installed ({exc}); install it with "
                             f"'{install}', or choose another with FEMCONTACT_RUNTIME={'|'.join(others)} "
                             f"(or femcontact run --runtime)") from exc
    finally:
        sys.meta_path.remove(finder)


# (name, version, module) once the runtime is chosen: at select_runtime() or at the first use of ``ti``
_active: tuple[str, str, types.ModuleType] | None = None


def select_runtime(name: str | None = None) -> str:
    """Choose and import the kernel runtime (``name``, default ``FEMCONTACT_RUNTIME``, else quadrants)
    and return its name. Call it before any kernel is declared (``femcontact run --runtime`` does, before
    importing the simulator); the choice is exported as ``FEMCONTACT_RUNTIME`` so child processes (sweep
    workers) use it too. Refused (ParameterError) for an unknown or missing runtime, and for another
    runtime than the one this process's kernels were already declared on."""
    global _active
    want = _checked_runtime(name)
    if _active is not None:
        if _active[0] != want:
            raise ParameterError(f"the kernel runtime is already {_active[0]} {_active[1]} in this process (its "
                                 f"kernels are declared); {want!r} must be chosen before femcontact's kernels are "
                                 f"imported: set FEMCONTACT_RUNTIME={want} in the environment")
        return want
    module = _import_runtime(want)
    version = module.__version__
    version = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
    if want == "quadrants":
        # Kernels read module constants (SLOTS, shape codes, ...); the cache folder's source fingerprint keys
        # them (module docstring), so quadrants' per-kernel "violates pure" warning is expected and silenced.
        warnings.filterwarnings("ignore", message=r"\[PURE\.VIOLATION\]")
    else:       # Taichi writes its offline cache only when its program is torn down
        atexit.register(_shutdown_at_exit)
    _speed_up_class_probe(importlib.import_module(f"{RUNTIMES[want][0]}.lang.kernel_impl"))
    _active = (want, version, module)
    os.environ["FEMCONTACT_RUNTIME"] = want
    return want


def _speed_up_class_probe(kernel_impl: types.ModuleType) -> None:
    """Both runtimes ask, for every ``@kernel`` and ``@func``, whether it is declared in a class body by
    matching the caller's source line (``_inside_class``), read with ``inspect.getframeinfo``, which also
    scans ``sys.modules`` for the frame's module: ~3 ms a call, ~240 calls, ~0.7 s of a warm start of
    cube_drop. The same line read through ``linecache`` answers the same (tests/backend/test_runtime.py)."""
    original = getattr(kernel_impl, "_inside_class", None)
    patterns = getattr(kernel_impl, "_KERNEL_CLASS_STACKFRAME_STMT_RES", None)
    if original is None or patterns is None or getattr(original, "_femcontact", False):
        return      # another version of the runtime: keep its own

    def inside_class(level_of_class_stackframe: int) -> bool:
        try:
            frame = sys._getframe(level_of_class_stackframe)
        except ValueError:
            return False
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
        return any(p.match(line) for p in patterns)

    inside_class._femcontact = True
    inside_class._original = original
    kernel_impl._inside_class = inside_class


def _runtime() -> tuple[str, str, types.ModuleType]:
    """The active (name, version, module), choosing the default runtime at the first use."""
    if _active is None:
        select_runtime()
    return _active


def __getattr__(attr: str):
    """``RUNTIME`` and ``RUNTIME_VERSION``: the active runtime's name and version (chosen at first use)."""
    if attr == "RUNTIME":
        return _runtime()[0]
    if attr == "RUNTIME_VERSION":
        return _runtime()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


class _Language(types.ModuleType):
    """The runtime's language namespace as femcontact's kernels use it (``ti.kernel``, ``ti.func``,
    ``ti.types.ndarray``, ...): the runtime module itself, chosen at the first attribute used
    (``select_runtime``), except that on quadrants ``kernel`` turns the fast cache on (module docstring)."""

    def __init__(self):
        super().__init__("femcontact.backend.ti")

    def __getattr__(self, attr: str):
        if attr.startswith("__"):           # copy/pickle/inspect probes must not choose the runtime
            raise AttributeError(attr)
        name, _, module = _runtime()
        value = self._fastcache_kernel if attr == "kernel" and name == "quadrants" else getattr(module, attr)
        setattr(self, attr, value)          # the runtime cannot change any more: later reads skip this
        return value

    def _fastcache_kernel(self, fn=None, **options):
        options.setdefault("fastcache", True)
        module = _runtime()[2]
        if fn is None:
            return lambda f: module.kernel(f, **options)
        return module.kernel(fn, **options)


ti = _Language()


def source_fingerprint(root: Path | None = None) -> str:
    """A hash of every ``.py`` file under ``root`` (default: the femcontact package), by relative
    path and content: the part of the kernel cache's key that covers module constants."""
    root = Path(__file__).resolve().parent if root is None else Path(root)
    h = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


_FINGERPRINT: str | None = None


def cache_dir() -> Path:
    """Where compiled kernels persist: ``FEMCONTACT_CACHE_DIR`` (default ``~/.cache/femcontact/kernels``)
    / ``<runtime>-<version>-<source fingerprint>`` (module docstring)."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        _FINGERPRINT = source_fingerprint()
    base = os.environ.get("FEMCONTACT_CACHE_DIR") or str(Path.home() / ".cache" / "femcontact" / "kernels")
    name, version, _ = _runtime()
    return Path(base) / f"{name}-{version}-{_FINGERPRINT}"


def cache_is_warm() -> bool:
    """True when this runtime and source already left compiled kernels in ``cache_dir()``."""
    folder = cache_dir()
    return folder.is_dir() and any(p.is_file() for p in folder.rglob("*"))


def cached_kernel_files() -> int:
    """How many files the kernel cache holds (a second process that compiles nothing adds none)."""
    folder = cache_dir()
    return sum(1 for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def _shutdown_at_exit() -> None:
    """Taichi 1.7.4 writes its offline cache only when its program is torn down (module docstring)."""
    try:
        _runtime()[2].reset()
    except Exception:  # noqa: BLE001 - exiting anyway; a cache that is not written only costs a recompile
        pass



def _requested(arch: str | None, precision: str | None) -> tuple[str, str]:
    arch = (arch or os.environ.get("FEMCONTACT_ARCH") or "auto").lower()
    precision = (precision or os.environ.get("FEMCONTACT_PRECISION") or "f64").lower()
    precision = {"float64": "f64", "double": "f64", "float32": "f32", "single": "f32"}.get(precision, precision)
    if arch not in ARCHS:
        raise ParameterError(f"unknown arch {arch!r}; choose one of {', '.join(ARCHS)}")
    if precision not in PRECISIONS:
        raise ParameterError(f"unknown precision {precision!r}; choose f64 or f32")
    return arch, precision


def init(arch: str | None = None, precision: str | None = None, *, debug: bool = False,
         deterministic: bool | None = None) -> dict:
    """Initialise Taichi once; return the active configuration {arch, precision, deterministic}.

    deterministic: one CPU thread, so runs repeat bit for bit (module docstring); default: the
    current mode once initialised, else ``FEMCONTACT_DETERMINISTIC``.

    Calling again with the same (or no) request is a no-op. Asking for a different
    configuration re-initialises Taichi, which invalidates every Model built before.
    """
    global _config
    want_arch, want_prec = _requested(arch, precision)
    if deterministic is None and _config is not None:
        # keep the mode already set (init(..., deterministic=True) then Simulator()'s init() must not undo it)
        deterministic = _config["deterministic"]
    if deterministic is None:
        deterministic = os.environ.get("FEMCONTACT_DETERMINISTIC", "0").strip().lower() in ("1", "true", "yes", "on")
    if _config is not None and (arch is None and precision is None
                                or (_config["requested_arch"], _config["precision"]) == (want_arch, want_prec)) \
            and _config["deterministic"] == deterministic:
        return _config
    if deterministic and want_arch not in ("auto", "cpu"):
        raise ParameterError(f"deterministic runs use the CPU backend (one thread); arch {want_arch!r} has no "
                             "deterministic mode: unset FEMCONTACT_DETERMINISTIC or use --arch cpu")
    fp = ti.f64 if want_prec == "f64" else ti.f32
    cache = cache_dir()
    warm = cache_is_warm()
    common = dict(default_fp=fp, default_ip=ti.i32, offline_cache=True, offline_cache_file_path=str(cache),
                  debug=debug)
    candidates = {"auto": ["cuda", "vulkan", "metal", "cpu"]}.get(want_arch, [want_arch])
    threads = os.environ.get("FEMCONTACT_CPU_THREADS", "").strip()
    if threads:   # e.g. one per process when a sweep runs several simulations side by side
        if not threads.isdigit() or int(threads) < 1:
            raise ParameterError(f"FEMCONTACT_CPU_THREADS must be a positive integer, got {threads!r}")
        common["cpu_max_num_threads"] = int(threads)
    if deterministic:
        candidates = ["cpu"]
        common["cpu_max_num_threads"] = 1
    chosen = None
    failure = None
    for name in candidates:
        if name in ("vulkan", "metal") and want_prec == "f64" and want_arch == "auto":
            continue  # Metal has no float64 and Vulkan's is device-dependent: auto uses them for f32 only
        try:
            with contextlib.redirect_stdout(io.StringIO()):    # its "[Taichi] Starting on arch=..." line
                ti.init(arch=getattr(ti, "x64" if name == "cpu" else name), log_level=ti.ERROR, **common,
                        **({"cfg_optimization": False} if name == "cpu" else {}))  # module docstring, "Compilation"
        except Exception as exc:  # noqa: BLE001 - an unavailable backend raises various errors
            failure = exc
            continue
        actual = ti.lang.impl.current_cfg().arch
        if name == "cpu" or actual != ti.x64:
            chosen = "cpu" if actual in (ti.x64, ti.arm64) else name
            break
    if chosen is None:
        hint = f": {cuda_diagnosis(failure)}" if want_arch == "cuda" else ""
        raise ParameterError(f"no usable {_runtime()[0]} backend for arch={want_arch!r}{hint}; "
                             f"or use --arch cpu (or auto), or FEMCONTACT_ARCH=cpu")
    name, version, _ = _runtime()
    _config = {"arch": chosen, "requested_arch": want_arch, "precision": want_prec, "deterministic": deterministic,
               "runtime": name, "runtime_version": version, "cache": str(cache), "cache_warm": warm}
    if chosen == "cpu":
        _host_views_ok()        # before the first from_numpy: copies go through host views (_copy_through_host_views)
    return _config


CUDA_ERRORS = {100: "CUDA_ERROR_NO_DEVICE", 35: "CUDA_ERROR_INSUFFICIENT_DRIVER", 999: "CUDA_ERROR_UNKNOWN",
               804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", 3: "CUDA_ERROR_NOT_INITIALIZED",
               101: "CUDA_ERROR_INVALID_DEVICE", 304: "CUDA_ERROR_OPERATING_SYSTEM"}


def _cuda_driver():
    """The NVIDIA driver's CUDA library (ctypes), or None where none can be loaded."""
    for lib in (["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"]):
        try:
            return ctypes.CDLL(lib)
        except OSError:
            continue
    return None


def cuda_diagnosis(failure: BaseException | None = None) -> str:
    """Why the CUDA backend cannot start on this machine, and what to install or do: no NVIDIA driver,
    a driver that sees no GPU (or fails to start), or a runtime built without CUDA. ``failure``: the
    runtime's own error, quoted when none of these explains it."""
    if sys.platform == "darwin":
        return "macOS has no CUDA (NVIDIA GPUs are not supported there): use --arch metal or --arch cpu"
    driver = _cuda_driver()
    if driver is None:
        lib = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
        return (f"no NVIDIA driver found ({lib} cannot be loaded). On a machine with an NVIDIA GPU install the "
                "NVIDIA driver (Linux: your distribution's nvidia-driver package or the driver from "
                "nvidia.com/drivers, then check with nvidia-smi; in a container: run it with --gpus all and the "
                "NVIDIA Container Toolkit); the CUDA toolkit itself is not needed")
    rc = int(driver.cuInit(0))
    count = ctypes.c_int(0)
    if rc == 0:
        rc = int(driver.cuDeviceGetCount(ctypes.byref(count)))
    if rc == 100 or (rc == 0 and count.value == 0):
        return ("the NVIDIA driver is installed but sees no GPU (CUDA_ERROR_NO_DEVICE): check nvidia-smi, "
                "that CUDA_VISIBLE_DEVICES does not hide the GPU, and in a container that it was started with "
                "--gpus all")
    if rc != 0:
        why = CUDA_ERRORS.get(rc, f"error {rc}")
        fix = (" the driver is older than the runtime needs: update the NVIDIA driver" if rc == 35 else
               " run nvidia-smi to see the driver's state; a reboot after a driver update often fixes this")
        return f"the NVIDIA driver is installed but could not start CUDA ({why});{fix}"
    name, version, module = _runtime()
    if not module._lib.core.with_cuda():
        return (f"{count.value} NVIDIA GPU(s) and a driver are present, but this {name} {version} build has no "
                f"CUDA backend: install a CUDA-enabled build (pip install --force-reinstall {name}=={version} "
                "on Linux or Windows x86-64)")
    detail = f" ({type(failure).__name__}: {failure})" if failure is not None else ""
    return f"{count.value} NVIDIA GPU(s), a driver and a CUDA-enabled {name} are present, but it failed to start{detail}"


def ensure_init() -> dict:
    """Initialise with the defaults (environment variables honoured) if nobody did yet."""
    return _config if _config is not None else init()


def config() -> dict:
    """The active configuration, initialising with defaults if needed."""
    return ensure_init()


def np_real() -> type:
    """The numpy float type matching Taichi's default float."""
    return np.float64 if ensure_init()["precision"] == "f64" else np.float32


def describe() -> str:
    """One line naming the runtime, backend and precision, for run banners."""
    cfg = ensure_init()
    return f"{cfg['runtime']} {cfg['runtime_version']} on {cfg['arch']} ({cfg['precision']})"


def vec3_array(n: int, value: np.ndarray | None = None):
    """A Taichi ndarray of n 3-vectors in the active precision (at least one element)."""
    ensure_init()
    arr = ti.Vector.ndarray(3, float, shape=max(int(n), 1))
    if value is not None and len(value):
        arr.from_numpy(np.ascontiguousarray(value, dtype=np_real()).reshape(-1, 3))
    return arr


def mat3_array(n: int):
    """A Taichi ndarray of n 3x3 matrices in the active precision (at least one element)."""
    ensure_init()
    return ti.Matrix.ndarray(3, 3, float, shape=max(int(n), 1))


def scalar_array(n: int, value: np.ndarray | None = None, dtype=None):
    """A Taichi scalar ndarray (float by default, or ``dtype`` such as ti.i32)."""
    ensure_init()
    dt = float if dtype is None else dtype
    arr = ti.ndarray(dt, shape=max(int(n), 1))
    if value is not None and len(value):
        npdt = np.int32 if dt is ti.i32 else np_real()
        arr.from_numpy(np.ascontiguousarray(value, dtype=npdt).ravel())
    return arr


def int_array(n_or_value, width: int | None = None):
    """A Taichi int32 ndarray from numpy data (1-D, or 2-D with ``width`` columns)."""
    ensure_init()
    data = np.ascontiguousarray(n_or_value, dtype=np.int32)
    if width is None:
        arr = ti.ndarray(ti.i32, shape=max(len(data), 1))
        if len(data):
            arr.from_numpy(data)
    else:
        arr = ti.Vector.ndarray(width, ti.i32, shape=max(len(data), 1))
        if len(data):
            arr.from_numpy(data.reshape(-1, width))
    return arr


# ---------------------------------------------------------------- host views (CPU: no copy, no launch)
_VIEW_CTYPES = {"f64": ctypes.c_double, "f32": ctypes.c_float, "i32": ctypes.c_int32}


def _host_views_ok() -> bool:
    """True when ndarrays live in host memory (the CPU backend) and a view reads and writes them."""
    cfg = ensure_init()
    if "host_views" not in cfg:
        ok = False
        if cfg["arch"] == "cpu":
            try:    # element access goes through the runtime's host accessor, not a kernel
                probe = ti.ndarray(float, shape=3)
                probe[0], probe[1] = 1.0, 2.0
                view = _make_view(probe)
                view[1] = 5.0
                ok = bool(view[0] == 1.0 and probe[1] == 5.0)
            except Exception:  # noqa: BLE001 - any failure means: use to_numpy / from_numpy
                ok = False
        cfg["host_views"] = ok
        if ok:
            _copy_through_host_views()
    return cfg["host_views"]


def _view_for_copy(arr) -> np.ndarray | None:
    """``arr``'s host view where a plain numpy copy can stand for the runtime's copy kernel, else None."""
    if getattr(arr, "_qd_layout", None) is not None or not _host_views_ok():
        return None
    try:
        return host_view(arr)
    except TypeError:       # a dtype without a view (u8, i64, ...)
        return None


def _copy_through_host_views() -> None:
    """Where ndarrays live in host memory (the CPU), ``from_numpy``, ``to_numpy`` and ``fill`` copy through
    the host view instead of launching the runtime's copy kernels (``ext_arr_to_ndarray``,
    ``ndarray_to_ext_arr``, ``fill_ndarray`` and their matrix forms): those are compiled (not fast-cached)
    and each is loaded and launched in every process, ~0.3 s of a start. The same values land: the
    shapes are checked as the runtime checks them, floats are cast as numpy and the kernels both cast
    (IEEE round to nearest), and anything else (other dtypes or shapes, a Matrix fill value, a
    layout-tagged or non-host ndarray) goes to the runtime's own method. Installed once per process;
    every call asks whether the current backend has host views."""
    lang = ti.lang
    ndarray_mod, matrix_mod = sys.modules[lang.__name__ + "._ndarray"], sys.modules[lang.__name__ + ".matrix"]
    base = ndarray_mod.Ndarray
    if getattr(base._ndarray_to_numpy, "_femcontact", False):
        return

    def same_kind(view, arr) -> bool:
        return isinstance(arr, np.ndarray) and arr.shape == view.shape and (
            arr.dtype == view.dtype or (arr.dtype.kind == "f" and view.dtype.kind == "f"))

    def patch(cls, name, fast):
        original = cls.__dict__[name]

        def method(self, *args, **kwargs):
            view = _view_for_copy(self)
            done = fast(view, *args, **kwargs) if view is not None else NotImplemented
            return original(self, *args, **kwargs) if done is NotImplemented else done

        method._femcontact = True
        method._original = original
        setattr(cls, name, method)

    def to_numpy(view, *args, **kwargs):
        return np.array(view)

    def from_numpy(view, arr, *args, **kwargs):
        if not same_kind(view, arr):
            return NotImplemented
        view[...] = arr
        return None

    def fill(view, val):
        if not (isinstance(val, (float, np.floating)) and view.dtype.kind == "f"
                or isinstance(val, (int, np.integer)) and not isinstance(val, bool)):
            return NotImplemented
        view.fill(val)
        return None

    for name in ("_ndarray_to_numpy", "_ndarray_matrix_to_numpy"):
        patch(base, name, to_numpy)
    for name in ("_ndarray_from_numpy", "_ndarray_matrix_from_numpy"):
        patch(base, name, from_numpy)
    for cls in (ndarray_mod.ScalarNdarray, matrix_mod.MatrixNdarray, matrix_mod.VectorNdarray):
        if "_fill_by_kernel" in cls.__dict__:
            patch(cls, "_fill_by_kernel", fill)


def _make_view(arr) -> np.ndarray:
    impl = ti.lang.impl
    dtype = arr.dtype
    key = "i32" if dtype == ti.i32 else ("f64" if dtype == ti.f64 else "f32" if dtype == ti.f32 else None)
    if key is None:
        raise TypeError(f"no host view for dtype {dtype}")
    shape = tuple(arr.shape) + tuple(getattr(arr, "element_shape", ()) or ())
    count = int(np.prod(shape))
    addr = impl.get_runtime().prog.get_ndarray_data_ptr_as_int(arr.arr)
    buf = (_VIEW_CTYPES[key] * count).from_address(addr)
    return np.ctypeslib.as_array(buf).reshape(shape)


def host_view(arr) -> np.ndarray | None:
    """A numpy array sharing the memory of Taichi ndarray ``arr`` (full shape, element dims last),
    or None where ndarrays do not live in host memory (then use ``to_numpy`` / ``from_numpy``).

    On the CPU backend a Taichi ndarray is plain host memory and its kernels finish before the
    launch returns, so the step's host code reads and writes kernel data through a view: no
    copy kernel (``to_numpy`` launches one, ~30-300 µs) and no new numpy array. The view is
    cached on the ndarray and lives as long as it; never keep it beyond the ndarray's life."""
    view = getattr(arr, "_fc_host_view", None)
    if view is not None:
        return view
    if not _host_views_ok():
        return None
    view = _make_view(arr)
    arr._fc_host_view = view
    return view


def default_check_every() -> int:
    """Iterations between host reads of an iterative solver's device-side scalars: 1 where a host
    view reads them for free (the CPU), 8 where a read is a device synchronization and a copy."""
    return 1 if _host_views_ok() else 8


def read(arr, count: int | None = None) -> np.ndarray:
    """A copy of the first ``count`` rows of ``arr`` as numpy (all rows when None), via the host
    view where there is one (``host_view``), else ``to_numpy``."""
    view = host_view(arr)
    data = view if view is not None else arr.to_numpy()
    return np.array(data if count is None else data[:count])


def write(arr, value: np.ndarray, start: int = 0) -> None:
    """Write ``value`` into rows ``start:start+len(value)`` of ``arr`` (other rows kept)."""
    view = host_view(arr)
    if view is not None:
        view[start:start + len(value)] = value
        return
    data = arr.to_numpy()
    data[start:start + len(value)] = value
    arr.from_numpy(data)
