"""Step derivatives (femcontact.diff, ICF §X-B eq. 29) against central finite differences of the same
simulator, relative error ≤ 1e-4 where the motion is smooth, with the Newton stopping tolerance tightened
(docs/GRADIENTS.md keeps the table these tests print with -s)."""
import numpy as np
import pytest

import femcontact as fc
from femcontact import shapes
from femcontact.diff import step_jacobian
from femcontact.errors import ParameterError, SimulationError

TIGHT = {"rel_tol": 1e-12, "abs_tol": 1e-16}
TOL = 1e-4


def check(sim, wrt, steps_before=0, label=""):
    """Step ``sim`` (``steps_before`` untracked steps first), then compare every input's Jacobian block
    (all outputs) with central differences; returns {input: relative error}."""
    for _ in range(steps_before):
        sim.step()
    sim.track_derivatives()
    st = sim.step()
    assert st.converged
    d = sim.step_derivatives(wrt)
    J = d.jacobian()
    print(f"| {label} | H by | {d.solver_kind} |")
    F = step_jacobian(sim, wrt, scale=1.0, richardson=True)
    errors, k = {}, 0
    for inp in d.inputs:
        a, b = J[:, k:k + inp.size], F[:, k:k + inp.size]
        k += inp.size
        scale = np.abs(b).max()
        assert scale > 0, f"{label} {inp.name}: the step does not depend on it (a test that tests nothing)"
        errors[inp.name] = float(np.abs(a - b).max() / scale)
        print(f"| {label} | {inp.name} | {errors[inp.name]:.1e} |")
    bad = {k: e for k, e in errors.items() if not e <= TOL}
    assert not bad, f"{label}: derivative off the finite differences: {bad}"
    return errors, st


def box_scene(solver, integrator, v0=(0.0, 0.0, 0.0), w0=(0.0, 0.0, 0.0), mu=0.3, ground=True, z=0.1):
    sc = fc.Scene(dt=1e-2, integrator=integrator, solver=solver,
                  solver_options=dict(TIGHT) if solver in ("sap", "lagged", "similar") else None)
    if ground:
        extra = {"tau_d": 0.01} if solver == "sap" else {"hc_dissipation": 10.0}
        sc.add_obstacle(shapes.HalfSpace(), name="ground", friction=mu, stiffness=1e5, **extra)
    box = sc.add_rigid_body(shapes.Box((0.2, 0.2, 0.1)), density=500, position=(0, 0, z), velocity=v0,
                            angular_velocity=w0, name="box")
    return sc, box


@pytest.mark.slow
def test_free_flight_rigid_and_fem_against_fd():
    sc, box = box_scene("lagged", "midpoint", v0=(1.0, 0.0, 2.0), w0=(1.0, 2.0, 3.0), ground=False, z=1.0)
    box.add_force((0.3, 0.0, 1.0))
    cube = sc.add_fem_body(fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=1), fc.Material(1e4, 0.3, 1000.0),
                           position=(2.0, 0, 1.0), velocity=(0, 1.0, 0), name="cube")
    cube.add_force((0.0, 0.0, 5.0), nodes=[0], mode="per_node")       # pulls one corner: stresses the cube
    check(fc.Simulator(sc), ["x", "R", "v", "mass:box", "force:box:0", "E:cube", "rho:cube", "force:cube:0"],
          steps_before=2, label="free flight")


@pytest.mark.parametrize("solver,integrator", [("lagged", "euler"), ("similar", "euler"), ("lagged", "midpoint")])
def test_sliding_box_against_fd(solver, integrator):
    sc, _ = box_scene(solver, integrator, v0=(1.0, 0.2, 0.0), w0=(0.0, 0.0, 0.5))
    sim = fc.Simulator(sc)
    wrt = ["x", "R", "v", "mu:ground", "stiffness:ground", "dissipation:ground", "mass:box"]
    if (solver, integrator) == ("lagged", "midpoint"):
        wrt.append("v_hat")           # the warm start: Lagged's lagged normal impulse reads it under the midpoint rule
    errors, st = check(sim, wrt,
                       steps_before=3, label=f"sliding box ({solver}, {integrator})")
    assert st.contacts > 0


def test_sticking_box_sap_against_fd():
    """A box held on the ground by friction against a push below μ m g (SAP, implicit Euler)."""
    sc, box = box_scene("sap", "euler", mu=0.5)
    box.add_force((0.5, 0.0, 0.0))
    sim = fc.Simulator(sc)
    check(sim, ["x", "R", "v", "force:box:0", "mass:box", "stiffness:ground"], steps_before=20,
          label="sticking box (sap, euler)")
    assert abs(sim.rigid_velocity("box")[0][0]) < 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("resolution", [pytest.param(1, marks=pytest.mark.sample), 2])
def test_resting_fem_cube_against_fd(resolution):
    sc = fc.Scene(dt=1e-2, integrator="euler", solver="lagged", solver_options=dict(TIGHT))
    sc.add_obstacle(shapes.HalfSpace(), name="ground", friction=0.5, stiffness=1e4, hc_dissipation=10.0)
    sc.add_fem_body(fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=resolution),
                    fc.Material(1e5, 0.3, 1000.0, rayleigh_alpha=1.0), position=(0, 0, 0.05), name="cube")
    check(fc.Simulator(sc), ["x", "v", "E:cube", "rho:cube", "mu:ground", "stiffness:ground"], steps_before=10,
          label=f"resting FEM cube {(resolution + 1) ** 3} nodes (lagged, euler)")


@pytest.mark.slow
def test_rod_bent_over_obstacle_against_fd():
    sc = fc.Scene(dt=1e-2, integrator="euler", solver="lagged", solver_options=dict(TIGHT))
    rod = sc.add_rod(fc.meshes.rod_straight((0, 0, 0.0), (0.4, 0, 0.0), 8), radius=0.005,
                     material=fc.Material(1e8, 0.3, 1000.0, rayleigh_alpha=2.0), self_contact=False, name="rod")
    rod.clamp("start")
    sc.add_obstacle(shapes.Sphere(0.05), position=(0.25, 0, -0.054), name="bump", friction=0.4, stiffness=1e4,
                    hc_dissipation=10.0)
    sim = fc.Simulator(sc)
    _, st = check(sim, ["x", "R", "v", "mu:bump", "stiffness:bump"], steps_before=40, label="rod over a sphere (lagged)")
    assert st.contacts > 0


def test_hinged_link_in_contact_against_fd():
    """A driven hinge link pressing its end on the ground (SAP-free: lagged, midpoint)."""
    from scipy.spatial.transform import Rotation

    sc = fc.Scene(dt=1e-2, integrator="midpoint", solver="lagged", solver_options=dict(TIGHT))
    sc.add_obstacle(shapes.HalfSpace(), name="ground", friction=0.5, stiffness=1e4, hc_dissipation=10.0)
    L = 0.125
    R = Rotation.from_rotvec([0, 1.0, 0]).as_matrix()
    pivot = np.array([0.0, 0.0, 2 * L * np.cos(1.0) + 0.02 * np.sin(1.0) + 1e-3])     # the far end just above
    sc.add_rigid_body(shapes.Box((0.02, 0.02, L)), density=1000.0, position=pivot - R @ [0, 0, L] * 1.0,
                      rotation=R, name="link")
    j = sc.add_joint("hinge", None, "link", anchor=pivot, axis=(0, 1, 0), name="hinge")
    j.set_drive(kp=2.0, kd=0.1, target=0.0)
    sim = fc.Simulator(sc)
    sim.control.set_joint_effort("hinge", 0.1)
    _, st = check(sim, ["x", "R", "v", "target:hinge", "effort:hinge", "mu:ground"], steps_before=10,
                  label="hinged link on the ground (lagged, midpoint)")
    assert st.contacts > 0


def test_jvp_and_vjp_match_the_jacobian():
    sc, _ = box_scene("lagged", "euler", v0=(1.0, 0.2, 0.0))
    sim = fc.Simulator(sc)
    for _ in range(3):
        sim.step()
    sim.track_derivatives()
    sim.step()
    rng = np.random.default_rng(0)
    for wrt in (["v", "mu:ground"], ["x", "R", "v", "mu:ground", "mass:box"]):
        d = sim.step_derivatives(wrt)
        u, w = rng.normal(size=d.n_inputs), rng.normal(size=d.n_outputs)
        jv, vj = d.jvp(u), d.vjp(w)          # before the dense Jacobian exists: the product paths
        J = d.jacobian()
        # the jvp moves every input at once (one probe pair): O(h²) off the columns' sum where r curves
        assert np.abs(jv - J @ u).max() <= 1e-6 * np.abs(J @ u).max(), wrt
        assert np.allclose(vj, w @ J, rtol=1e-10, atol=1e-12 * np.abs(J).max()), wrt


def test_state_is_restored_bit_for_bit():
    sc, _ = box_scene("lagged", "euler", v0=(1.0, 0.2, 0.0))
    sim = fc.Simulator(sc)
    sim.track_derivatives()
    for _ in range(3):
        sim.step()
    before = {k: getattr(sim.state, k).to_numpy().copy() for k in ("x", "v", "v_hat", "q")}
    sim.step_derivatives(["x", "v", "mu:ground"]).jacobian()
    step_jacobian(sim, ["mu:ground"])
    for k, a in before.items():
        assert np.array_equal(getattr(sim.state, k).to_numpy(), a), k
    assert len(sim.stats) == 3
    sim.step()                          # and the run goes on as if nothing happened
    ref = fc.Simulator(box_scene("lagged", "euler", v0=(1.0, 0.2, 0.0))[0])
    for _ in range(4):
        ref.step()
    assert np.array_equal(ref.state.x.to_numpy(), sim.state.x.to_numpy())


def test_clear_errors():
    sc, _ = box_scene("lagged", "euler")
    sim = fc.Simulator(sc)
    with pytest.raises(ParameterError, match="track_derivatives"):
        sim.step_derivatives()
    sim.step()
    with pytest.raises(ParameterError, match="track_derivatives"):
        sim.step_derivatives()
    sim.track_derivatives()
    sim.step()
    with pytest.raises(ParameterError, match="unknown input"):
        sim.step_derivatives(["nope"])
    with pytest.raises(ParameterError, match="no contact pair"):
        sim.step_derivatives(["mu:nowhere"])
    for solver in ("cond", "pgs", "incp"):
        other = fc.Simulator(box_scene(solver, "euler")[0])
        other.track_derivatives()
        other.step()
        with pytest.raises(ParameterError, match="sap, lagged, similar"):
            other.step_derivatives()


def test_unconverged_step_is_refused():
    sc, _ = box_scene("lagged", "euler", v0=(1.0, 0.0, -1.0))
    sc.solver_options = {"rel_tol": 1e-14, "abs_tol": 0.0, "max_iterations": 1}
    sim = fc.Simulator(sc, unconverged_stop=None)
    sim.track_derivatives()
    for _ in range(3):
        sim.step()
    assert not sim.stats[-1].converged
    with pytest.raises(SimulationError, match="unconverged"):
        sim.step_derivatives()


@pytest.mark.slow
@pytest.mark.parametrize("linear_solver", ["schur", "cholmod"])
def test_large_cube_schur_and_sparse_paths_against_fd(linear_solver):
    """2187 DOF (above DENSE_MAX_DOFS): H⁻¹ through the step's Schur factorization of Ã, or one sparse
    factorization of H at the final v (the full-H path)."""
    from femcontact.diff import DENSE_MAX_DOFS

    sc = fc.Scene(dt=1e-2, integrator="euler", solver="lagged", solver_options={**TIGHT, "linear_solver": linear_solver})
    sc.add_obstacle(shapes.HalfSpace(), name="ground", friction=0.5, stiffness=1e4, hc_dissipation=10.0)
    sc.add_fem_body(fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=8), fc.Material(1e5, 0.3, 1000.0, rayleigh_alpha=1.0),
                    position=(0, 0, 0.05), name="cube")
    sim = fc.Simulator(sc)
    assert sim.model.n_dofs > DENSE_MAX_DOFS
    _, st = check(sim, ["mu:ground", "E:cube", "rho:cube"], steps_before=3, label=f"FEM cube 2187 DOF ({linear_solver})")
    assert st.contacts > 0
    # after the difference steps the solver's factor is theirs: the Schur path is no longer taken
    assert sim.step_derivatives(["mu:ground"]).solver_kind == "sparse"


@pytest.mark.parametrize("solver,integrator", [("lagged", "euler"), ("sap", "midpoint")])
def test_warm_start_columns_are_zero_where_the_solution_ignores_it(solver, integrator):
    """The columns of v̂_k skipped as zero by construction are zero in the finite differences too."""
    sc, _ = box_scene(solver, integrator, v0=(1.0, 0.2, 0.0))
    sim = fc.Simulator(sc)
    for _ in range(3):
        sim.step()
    sim.track_derivatives()
    sim.step()
    d = sim.step_derivatives(["v_hat"])
    assert d._zero(d.inputs[0]).all()
    assert not d.jacobian().any()
    F = step_jacobian(sim, ["v_hat"])
    assert np.abs(F).max() <= 1e-7 * max(np.abs(sim.state.velocities()).max(), 1.0)


def test_contact_set_change_within_the_difference_step_raises():
    """A box whose corners sit at the detection margin: moving it by ±h adds or drops its (speculative)
    contacts, so the step is not differentiable there and NonSmoothStep says so."""
    from femcontact.diff import NonSmoothStep

    sc, _ = box_scene("lagged", "euler", z=0.2)
    sc.gravity = np.zeros(3)
    sim = fc.Simulator(sc)
    x = sim.state.x.to_numpy()
    x[0, 2] = 0.1 + sim.model.contact.margin * (1 - 1e-9)
    sim.state.x.from_numpy(x)
    sim.track_derivatives()
    assert sim.step().contacts > 0
    assert np.isfinite(sim.step_derivatives(["v"]).jacobian()).all()   # velocities do not move the contacts
    end = sim.state.x.to_numpy().copy()
    with pytest.raises(NonSmoothStep, match="contact set changes when x"):
        sim.step_derivatives(["x"]).jacobian()
    assert np.array_equal(sim.state.x.to_numpy(), end)          # the end-of-step State is back
