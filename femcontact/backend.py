"""The one place Taichi is initialised: architecture, precision, kernel cache.

Architecture: ``auto`` tries CUDA, then Vulkan/Metal, then falls back to the CPU.
Override with ``init(arch=...)``, the CLI flag ``--arch`` or the environment
variable ``FEMCONTACT_ARCH`` (cpu, cuda, vulkan, metal, auto). Precision: float64
by default, float32 with ``precision="f32"``, ``--precision`` or
``FEMCONTACT_PRECISION``. Taichi's offline cache is on (``FEMCONTACT_CACHE_DIR``,
default ``~/.cache/femcontact/taichi``) so a second run does not recompile.

Determinism: threads adding into shared sums (assembly of A, contacts appended through atomic
counters) finish in an order that varies, so two runs of one scene agree only to round-off, and
detection may order contacts (and COND nodalize them) differently. ``FEMCONTACT_DETERMINISTIC=1`` (or
``init(..., deterministic=True)``) runs the CPU backend on one thread: every run, and every run
resumed from a checkpoint, then repeats bit for bit on the same machine. GPUs have no such mode.

Banner: Taichi prints "[Taichi] version ..." when it is imported. femcontact names its backend
in its own messages, so this module (imported before anything imports Taichi) turns that banner
off unless ``ENABLE_TAICHI_HEADER_PRINT`` is set, and ``init`` swallows the "Starting on arch"
line of ``ti.init``: ``femcontact --help``, ``mesh`` and ``render`` print only their own output,
and ``run`` names the backend in its own first line.
``FEMCONTACT_CPU_THREADS=N`` caps the CPU backend's threads (sweeps set it in their workers).
"""
from __future__ import annotations

import contextlib
import ctypes
import io
import os
from pathlib import Path

import numpy as np

from .errors import ParameterError

os.environ.setdefault("ENABLE_TAICHI_HEADER_PRINT", "0")   # before any ``import taichi`` (module docstring)

ARCHS = ("auto", "cpu", "cuda", "vulkan", "metal")
PRECISIONS = ("f64", "f32")

_config: dict | None = None


def _ti():
    import taichi as ti

    return ti


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
    ti = _ti()
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
    cache = os.environ.get("FEMCONTACT_CACHE_DIR", str(Path.home() / ".cache" / "femcontact" / "taichi"))
    common = dict(default_fp=fp, default_ip=ti.i32, offline_cache=True, offline_cache_file_path=cache,
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
    for name in candidates:
        if name == "vulkan" and want_prec == "f64" and want_arch == "auto":
            continue  # Vulkan float64 support is device-dependent; auto only uses it for f32
        try:
            with contextlib.redirect_stdout(io.StringIO()):    # its "[Taichi] Starting on arch=..." line
                ti.init(arch=getattr(ti, "x64" if name == "cpu" else name), log_level=ti.ERROR, **common)
        except Exception:  # noqa: BLE001 - an unavailable backend raises various errors
            continue
        actual = ti.lang.impl.current_cfg().arch
        if name == "cpu" or actual != ti.x64:
            chosen = "cpu" if actual in (ti.x64, ti.arm64) else name
            break
    if chosen is None:
        raise ParameterError(f"no usable Taichi backend for arch={want_arch!r}")
    _config = {"arch": chosen, "requested_arch": want_arch, "precision": want_prec, "deterministic": deterministic}
    return _config


def ensure_init() -> dict:
    """Initialise with the defaults (environment variables honoured) if nobody did yet."""
    return _config if _config is not None else init()


def config() -> dict:
    """The active configuration, initialising with defaults if needed."""
    return ensure_init()


def np_real() -> type:
    """The numpy float type matching Taichi's default float."""
    return np.float64 if ensure_init()["precision"] == "f64" else np.float32


def vec3_array(n: int, value: np.ndarray | None = None):
    """A Taichi ndarray of n 3-vectors in the active precision (at least one element)."""
    ti = _ti()
    ensure_init()
    arr = ti.Vector.ndarray(3, float, shape=max(int(n), 1))
    if value is not None and len(value):
        arr.from_numpy(np.ascontiguousarray(value, dtype=np_real()).reshape(-1, 3))
    return arr


def mat3_array(n: int):
    """A Taichi ndarray of n 3x3 matrices in the active precision (at least one element)."""
    ti = _ti()
    ensure_init()
    return ti.Matrix.ndarray(3, 3, float, shape=max(int(n), 1))


def scalar_array(n: int, value: np.ndarray | None = None, dtype=None):
    """A Taichi scalar ndarray (float by default, or ``dtype`` such as ti.i32)."""
    ti = _ti()
    ensure_init()
    dt = float if dtype is None else dtype
    arr = ti.ndarray(dt, shape=max(int(n), 1))
    if value is not None and len(value):
        npdt = np.int32 if dt is ti.i32 else np_real()
        arr.from_numpy(np.ascontiguousarray(value, dtype=npdt).ravel())
    return arr


def int_array(n_or_value, width: int | None = None):
    """A Taichi int32 ndarray from numpy data (1-D, or 2-D with ``width`` columns)."""
    ti = _ti()
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
            try:
                probe = scalar_array(3, np.array([1.0, 2.0, 3.0]))
                view = _make_view(probe)
                view[1] = 5.0
                ok = bool(view[0] == 1.0 and probe.to_numpy()[1] == 5.0)
            except Exception:  # noqa: BLE001 - any failure means: use to_numpy / from_numpy
                ok = False
        cfg["host_views"] = ok
    return cfg["host_views"]


def _make_view(arr) -> np.ndarray:
    from taichi.lang import impl

    ti = _ti()
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
