"""CondSolver.memory() / restore(): a fresh solver restored from a solver's memory continues the
same sequence of step problems bit for bit (issue 13, item 3: checkpoints restore bit-identically)."""
import numpy as np

import femcontact as fc
from femcontact.solvers.cond import CondSolver


def _scene():
    """A soft cube dropped onto a half-space next to a rigid box: FEM contacts, a rigid body's
    virtual nodes and block step; W recycled over 3 steps, its spectral scale every 25 steps, and
    the adaptive Chebyshev ϱ carried from step to step."""
    scene = fc.Scene(dt=1e-2, solver="cond", solver_options={"recycle": 3, "tol": 1e-7})
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 2), fc.Material(1e5, 0.3, 1000.0, rayleigh_beta=1e-3),
                       position=(0.0, 0.0, 0.052), name="cube")
    scene.add_rigid_body(fc.shapes.Box((0.02, 0.02, 0.02)), density=500.0, position=(0.15, 0.0, 0.021),
                         name="box")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.4, name="ground")
    return scene


def _snapshot(sim):
    return np.concatenate([sim.state.positions().ravel(), sim.state.velocities().ravel(),
                           sim.v_hat.to_numpy().ravel()])


def test_restored_solver_continues_bit_identically():
    a, b = fc.Simulator(_scene()), fc.Simulator(_scene())
    a.run(steps=20)
    b.run(steps=20)
    assert np.array_equal(_snapshot(a), _snapshot(b))        # the two runs agree (precondition)
    memory = b.contact_solver.memory()
    assert {"tr", "rs", "l1", "w_scale", "steps_since_w", "steps_since_scale", "rho_prev"} <= set(memory)
    fresh = CondSolver(b.model, b.scene.solver_options)
    fresh.restore(memory)
    for key, val in fresh.memory().items():                   # restore() is memory()'s inverse
        assert np.array_equal(np.asarray(val), np.asarray(memory[key]), equal_nan=True), key
    b.contact_solver = fresh
    iters_a, iters_b = [], []
    for _ in range(20):
        iters_a.append(a.step().iterations)
        iters_b.append(b.step().iterations)
        assert np.array_equal(_snapshot(a), _snapshot(b))
    assert iters_a == iters_b
    assert any(s.contacts for s in a.stats[-20:])
    assert np.array_equal(a.contact_solver.lambdas(), b.contact_solver.lambdas())
    assert np.array_equal(a.contact_solver.virtual_velocities(), b.contact_solver.virtual_velocities())
