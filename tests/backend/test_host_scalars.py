"""layout.HostScalars: kernel scalars in a one-row table, written on the host (through the host view on
the CPU, by an upload where there is none) and read by a kernel; and the launch they exist for: a
kernel whose scalars travel this way keeps quadrants' cached launch context (issue 28)."""
import numpy as np
import pytest

import femcontact as fc
from femcontact import backend
from femcontact.backend import ti
from femcontact.layout import HostScalars
from femcontact.solvers.cond.layout import ITER_F, ITER_I


@ti.kernel
def _echo(Pf: ti.types.ndarray(), Pi: ti.types.ndarray(), out: ti.types.ndarray()):
    for _ in range(1):
        out[0] = ITER_F.nu.get(Pf, 0) * ITER_F.fem_c.get(Pf, 0)
        out[1] = ti.cast(ITER_I.nc.get(Pi, 0), float)


@pytest.mark.parametrize("view", [True, False])
def test_host_scalars_reach_the_kernel_with_and_without_a_host_view(monkeypatch, view):
    fc.backend.ensure_init()
    if not view:
        monkeypatch.setattr(backend, "host_view", lambda arr: None)
    f, i = HostScalars(ITER_F), HostScalars(ITER_I)
    assert (f.view is None) == (not view or backend.config()["arch"] != "cpu")
    out = backend.scalar_array(2)
    for nu, c, nc in ((1.25, 0.5, 300), (0.75, 4.0, 7)):     # 300: outside the cached-int range
        f.set(nu=nu, fem_c=c)
        i.set(nc=nc)
        _echo(f.sync(), i.sync(), out)
        np.testing.assert_array_equal(out.to_numpy(), [nu * c, nc])
    assert not f.stale and not i.stale
    f.set(nu=0.75, fem_c=4.0)                 # unchanged values: nothing to upload
    assert not f.stale


def _sphere_positions(monkeypatch, views: bool, steps: int = 6) -> np.ndarray:
    scene = fc.Scene(dt=1e-2, solver="cond", integrator="midpoint", duration=1.0,
                     solver_options={"check_every": 4})
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=0.5)
    scene.add_rigid_body(fc.shapes.Sphere(0.05), density=7800.0, position=(0.0, 0.0, 0.06),
                         velocity=(0.3, 0.0, 0.0))
    if not views:
        monkeypatch.setattr(backend, "host_view", lambda arr: None)
    sim = fc.Simulator(scene)
    for _ in range(steps):
        sim.step()
        assert sim.last_solve.converged
    monkeypatch.undo()
    return sim.state.positions(), [s.iterations for s in sim.stats]


def test_cond_without_host_views_takes_the_same_steps(monkeypatch):
    """Where ndarrays have no host view (a GPU), the scalars are uploaded and the ring slot advanced by
    the kernel: a sliding sphere's COND steps come out the same as through the host views."""
    fc.backend.ensure_init()
    x_view, it_view = _sphere_positions(monkeypatch, True)
    x_copy, it_copy = _sphere_positions(monkeypatch, False)
    assert it_view == it_copy and max(it_view) > 4
    np.testing.assert_array_equal(x_view, x_copy)


def _scalar_params(kernel) -> list:
    """The kernel's parameters that are neither ndarrays nor compile-time templates."""
    import inspect

    out = []
    for name, p in inspect.signature(kernel).parameters.items():
        kind = type(p.annotation).__name__
        if kind not in ("NdarrayType", "Template"):
            out.append(name)
    return out


def test_sphere_step_kernels_take_no_float_or_unbounded_int_and_keep_the_launch_context():
    """The kernels a resting rigid sphere's COND step launches (outside the per-solve set-up) take no
    float argument and only ints bounded by the scene's rigid bodies and SDF entities or the Anderson
    history m, and, on quadrants, after a
    first solve no launch of theirs misses quadrants' launch-context cache (a float or an int outside
    [-5, 256] among the arguments would make every launch miss)."""
    from femcontact.assembly.integrator import advance_all, assemble_inertial
    from femcontact import fused
    from femcontact.contact import anchors
    from femcontact.contact.detection import detect_obstacles, detect_rigid
    from femcontact.solvers.cond import blocks, step_matrix, virtual
    from femcontact.solvers.cond.anderson import anderson_step
    from femcontact.solvers.cond.iterate import cond_finish, cond_iterate, cond_start
    from femcontact.solvers.cond.targets import cond_targets

    # ints that stay small in a scene of up to 256 rigid bodies, and the Anderson history
    allowed = {"anderson_step": ["m"], "advance_all": ["n_rot"], "assemble_inertial": ["n_rot"],
               "advance_and_remember": ["n_rot"]}
    per_solve = (cond_start, cond_targets, cond_finish, virtual.cond_gains, virtual.cond_nodalize,
                 virtual.cond_pack_virtual, virtual.cond_compliance_shift, step_matrix.cond_coupling,
                 step_matrix.cond_weights_base, step_matrix.cond_scale_rows, blocks.cond_block_diagonal,
                 blocks.cond_block_inverses, blocks.cond_fem_blocks, blocks.cond_fem_free_fraction)
    for k in (cond_iterate, anderson_step, detect_rigid, detect_obstacles, assemble_inertial, advance_all,
              anchors.anchors_apply, anchors.anchors_update, fused.advance_and_remember) + per_solve:
        assert _scalar_params(k) == allowed.get(k.__name__, []), k.__name__
    if backend.RUNTIME != "quadrants":       # Taichi 1.7.4 has no launch-context cache
        return
    import importlib

    kernel = importlib.import_module("quadrants.lang.kernel")
    scene = fc.Scene(dt=1e-2, solver="cond", integrator="midpoint", duration=1.0)
    scene.add_obstacle(fc.shapes.HalfSpace(), friction=0.5)
    scene.add_rigid_body(fc.shapes.Sphere(0.05), density=7800.0, position=(0, 0, 0.05))
    sim = fc.Simulator(scene)
    for _ in range(3):
        sim.step()
    cache = kernel.LaunchContextBufferCache
    orig_launch, orig_pop = kernel.Kernel.launch_kernel, cache.populate_launch_ctx_from_cache
    now, launches, misses = [None], {}, {}

    def launch(self, *a, **kw):
        now[0] = self.func.__name__
        launches[now[0]] = launches.get(now[0], 0) + 1
        return orig_launch(self, *a, **kw)

    def pop(self, *a, **kw):
        hit = orig_pop(self, *a, **kw)
        if not hit:
            misses[now[0]] = misses.get(now[0], 0) + 1
        return hit

    try:
        kernel.Kernel.launch_kernel, cache.populate_launch_ctx_from_cache = launch, pop
        for _ in range(3):
            sim.step()
    finally:
        kernel.Kernel.launch_kernel, cache.populate_launch_ctx_from_cache = orig_launch, orig_pop
    assert launches.get("cond_iterate", 0) > 0 and launches.get("detect_rigid", 0) == 3
    assert launches.get("anchors_apply", 0) == 3 and launches.get("cond_targets", 0) == 3
    assert launches.get("advance_and_remember", 0) == 3 and launches.get("advance_all", 0) == 0
    for name in ("cond_iterate", "anderson_step", "detect_rigid", "assemble_inertial", "advance_all",
                 "anchors_apply", "anchors_update", "advance_and_remember") + tuple(k.__name__ for k in per_solve):
        assert misses.get(name, 0) == 0, (name, misses)
