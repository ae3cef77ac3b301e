"""How kernel data reaches a Taichi kernel, and what each way costs per launch (issue 13 item 6).

    python tools/bench_launch.py [--n 8 32] [--reps 3000]

A kernel that touches N arrays of 64 3-vectors (so the work is nearly nothing and the launch
cost shows), passed five ways:

- ``ndarray``: N ``ti.types.ndarray()`` positional arguments (what femcontact does today);
- ``argpack``: one ``ti.types.argpack`` holding the N ndarrays (Taichi 1.7);
- ``fields``: N ``ti.field``s read as globals by the kernel (no arguments at all);
- ``template``: a ``@ti.data_oriented`` object holding the N fields, passed as ``ti.template()``;
- ``graph``: the ndarray kernel dispatched from a ``ti.graph`` compute graph (arguments bound
  by name in C++ at ``run``);
- ``scalars``: N float scalar arguments (the marshalling floor per argument);
- ``table``: the N arrays packed as columns of one ``(64, 3N)`` ndarray, one argument (a ``Table``,
  ``femcontact/contact/schema.py``, ``solvers/cond/layout.py``);
- ``nd_tmpl``: a ``@ti.data_oriented`` object whose members are the N *ndarrays*, passed as
  ``ti.template()`` (quadrants: ``stable_members=True``);
- ``dataclass``: a Python ``dataclasses.dataclass`` of the N ndarrays as one typed argument
  (quadrants only).

Runs on the runtime ``femcontact.backend`` selects (``FEMCONTACT_RUNTIME=quadrants|taichi``).

Prints the median µs per launch and per argument, and what a kernel *return value* costs against
writing the same four numbers into a small ndarray (why COND's iteration and PCG write their norms
to device arrays, docs/PERFORMANCE.md). Also checks that an argpack with ndarrays
inside works with the offline cache (run twice: the second run reports a cache hit through a
fast first launch).
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from femcontact.backend import RUNTIME, ti  # noqa: E402

M = 64


def med_us(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(ts)


def _compile(src, name, env):
    """Taichi reads a kernel's source with inspect: write generated kernels to a module file."""
    import importlib.util
    import tempfile

    d = Path(tempfile.gettempdir()) / f"femcontact_bench_launch_{RUNTIME}"
    d.mkdir(exist_ok=True)
    f = d / f"{name}.py"
    f.write_text("from femcontact.backend import ti\n" + src)
    spec = importlib.util.spec_from_file_location(name, f)
    mod = importlib.util.module_from_spec(spec)
    mod.__dict__.update(env)
    spec.loader.exec_module(mod)
    return ti.kernel(getattr(mod, name.split("_N")[0]))


def build(N):
    arrs = [ti.Vector.ndarray(3, float, shape=M) for _ in range(N)]
    fields = [ti.Vector.field(3, float, shape=M) for _ in range(N)]
    ENV = {"F": fields, "F0": fields[0]}

    # ndarray args: generate a kernel with N positional ndarray parameters
    names = [f"a{i}" for i in range(N)]
    src = (f"def k_nd({', '.join(n + ': ti.types.ndarray()' for n in names)}):\n"
           f"    for i in range({M}):\n        a0[i] = " + " + ".join(f"{n}[i]" for n in names[1:] or ['a0']) + "\n")
    k_nd = _compile(src, f"k_nd_N{N}", ENV)

    def failing(exc):
        return lambda: (_ for _ in ()).throw(exc)

    try:                                   # Taichi 1.7 only (quadrants has no argpack)
        pack_t = ti.types.argpack(**{n: ti.types.ndarray(dtype=ti.math.vec3, ndim=1) for n in names})
        ENV["pack_t"] = pack_t
        src = (f"def k_pack(p: pack_t):\n    for i in range({M}):\n        p.a0[i] = "
               + " + ".join(f"p.{n}[i]" for n in names[1:] or ['a0']) + "\n")
        k_pack = _compile(src, f"k_pack_N{N}", ENV)
        pack = pack_t(**dict(zip(names, arrs)))
        run_pack = lambda: k_pack(pack)  # noqa: E731
    except Exception as exc:  # noqa: BLE001
        run_pack = failing(exc)

    src = (f"def k_field():\n    for i in range({M}):\n        F[0][i] = "
           + " + ".join(f"F[{j}][i]" for j in range(1, N)) + "\n") if N > 1 else \
        f"def k_field():\n    for i in range({M}):\n        F[0][i] += 1.0\n"
    k_field = _compile(src, f"k_field_N{N}", ENV)

    @ti.data_oriented
    class Bundle:
        def __init__(self):
            for j, f in enumerate(fields):
                setattr(self, f"f{j}", f)

    bundle = Bundle()
    src = (f"def k_tmpl(b: ti.template()):\n    for i in range({M}):\n        b.f0[i] = "
           + " + ".join(f"b.f{j}[i]" for j in range(1, N)) + "\n") if N > 1 else \
        f"def k_tmpl(b: ti.template()):\n    for i in range({M}):\n        b.f0[i] += 1.0\n"
    k_tmpl = _compile(src, f"k_tmpl_N{N}", ENV)

    src = (f"def k_sc({', '.join(f's{i}: float' for i in range(N))}):\n"
           f"    for i in range({M}):\n        " + "; ".join(f"F0[i][0] += s{i}" for i in range(N)) + "\n")
    k_sc = _compile(src, f"k_sc_N{N}", ENV)
    wide = ti.ndarray(float, shape=(M, 3 * N))
    src = (f"def k_table(t: ti.types.ndarray()):\n    for i in range({M}):\n        for r in range(3):\n"
           f"            t[i, r] = " + " + ".join(f"t[i, {3 * j} + r]" for j in range(1, N) or [0]) + "\n")
    k_table = _compile(src, f"k_table_N{N}", ENV)

    deco = ti.data_oriented(stable_members=True) if RUNTIME == "quadrants" else ti.data_oriented

    @deco
    class NdBundle:
        def __init__(self):
            for j, a in enumerate(arrs):
                setattr(self, f"a{j}", a)

    nd_bundle = NdBundle()
    src = (f"def k_ndt(b: ti.template()):\n    for i in range({M}):\n        b.a0[i] = "
           + " + ".join(f"b.a{j}[i]" for j in range(1, N) or [0]) + "\n")
    k_ndt = _compile(src, f"k_ndt_N{N}", ENV)
    out = {}
    try:                                   # a dataclass of ndarrays as one typed argument (quadrants)
        import dataclasses
        DC = dataclasses.make_dataclass(f"DC{N}", [(n, ti.types.NDArray[ti.math.vec3, 1]) for n in names])
        ENV["DC"] = DC
        src = (f"def k_dc(d: DC):\n    for i in range({M}):\n        d.a0[i] = "
               + " + ".join(f"d.{n}[i]" for n in names[1:] or ['a0']) + "\n")
        k_dc = _compile(src, f"k_dc_N{N}", ENV)
        dc = DC(*arrs)
        out["dataclass"] = lambda: k_dc(dc)
    except Exception as exc:  # noqa: BLE001
        out["dataclass"] = failing(exc)
    try:                                   # a compute graph running the ndarray kernel (ti.graph)
        g = ti.graph.GraphBuilder()
        syms = [ti.graph.Arg(ti.graph.ArgKind.NDARRAY, n, dtype=ti.math.vec3, ndim=1) for n in names]
        g.dispatch(k_nd, *syms)
        graph, graph_args = g.compile(), dict(zip(names, arrs))
    except Exception:  # noqa: BLE001
        graph = None
    return {
        "ndarray": lambda: k_nd(*arrs),
        "table": lambda: k_table(wide),
        "nd_tmpl": lambda: k_ndt(nd_bundle),
        **out,
        "graph": lambda: graph.run(graph_args),
        "argpack": run_pack,
        "fields": lambda: k_field(),
        "template": lambda: k_tmpl(bundle),
        "scalars": lambda: k_sc(*([1.0] * N)),
    }


@ti.kernel
def _empty():
    pass


@ti.kernel
def _returns(a: ti.types.ndarray(), x: float) -> ti.math.vec4:
    out = ti.Vector.zero(float, 4)
    for i in range(a.shape[0]):
        a[i] += x
        out += ti.Vector([a[i], 0.0, 0.0, 0.0])
    return out


@ti.kernel
def _writes(a: ti.types.ndarray(), s: ti.types.ndarray(), x: float):
    out = ti.Vector.zero(float, 4)
    for i in range(a.shape[0]):
        a[i] += x
        out += ti.Vector([a[i], 0.0, 0.0, 0.0])
    s[0] = out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--reps", type=int, default=3000)
    a = p.parse_args()
    cache = os.environ.get("FEMCONTACT_CACHE_DIR", "/tmp/ticache_bench_launch")
    ti.init(arch=ti.cpu, default_fp=ti.f64, offline_cache=True, offline_cache_file_path=cache, log_level=ti.ERROR)
    print(f"runtime: {RUNTIME}")
    print(f"empty kernel: {med_us(_empty, a.reps):.1f} us")
    arr, ring = ti.ndarray(ti.f64, 16), ti.Vector.ndarray(4, ti.f64, 1)
    print(f"kernel returning a vec4: {med_us(lambda: _returns(arr, 1.0), a.reps):.1f} us; "
          f"writing it to an ndarray instead: {med_us(lambda: _writes(arr, ring, 1.0), a.reps):.1f} us")
    names = ("ndarray", "table", "nd_tmpl", "dataclass", "graph", "argpack", "fields", "template", "scalars")
    print(f"{'N':>3s} " + " ".join(f"{k:>18s}" for k in names))
    for N in a.n:
        t_first = {}
        fns = build(N)
        row = []
        for name, fn in fns.items():
            t0 = time.perf_counter()
            try:
                fn()
                t_first[name] = time.perf_counter() - t0
                us = med_us(fn, a.reps)
                row.append(f"{us:8.1f} ({us / N:5.1f}/arg)")
            except Exception as exc:  # noqa: BLE001 - report what does not work
                row.append(f"{'FAILS: ' + type(exc).__name__:>18s}")
        print(f"{N:3d} " + " ".join(row))
        print("    first launch (compile or cache load), ms: "
              + "  ".join(f"{k} {1e3 * v:.0f}" for k, v in t_first.items()))


if __name__ == "__main__":
    main()
