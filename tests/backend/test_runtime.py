"""The kernel runtime (quadrants by default, Taichi on request) and the kernel cache: a second process
compiles nothing, the cache is keyed by a fingerprint of the sources, bad runtimes are refused, and
``--runtime`` really picks the runtime (femcontact.backend, femcontact.cli)."""
from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from femcontact import backend
from femcontact.backend import ti       # (the runtime is chosen at its first attribute used, not here)
from femcontact.errors import ParameterError

ROOT = Path(__file__).resolve().parents[2]
SCENE = ROOT / "scenes" / "free_fall.py"

# Runs `femcontact ARGS`, counting on quadrants each of femcontact's kernels materialized and each one whose
# front end ran (a fast-cache miss: quadrants.lang.kernel.Kernel._try_load_fastcache returned None); prints the
# counts. quadrants' own from_numpy/to_numpy kernels are not fast-cache kernels and are not counted.
PROBE = """
import sys
from femcontact import backend
backend.select_runtime(sys.argv[sys.argv.index("--runtime") + 1] if "--runtime" in sys.argv else None)
counts = {"kernels": 0, "compiled": 0}
if backend.RUNTIME == "quadrants":
    from quadrants.lang.kernel import Kernel
    lookup = Kernel._try_load_fastcache
    def counted(self, args, key):
        hit = lookup(self, args, key)
        if self.func.__module__.startswith("femcontact."):
            counts["kernels"] += 1
            counts["compiled"] += hit is None
        return hit
    Kernel._try_load_fastcache = counted
from femcontact.cli import main
rc = main(sys.argv[1:])
print("PROBE", counts["kernels"], counts["compiled"])
sys.exit(rc)
"""


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("FEMCONTACT_RUNTIME", "FEMCONTACT_CACHE_DIR")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["FEMCONTACT_ARCH"] = "cpu"
    env.update(extra)
    return env


def _python(args: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600, env=_env(**env),
                          cwd=ROOT)


def _files(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.is_file())


def _run_twice(runtime: str, tmp_path: Path) -> tuple[list[str], list[int], list[str]]:
    """free_fall.py for 2 steps with ``--runtime`` in two processes sharing a fresh cache: (stdouts, file
    counts, probe lines)."""
    cache = tmp_path / "cache"
    outs, counts, probes = [], [], []
    for k in range(2):
        proc = _python(["-c", PROBE, "run", str(SCENE), "--steps", "2", "--no-progress", "--out",
                        str(tmp_path / f"o{k}"), "--runtime", runtime], FEMCONTACT_CACHE_DIR=str(cache))
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs.append(proc.stdout)
        counts.append(_files(cache))
        probes.append(next(line for line in proc.stdout.splitlines() if line.startswith("PROBE")))
    return outs, counts, probes


@pytest.mark.slow
@pytest.mark.sample
def test_second_process_compiles_nothing_on_quadrants(tmp_path):
    outs, counts, probes = _run_twice("quadrants", tmp_path)
    assert "on quadrants 1.3.3 on cpu (f64)" in outs[0]
    assert "femcontact: compiling kernels (first run of this femcontact version" in outs[0]
    assert f"later runs load them from {tmp_path / 'cache'}" in outs[0]
    assert f"femcontact: loading kernels from {tmp_path / 'cache'}" in outs[1]
    assert counts[0] > 0 and counts[1] == counts[0]          # the second run adds no file to the cache
    (_, n0, compiled0), (_, n1, compiled1) = (p.split() for p in probes)
    assert int(n0) >= 4 and int(compiled0) == int(n0)       # first run: every kernel through the front end
    assert int(n1) == int(n0) and int(compiled1) == 0        # second: the same kernels, all from the fast cache


@pytest.mark.slow
@pytest.mark.sample
def test_second_process_compiles_nothing_on_taichi(tmp_path):
    """Also: ``femcontact run --runtime taichi`` really runs on Taichi (banner, cache folder)."""
    pytest.importorskip("taichi")
    outs, counts, _ = _run_twice("taichi", tmp_path)
    assert all("on taichi 1.7.4 on cpu (f64)" in out and "first step done" in out for out in outs)
    assert (tmp_path / "o1" / "run.pvd").is_file()
    assert "compiling kernels" in outs[0] and "loading kernels from" in outs[1]
    folders = [p.name for p in (tmp_path / "cache").iterdir()]
    assert len(folders) == 1 and folders[0].startswith("taichi-1.7.4-")
    assert counts[0] > 0 and counts[1] == counts[0]          # Taichi's offline cache: written once, then only read


def test_source_fingerprint_changes_with_a_constant(tmp_path):
    pkg = tmp_path / "pkg"
    shutil.copytree(ROOT / "femcontact" / "spec", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    before = backend.source_fingerprint(pkg)
    assert backend.source_fingerprint(pkg) == before         # a pure function of the files
    (pkg / "extra_notes.txt").write_text("not a source file")
    assert backend.source_fingerprint(pkg) == before
    target = pkg / "material.py"
    text = target.read_text()
    target.write_text(text + "\nSOME_CONSTANT = 1\n")
    one = backend.source_fingerprint(pkg)
    target.write_text(text + "\nSOME_CONSTANT = 2\n")
    assert len({before, one, backend.source_fingerprint(pkg)}) == 3


KERNEL_MODULE = '''import quadrants as qd

C = {value}


@qd.kernel(fastcache=True)
def fill(a: qd.types.ndarray()):
    a[0] = C
'''

# argv: package folder, cache folder; prints what the kernel wrote
KERNEL_RUN = """
import os, sys, warnings
warnings.filterwarnings("ignore")
os.environ["ENABLE_QUADRANTS_HEADER_PRINT"] = "0"
import quadrants as qd
qd.init(arch=qd.cpu, offline_cache=True, offline_cache_file_path=sys.argv[2], log_level=qd.ERROR)
sys.path.insert(0, sys.argv[1])
import kern
a = qd.ndarray(qd.f64, shape=1)
kern.fill(a)
print("VALUE", a.to_numpy()[0])
"""


def test_fingerprinted_cache_never_loads_a_stale_constant(tmp_path):
    """The fast cache keys a kernel by its own source, not by the module constant it reads: with one flat
    cache folder the kernel compiled for C = 2 is loaded again after C became 3. Keyed, as backend.cache_dir
    keys femcontact's kernels, by source_fingerprint of the package, the changed constant compiles afresh."""
    pytest.importorskip("quadrants")
    pkg = tmp_path / "pkg"
    pkg.mkdir()

    def value(cache: Path) -> float:
        proc = _python(["-c", KERNEL_RUN, str(pkg), str(cache)])
        assert proc.returncode == 0, proc.stderr[-2000:]
        return float(next(line for line in proc.stdout.splitlines() if line.startswith("VALUE")).split()[1])

    results = {}
    for c in (2.0, 3.0):
        (pkg / "kern.py").write_text(KERNEL_MODULE.format(value=c))
        results[c] = (value(tmp_path / "flat"), value(tmp_path / "keyed" / backend.source_fingerprint(pkg)))
    assert results[2.0] == (2.0, 2.0)
    assert results[3.0] == (2.0, 3.0)       # flat: stale; keyed by the fingerprint: the new constant


def test_unknown_runtime_is_refused_naming_the_choices():
    with pytest.raises(ParameterError) as err:
        backend.select_runtime("nonsense")
    msg = str(err.value)
    assert "unknown runtime 'nonsense'" in msg
    assert "pip install quadrants==1.3.3" in msg and "pip install taichi==1.7.4" in msg


def test_missing_runtime_is_refused_with_its_install_command(monkeypatch):
    def missing(name, *a, **k):
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(importlib, "import_module", missing)
    with pytest.raises(ParameterError) as err:
        backend._import_runtime("taichi")
    msg = str(err.value)
    assert "the kernel runtime 'taichi' is not installed" in msg
    assert "'pip install taichi==1.7.4'" in msg and "FEMCONTACT_RUNTIME=quadrants" in msg


def test_a_second_runtime_in_one_process_is_refused():
    active = backend.select_runtime()          # this process's kernels are declared on it
    other = next(n for n in backend.RUNTIMES if n != active)
    assert backend.select_runtime(active) == active
    with pytest.raises(ParameterError, match=f"already {active}.*FEMCONTACT_RUNTIME={other}"):
        backend.select_runtime(other)


@pytest.mark.parametrize("how", [["--runtime", "nonsense"], []])
def test_cli_refuses_a_bad_runtime(how, tmp_path):
    env = {} if how else {"FEMCONTACT_RUNTIME": "nonsense"}
    proc = _python(["-m", "femcontact", "run", str(SCENE), "--steps", "1", "--out", str(tmp_path / "o"), *how],
                   FEMCONTACT_CACHE_DIR=str(tmp_path / "c"), **env)
    assert proc.returncode == 1
    assert proc.stderr.startswith("femcontact: error: unknown runtime 'nonsense'")
    assert "quadrants: pip install quadrants==1.3.3; taichi: pip install taichi==1.7.4" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "c").exists()


def test_command_line_is_built_before_any_runtime_is_chosen():
    """--runtime can only work if reading the options imports no kernel (each would fix the runtime)."""
    code = ("import sys, femcontact, femcontact.cli as cli; from femcontact import backend; cli.build_parser(); "
            "print(backend._active, 'quadrants' in sys.modules, 'taichi' in sys.modules, callable(femcontact.sweep))")
    proc = _python(["-c", code])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["None", "False", "False", "True"]


def test_lazy_package_keeps_its_public_names():
    import femcontact as fc

    for name in fc.__all__:
        assert getattr(fc, name) is not None, name
    from femcontact import Material, Scene, Simulator, meshes, shapes  # noqa: F401

    assert fc.Scene is Scene and callable(fc.sweep) and fc.shapes.__name__ == "femcontact.geometry.shapes"
    assert set(fc.__all__) <= set(dir(fc))


def _class_probe_results(probe) -> list:
    """``probe(level)`` for levels 1-4 from a decorator used in a function, a class body and a class body
    under a ``data_oriented``-style decorator (the runtimes' own probe for ``@kernel`` in a class)."""
    seen = []

    def deco(fn):
        seen.append(tuple(probe(level) for level in range(1, 5)))
        return fn

    def data_oriented(cls):
        return cls

    @deco
    def plain():
        pass

    class Plain:
        @deco
        def method(self):
            pass

    @data_oriented
    class Decorated:
        @deco
        def method(self):
            pass

    return seen


def test_fast_class_probe_agrees_with_the_runtimes_own():
    backend.select_runtime()
    kernel_impl = importlib.import_module(f"{backend.RUNTIMES[backend.RUNTIME][0]}.lang.kernel_impl")
    fast = kernel_impl._inside_class
    assert getattr(fast, "_femcontact", False)
    # called through one more frame (the lambda) than the runtime calls it: shift the level by one
    ours = _class_probe_results(lambda level: fast(level + 1))
    theirs = _class_probe_results(lambda level: fast._original(level + 1))
    assert ours == theirs
    assert any(any(r) for r in ours) and not all(any(r) for r in ours)   # both answers occur


def test_runtime_import_never_runs_the_slow_class_probe():
    """The runtime's own ``@func`` declarations at its import use the fast probe too (backend._ProbeOnLoad):
    inspect.getframeinfo (which scans sys.modules, ~3 ms a call) is not called while it is imported."""
    code = ("import inspect\ncalls = []\noriginal = inspect.getframeinfo\n"
            "inspect.getframeinfo = lambda *a, **k: calls.append(1) or original(*a, **k)\n"
            "from femcontact import backend\nbackend.select_runtime()\n"
            "import importlib\nki = importlib.import_module(backend.RUNTIMES[backend.RUNTIME][0] + '.lang.kernel_impl')\n"
            "assert ki._inside_class._femcontact\nprint('getframeinfo calls', len(calls))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2])))
    assert out.returncode == 0, out.stderr
    assert "getframeinfo calls 0" in out.stdout, out.stdout


def test_copies_through_host_views_match_the_runtimes_kernels():
    """On the CPU, from_numpy / to_numpy / fill go through host views (backend._copy_through_host_views):
    the same values as the runtime's copy kernels, the same refusal of a wrong shape, and a Matrix fill
    or a non-float into an int array still handled by the runtime."""
    import numpy as np

    from femcontact.backend import ti

    cfg = backend.ensure_init()
    if cfg["arch"] != "cpu":
        pytest.skip("host views exist on the CPU backend only")
    base = sys.modules[ti.lang.__name__ + "._ndarray"].Ndarray
    assert base._ndarray_from_numpy._femcontact and base._ndarray_matrix_to_numpy._femcontact
    rng = np.random.default_rng(3)
    real = backend.np_real()
    # (make, data, the runtime's private copy methods, their extra argument: as_vector for matrix arrays)
    cases = [(lambda: ti.ndarray(float, shape=5), rng.standard_normal(5).astype(real), "_ndarray", ()),
             (lambda: ti.ndarray(ti.i32, shape=4), np.array([3, -1, 7, 0], np.int32), "_ndarray", ()),
             (lambda: ti.Vector.ndarray(3, float, shape=4), rng.standard_normal((4, 3)).astype(real),
              "_ndarray_matrix", (1,)),
             (lambda: ti.Matrix.ndarray(3, 3, float, shape=2), rng.standard_normal((2, 3, 3)).astype(real),
              "_ndarray_matrix", (0,))]
    for make, data, kind, extra in cases:
        ours, theirs = make(), make()
        ours.from_numpy(data)
        getattr(base, kind + "_from_numpy")._original(theirs, data, *extra)
        got = ours.to_numpy()
        assert got.dtype == data.dtype and np.array_equal(got, data)
        assert np.array_equal(getattr(base, kind + "_to_numpy")._original(theirs, *extra), got)
        ours.fill(2)
        theirs_values = np.full(data.shape, 2, data.dtype)
        assert np.array_equal(ours.to_numpy(), theirs_values)
        with pytest.raises(ValueError, match="[Mm]ismatch shape"):
            ours.from_numpy(np.zeros((9,) + data.shape[1:], data.dtype))
    f64 = ti.ndarray(float, shape=3)
    f64.from_numpy(np.array([1.5, 2.5, 3.5]))          # float64 data into the active precision: IEEE cast
    assert np.array_equal(f64.to_numpy(), np.array([1.5, 2.5, 3.5], real))


def test_cpu_kernels_compile_without_the_runtimes_cfg_pass():
    """On the CPU the runtime's own CFG optimisation is off (backend module docstring, "Compilation":
    two thirds of a kernel's compile, redone by LLVM); every known-answer test runs its kernels so."""
    cfg = backend.ensure_init()
    if cfg["arch"] != "cpu":
        pytest.skip("the CFG pass is left on for GPU backends")
    assert ti.lang.impl.current_cfg().cfg_optimization is False
