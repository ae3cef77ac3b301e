"""The closed-form residual columns of step derivatives (``femcontact.diff.step.velocity_columns``) against
the residual-difference fallback they replace (relative ≤ 1e-6), and the products built on them (jvp, vjp
with one transposed solve) against the dense Jacobian."""
import numpy as np
import pytest

import femcontact as fc
from femcontact import shapes

TIGHT = {"rel_tol": 1e-12, "abs_tol": 1e-16}


def stepped(sim, steps_before=4):
    for _ in range(steps_before):
        sim.step()
    sim.track_derivatives()
    assert sim.step().converged
    return sim


def fem_cube(integrator, solver="lagged", alpha=1.0, beta=1e-3, velocity=(0.1, 0.0, 0.0), **options):
    sc = fc.Scene(dt=1e-2, integrator=integrator, solver=solver, solver_options=dict(TIGHT, **options))
    sc.add_obstacle(shapes.HalfSpace(), name="ground", friction=0.5, stiffness=1e4,
                    **({"tau_d": 0.01} if solver == "sap" else {"hc_dissipation": 10.0}))
    sc.add_fem_body(fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=2),
                    fc.Material(1e5, 0.3, 1000.0, rayleigh_alpha=alpha, rayleigh_beta=beta), position=(0, 0, 0.05),
                    velocity=velocity, name="cube")
    return stepped(fc.Simulator(sc, energy_check=None))


def sliding_box(integrator, solver="similar", **options):
    sc = fc.Scene(dt=1e-2, integrator=integrator, solver=solver, solver_options=dict(TIGHT, **options))
    sc.add_obstacle(shapes.HalfSpace(), name="ground", friction=0.3, stiffness=1e5, hc_dissipation=10.0)
    sc.add_rigid_body(shapes.Box((0.2, 0.2, 0.1)), density=500, position=(0, 0, 0.1), velocity=(1.0, 0.2, 0.0),
                      name="box")
    sc.add_fem_body(fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=1), fc.Material(1e4, 0.3, 1000.0),
                    position=(2.0, 0, 1.0), velocity=(0, 1.0, 0.5), name="cube")       # in free flight
    return stepped(fc.Simulator(sc, energy_check=None), steps_before=2)


SCENES = {
    "FEM cube on the ground (lagged, euler)": lambda: fem_cube("euler"),
    "FEM cube on the ground (lagged, midpoint)": lambda: fem_cube("midpoint"),
    "FEM cube on the ground (sap, euler)": lambda: fem_cube("euler", "sap"),
    "sliding box + flying cube (similar, midpoint)": lambda: sliding_box("midpoint"),
    "sliding box + flying cube (similar, euler)": lambda: sliding_box("euler"),
    "sliding box + flying cube (lagged, euler)": lambda: sliding_box("euler", "lagged"),
    # v_s small: the regularization ε = μ R_t n₀ follows n₀ (and so v_n,k); resting, so |v_t| ~ ε
    "resting FEM cube, ε = μ R_t n₀ (similar, euler)":
        lambda: fem_cube("euler", "similar", velocity=(0, 0, 0), stiction_tolerance=1e-9),
    "resting FEM cube, ε = μ R_t n₀ (lagged, euler)":
        lambda: fem_cube("euler", "lagged", velocity=(0, 0, 0), stiction_tolerance=1e-9),
}


@pytest.mark.parametrize("label", list(SCENES))
def test_velocity_columns_equal_the_residual_differences(label):
    sim = SCENES[label]()
    d = sim.step_derivatives(["v"])
    inp = d.inputs[0]
    cols = np.flatnonzero(d._analytic(inp))
    assert len(cols) >= inp.size // 3, f"{label}: too few analytic columns to check ({len(cols)})"
    worst = 0.0
    for j in cols:
        e = np.zeros(inp.size)
        e[j] = 1.0
        dr, dvfix, dvend = d._residual_derivative([(inp, e)])
        assert not dvfix.any() and not dvend.any()
        a = d._dr_dv[:, j].toarray().ravel()
        worst = max(worst, float(np.abs(a - dr).max() / np.abs(dr).max()))
    print(f"| {label} | v: {len(cols)} of {inp.size} columns analytic | {worst:.1e} |")
    assert worst <= 1e-6, f"{label}: analytic ∂r/∂v_k off the residual differences by {worst:.1e}"


@pytest.mark.parametrize("integrator", ["euler", "midpoint"])
def test_products_with_analytic_columns_match_the_jacobian(integrator):
    sim = fem_cube(integrator)
    rng = np.random.default_rng(1)
    wrt = ["x", "v", "mu:ground"]
    d = sim.step_derivatives(wrt)
    w = rng.normal(size=d.n_outputs)
    u = np.zeros(d.n_inputs)
    k = d.input_sizes["x"]                        # the v block follows x
    u[k:k + d.input_sizes["v"]] = np.where(d._v_mask, rng.normal(size=d.input_sizes["v"]), 0.0)
    vj, jv = d.vjp(w), d.jvp(u)                    # the product paths, before the dense Jacobian exists
    J = sim.step_derivatives(wrt).jacobian()
    assert np.allclose(vj, w @ J, rtol=1e-9, atol=1e-10 * np.abs(w @ J).max())
    # u only on analytic columns: no probe, exact (linear) up to round-off
    assert np.abs(jv - J @ u).max() <= 1e-9 * np.abs(J @ u).max()


@pytest.mark.slow
@pytest.mark.parametrize("linear_solver", ["schur", "cholmod"])
def test_vjp_over_velocities_on_the_large_paths(linear_solver):
    """2187 DOF (Schur of Ã, or the sparse H at the final v): the vjp's transposed solve against forward
    columns (jvp of unit velocities, a forward solve each) and against residual-difference columns."""
    from femcontact.diff import step as diff_step

    sc = fc.Scene(dt=1e-2, integrator="euler", solver="lagged", solver_options={**TIGHT, "linear_solver": linear_solver})
    sc.add_obstacle(shapes.HalfSpace(), name="ground", friction=0.5, stiffness=1e4, hc_dissipation=10.0)
    sc.add_fem_body(fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=8), fc.Material(1e5, 0.3, 1000.0, rayleigh_alpha=1.0),
                    position=(0, 0, 0.05), name="cube")
    sim = stepped(fc.Simulator(sc, energy_check=None), steps_before=3)
    d = sim.step_derivatives(["v"])
    assert d.solver_kind == ("schur" if linear_solver == "schur" else "sparse")
    assert d._v_mask.all()
    w = np.random.default_rng(2).normal(size=d.n_outputs)
    vj = d.vjp(w)
    J = d._base.pieces["J"]
    contact_dofs = 3 * np.unique(J.nodes[J.valid])
    for j in [0, 1000, contact_dofs[0] + 2, contact_dofs[-1]]:
        e = np.zeros(d.n_inputs)
        e[j] = 1.0
        col = d.jvp(e)
        assert abs(vj[j] - w @ col) <= 1e-8 * np.abs(w @ col) + 1e-12 * np.abs(vj).max(), j
    # the same column with the residual differences in place of the closed form
    diff_step.ANALYTIC_COLUMNS = False
    try:
        probed = sim.step_derivatives(["v"])
        e = np.zeros(d.n_inputs)
        e[contact_dofs[0] + 2] = 1.0
        ref = probed.jvp(e)
    finally:
        diff_step.ANALYTIC_COLUMNS = True
    assert abs(vj[contact_dofs[0] + 2] - w @ ref) <= 1e-6 * np.abs(w @ ref)
