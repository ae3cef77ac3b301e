"""COND contact solver (COND Alg. 1-3) on hand-made contacts, plus one end-to-end drop on a half-space."""
import numpy as np
import pytest

import femcontact as fc
from femcontact.contact.contacts import OPEN, SLIP, STICK, ContactSet
from femcontact.errors import ParameterError
from femcontact.solvers.base import StepProblem
from femcontact.solvers.cond import CondSolver
from femcontact.solvers.projection import PROXIMAL, STRICT, project_batch

G = 9.81


class _GroundContacts:
    """A stand-in collision pipeline: every node of ``nodes`` touches the plane z = 0 (normal +z, S-contact)."""

    def __init__(self, nodes, mu=(0.5, 0.5)):
        self.nodes = np.asarray(nodes, np.int32)
        self.mu = mu

    def collide(self, state, contacts, dt):
        k = len(self.nodes)
        contacts.ensure_capacity(k, 0)
        contacts.write("node_a", np.full(contacts.capacity, -1, np.int32))
        nb = np.zeros(contacts.capacity, np.int32)
        nb[:k] = self.nodes
        contacts.write("node_b", nb)
        contacts.write("frame", np.tile(np.eye(3), (contacts.capacity, 1, 1)))
        phi = np.zeros(contacts.capacity)
        phi[:k] = state.positions()[self.nodes, 2]
        contacts.write("phi", phi)
        contacts.write("mu", np.tile(np.asarray(self.mu, float), (contacts.capacity, 1)))
        contacts.write("v_world", np.zeros((contacts.capacity, 3)))
        contacts.write("param", np.full(contacts.capacity, -1, np.int32))
        contacts.count = k
        contacts.n_virtual = 0
        return k


def _cube_sim(E=1e7, res=2, integrator="midpoint", force=None, mu=(0.5, 0.5), options=None, dt=1e-2, beta=1e-3,
              nu=0.3, force_nodes=None):
    scene = fc.Scene(dt=dt, integrator=integrator)
    body = scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), res, center=(0, 0, 0.05)),
                              fc.Material(E, nu, 1000.0, rayleigh_beta=beta), name="cube")
    if force is not None:
        body.add_force(force, nodes=force_nodes)
    sim = fc.Simulator(scene)
    bottom = np.where(np.abs(sim.state.positions()[:, 2]) < 1e-12)[0]
    sim.contacts = ContactSet(sim.model.n_nodes)
    sim.collision = _GroundContacts(bottom, mu)
    sim.contact_solver = CondSolver(sim.model, options or {})
    return sim, bottom


def _momentum(sim):
    return (sim.model.mass_np[:, None] * sim.state.velocities()).sum(axis=0)


@pytest.mark.parametrize("integrator", ["midpoint", "euler"])
def test_resting_cube_normal_impulse_equals_weight_and_momentum_balance(integrator):
    sim, _ = _cube_sim(integrator=integrator, nu=0.0)   # no Poisson expansion: no lateral stick forces
    m = sim.model.mass_np.sum()
    dt = sim.scene.dt
    for _ in range(40):
        p0 = _momentum(sim)
        sim.step()
        d = sim.contacts.to_numpy()
        # momentum balance of the step (checks λ -> N s conversion): Δp = m g dt + Σ impulses
        np.testing.assert_allclose(_momentum(sim) - p0, np.array([0, 0, -m * G * dt]) + d["impulse_world"].sum(0),
                                   atol=1e-5 * m * G * dt)
    assert sim.last_solve.converged
    assert d["impulse"][:, 2].sum() == pytest.approx(m * G * dt, rel=1e-2)
    assert np.abs(d["impulse"][:, :2].sum(0)).max() < 1e-4 * m * G * dt       # no net tangential impulse
    assert np.abs(d["impulse"][:, :2]).max() < 2e-3 * m * G * dt          # (tiny per-node shear of the tet mesh)
    assert np.all(d["status"] == STICK)


def _settled_then_pushed(F, mu=(0.5, 0.5), steps=30, options=None):
    t_push = steps * 1e-2 - 1e-9
    sim, bottom = _cube_sim(E=1e7, res=2, force=lambda t: np.array(F) if t > t_push else np.zeros(3), mu=mu,
                            options={"max_iter": 20000, **(options or {})})
    for _ in range(steps):
        sim.step()
    return sim, bottom


def _com_velocity(sim):
    m = sim.model.mass_np
    return (m[:, None] * sim.state.velocities()).sum(0) / m.sum()


@pytest.mark.parametrize("factor", [1.5, 0.5])
def test_pushed_cube_slides_or_sticks(factor):
    mu = 0.5
    m = 1000.0 * 0.1**3
    F = factor * mu * m * G
    sim, bottom = _settled_then_pushed((F, 0, 0))
    v0 = _com_velocity(sim)
    sim.step()
    dv = _com_velocity(sim) - v0
    d = sim.contacts.to_numpy()
    N = d["impulse"][:, 2].sum()
    if factor > 1:
        assert dv[0] == pytest.approx((F / m - mu * G) * sim.scene.dt, rel=1e-2)
        # momentum balance with the solver's own impulses (checks convergence and the λ -> N s scaling)
        assert dv[0] == pytest.approx((F * sim.scene.dt + d["impulse_world"][:, 0].sum()) / m, rel=1e-4)
        # the slip directions are not exactly -x (Poisson expansion spreads them a little), so the
        # x friction is mu N to 3e-4 at the converged solution (2.68e-4 at tol 1e-11), not exactly
        assert -d["impulse_world"][:, 0].sum() == pytest.approx(mu * N, rel=1e-3)
        assert np.all(d["status"] != STICK)
        slip = d["status"] == SLIP
        # Coulomb on the boundary of the cone, opposite to the motion
        np.testing.assert_allclose(np.linalg.norm(d["impulse"][:, :2], axis=1), mu * d["impulse"][:, 2], rtol=1e-8)
        assert np.all(d["impulse"][slip, 0] < 0)
    else:
        stick = d["status"] == STICK
        assert np.mean(stick) > 0.5                              # (a lightly loaded corner node may slip)
        v_end = sim.state.velocities()[bottom]
        assert np.abs(v_end[stick, :2]).max() < 1e-3 * F / m * sim.scene.dt   # stuck nodes stay put
        assert abs(dv[0]) < 0.1 * F / m * sim.scene.dt           # only the body's elastic shear moves the COM
        assert -d["impulse"][:, 0].sum() == pytest.approx(F * sim.scene.dt - m * dv[0], rel=1e-4)


def _one_step_problem(sim):
    sim.assemble()
    sim.collision.collide(sim.state, sim.contacts, sim.scene.dt)
    return StepProblem(sim.model, sim.state, sim.A, sim.b, sim.v_hat, sim.fixed, sim.contacts, sim.coef, sim.scene.dt,
                       sim.scene.integrator)


def test_strict_operator_satisfies_signorini_coulomb():
    """One step from rest with an oblique push that makes some contacts slip: check (11) directly."""
    m = 1000.0 * 0.1**3
    sim, bottom = _cube_sim(E=1e6, force=(0.45 * m * G, 0.3 * m * G, 0.0), options={"tol": 1e-10, "max_iter": 5000})
    prob = _one_step_problem(sim)
    st = sim.contact_solver.solve(prob)
    assert st.converged
    assert st.extra["complementarity_normal"] < 1e-6
    assert st.extra["cone_violation"] < 1e-9
    d = sim.contacts.to_numpy()
    lam = sim.contact_solver.lambdas()
    vhat = sim.v_hat.to_numpy()[bottom]
    vn, vt = vhat[:, 2], vhat[:, :2]            # frame = identity, v_k = 0, φ = 0: target t = 0
    scale = np.abs(vhat).max()
    assert vn.min() > -1e-6 * scale
    assert np.all(lam[:, 2] >= 0)
    assert np.abs(lam[:, 2] * vn).max() < 1e-6 * scale * lam[:, 2].max()
    slip = d["status"] == SLIP
    assert slip.any()
    mu = 0.5
    assert np.all(np.linalg.norm(lam[:, :2], axis=1) <= mu * lam[:, 2] * (1 + 1e-12) + 1e-15)
    for k in np.where(slip)[0]:      # maximal dissipation: λ_t = -μ λ_n v_t/|v_t|
        np.testing.assert_allclose(lam[k, :2], -mu * lam[k, 2] * vt[k] / np.linalg.norm(vt[k]), rtol=1e-5,
                                   atol=1e-6 * mu * lam[k, 2])
    for k in np.where(d["status"] == STICK)[0]:
        assert np.linalg.norm(vt[k]) < 1e-6 * scale


def test_proximal_iterates_contract():
    """COND Thm. 2: without acceleration the proximal VL-FPI is non-expansive (successive differences shrink)."""
    m = 1000.0 * 0.1**3
    sim, _ = _cube_sim(E=1e6, force=(0.45 * m * G, 0.3 * m * G, 0.0),
                       options={"operator": "proximal", "acceleration": "none", "under_relaxation": 1.0, "tol": 1e-9,
                                "max_iter": 3000})
    st = sim.contact_solver.solve(_one_step_problem(sim))
    assert st.converged
    h = np.array(sim.contact_solver.history)
    assert len(h) > 5
    # history is the residual normalised by max(|v|, scale); compare raw differences via the ratio test
    assert np.all(h[1:] <= h[:-1] * (1 + 1e-6))


def test_anisotropic_friction_on_ellipse_boundary():
    m = 1000.0 * 0.1**3
    mu1, mu2 = 0.2, 0.8
    F = 0.5 * m * G
    # along t1 (x): mu1 m g < F -> slides with friction mu1 N
    sim, _ = _settled_then_pushed((F, 0, 0), mu=(mu1, mu2))
    v0 = _com_velocity(sim)
    sim.step()
    d = sim.contacts.to_numpy()
    assert np.all(d["status"] != STICK)
    lam = d["impulse"]
    np.testing.assert_allclose(np.hypot(lam[:, 0] / mu1, lam[:, 1] / mu2), lam[:, 2], rtol=1e-8)
    dv = (_com_velocity(sim) - v0)[0]
    assert dv == pytest.approx((F / m - mu1 * G) * sim.scene.dt, rel=1e-2)
    # along t2 (y): F < mu2 m g -> sticks
    sim, _ = _settled_then_pushed((0, F, 0), mu=(mu1, mu2))
    v0 = _com_velocity(sim)
    sim.step()
    assert abs((_com_velocity(sim) - v0)[1]) < 0.1 * F / m * sim.scene.dt   # elastic shear only, no sliding
    # oblique push, slipping: the friction lies on the ellipse (maximal dissipation, not opposite the motion)
    sim, _ = _settled_then_pushed((F, F, 0), mu=(mu1, mu2))
    sim.step()
    d = sim.contacts.to_numpy()
    lam = d["impulse"][d["status"] == SLIP]
    assert len(lam)
    np.testing.assert_allclose(np.hypot(lam[:, 0] / mu1, lam[:, 1] / mu2), lam[:, 2], rtol=1e-8)


def test_d_contact_through_virtual_node():
    """A small cube resting on a big one: its bottom corners touch the big cube's top face at virtual nodes
    (bilinear weights of the face's four corners). Momentum: the D-contacts cancel; the damper balance
    k_v (J_v v̂ − v̂_v) = −Rᵀλ holds at convergence and the virtual velocity is close to J_v v̂."""
    scene = fc.Scene(dt=1e-2)
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 1, center=(0, 0, 0.05)), fc.Material(1e6, 0.3, 1000.0), name="A")
    scene.add_fem_body(fc.meshes.box((0.05, 0.05, 0.05), 1, center=(0, 0, 0.125)), fc.Material(1e6, 0.3, 1000.0),
                       name="B")
    sim = fc.Simulator(scene)
    x = sim.state.positions()
    nA = sim.model.body("A").node_count
    ground = np.where(np.abs(x[:, 2]) < 1e-12)[0]
    topA = [i for i in range(nA) if abs(x[i, 2] - 0.1) < 1e-12]
    botB = [i for i in range(nA, sim.model.n_nodes) if abs(x[i, 2] - 0.1) < 1e-12]
    assert len(ground) == 4 and len(topA) == 4 and len(botB) == 4
    n0 = sim.model.n_nodes
    cs = ContactSet(n0, capacity=8, virtual_capacity=4)
    na = np.full(8, -1, np.int32)
    nb = np.zeros(8, np.int32)
    nb[:4] = ground
    vn_node = np.full((4, 4), -1, np.int32)
    vn_w = np.zeros((4, 4, 3, 3))
    for q, j in enumerate(botB):
        na[4 + q] = n0 + q                      # side A: the virtual node on body A's top face
        nb[4 + q] = j                           # side B: body B's bottom node
        for k, i in enumerate(topA):
            wx = 1 - abs(x[j, 0] - x[i, 0]) / 0.1
            wy = 1 - abs(x[j, 1] - x[i, 1]) / 0.1
            vn_node[q, k] = i
            vn_w[q, k] = wx * wy * np.eye(3)
    cs.write("node_a", na)
    cs.write("node_b", nb)
    cs.write("frame", np.tile(np.eye(3), (8, 1, 1)))
    cs.write("phi", np.zeros(8))
    cs.write("mu", np.full((8, 2), 0.5))
    cs.write("v_world", np.zeros((8, 3)))
    cs.write("param", np.full(8, -1, np.int32))
    cs.vn_node.from_numpy(vn_node)
    cs.vn_weight.from_numpy(vn_w)
    cs.count, cs.n_virtual = 8, 4
    sim.assemble()
    prob = StepProblem(sim.model, sim.state, sim.A, sim.b, sim.v_hat, sim.fixed, cs, sim.coef, sim.scene.dt,
                       sim.scene.integrator)
    solver = CondSolver(sim.model, {"tol": 1e-10, "max_iter": 20000})
    st = solver.solve(prob)
    assert st.converged
    lam = solver.lambdas()
    assert np.all(lam[4:, 2] > 0)               # B pushes on A
    # momentum: A v̂ - b = Jᵀλ; summed over real nodes the D-contacts cancel, leaving the ground's λ
    K = sim.A.to_scipy()
    vhat = sim.v_hat.to_numpy()[:n0]
    r = (K @ vhat.ravel() - sim.b.to_numpy()[:n0].ravel()).reshape(-1, 3)
    np.testing.assert_allclose(r.sum(0), lam[:4].sum(0), rtol=1e-5, atol=1e-6 * lam[:, 2].max())
    # virtual node: damper balance and closeness to J_v v̂
    vv = solver.virtual_velocities()
    kv = solver.virtual_gains()[:4]
    Jv = np.einsum("qkab,qkb->qa", vn_w, vhat[vn_node])
    np.testing.assert_allclose(kv[:, None] * (Jv - vv), lam[4:], rtol=1e-4, atol=1e-6 * lam[:, 2].max())
    assert np.abs(Jv - vv).max() < 0.1 * G * sim.scene.dt
    d = cs.to_numpy()
    # equal and opposite: B gets +λ, the virtual node (on A) −λ; the world impulse on B's nodes is upward
    assert np.all(d["impulse_world"][4:, 2] > 0)


def test_chebyshev_reduces_iterations_on_stiff_multicontact():
    counts = {}
    for cheb in (False, True):
        sim, _ = _cube_sim(E=1e7, res=4, options={"acceleration": "chebyshev" if cheb else "none", "max_iter": 5000})
        st = sim.contact_solver.solve(_one_step_problem(sim))
        assert st.converged
        counts[cheb] = st.iterations
    assert counts[True] < 0.6 * counts[False], counts


def test_bb_step_converges_to_same_answer():
    res = {}
    for step in ("frobenius", "bb"):
        sim, _ = _cube_sim(E=1e6, options={"step": step, "tol": 1e-9, "max_iter": 5000})
        st = sim.contact_solver.solve(_one_step_problem(sim))
        assert st.converged
        res[step] = sim.contacts.to_numpy()["impulse"]
    np.testing.assert_allclose(res["bb"], res["frobenius"], rtol=1e-5, atol=1e-7 * np.abs(res["bb"]).max())


@pytest.mark.parametrize("bad, match", [
    ({"operator": "exact"}, "operator"), ({"step": "newton"}, "step"), ({"tol": 0}, "tol"),
    ({"max_iter": 0}, "max_iter"), ({"max_iter": 2.5}, "max_iter"), ({"rho": 1.0}, "rho"),
    ({"under_relaxation": 1.5}, "under_relaxation"), ({"omega": -1}, "omega"), ({"acceleration": "yes"}, "acceleration"),
    ({"acceleration": "anderson", "step": "bb"}, "anderson"), ({"anderson_history": 0}, "anderson_history"),
    ({"restitution": 2}, "restitution"), ({"virtual_gain": 0}, "virtual_gain"), ({"recycle": 0}, "recycle"),
    ({"tolerance": 1e-6}, "unknown COND option"),
])
def test_bad_options_raise_clear_errors(bad, match):
    sim, _ = _cube_sim(res=1)
    with pytest.raises(ParameterError, match=match):
        CondSolver(sim.model, bad)


def test_projections_match_references():
    rng = np.random.default_rng(0)
    n = 400
    ls = rng.normal(size=(n, 3))
    mu = np.column_stack([rng.uniform(0.1, 1.0, n), rng.uniform(0.1, 1.0, n)])
    mu[: n // 2, 1] = mu[: n // 2, 0]           # first half isotropic
    out = fc.backend.vec3_array(n)
    clipped = fc.backend.scalar_array(n, dtype=fc.backend.ti.i32)
    inp = fc.backend.vec3_array(n, ls)
    mu_arr = fc.backend.ti.Vector.ndarray(2, float, shape=n)
    mu_arr.from_numpy(mu)
    project_batch(inp, mu_arr, STRICT, out, clipped)
    s = out.to_numpy()
    for k in range(n):
        ln = max(ls[k, 2], 0.0)
        assert s[k, 2] == pytest.approx(ln)
        a, b = mu[k] * ln
        if ln == 0:
            assert np.allclose(s[k, :2], 0)
            continue
        assert (s[k, 0] / a) ** 2 + (s[k, 1] / b) ** 2 <= 1 + 1e-9
        # optimality: no point on a fine ellipse sampling is closer to the input
        th = np.linspace(0, 2 * np.pi, 4001)
        pts = np.column_stack([a * np.cos(th), b * np.sin(th)])
        dmin = np.min(np.linalg.norm(pts - ls[k, :2], axis=1))
        inside = (ls[k, 0] / a) ** 2 + (ls[k, 1] / b) ** 2 <= 1
        d = np.linalg.norm(s[k, :2] - ls[k, :2])
        assert d <= (0 if inside else dmin) + 1e-3 * max(a, b)
    project_batch(inp, mu_arr, PROXIMAL, out, clipped)
    p = out.to_numpy()
    for k in range(n):
        m1, m2 = mu[k]
        y = p[k]
        assert y[2] >= -1e-12 and (y[0] / m1) ** 2 + (y[1] / m2) ** 2 <= y[2] ** 2 * (1 + 1e-8) + 1e-20
        # projection onto a convex cone: (x - y) ⟂ y and (x - y) in the polar cone
        r = ls[k] - y
        assert abs(r @ y) < 1e-8 * (1 + np.linalg.norm(ls[k]) ** 2)
        assert np.sqrt((m1 * r[0]) ** 2 + (m2 * r[1]) ** 2) <= -r[2] + 1e-7


def test_dropped_soft_cube_settles_without_jitter():
    """End to end with contact detection: a damped soft cube dropped on a half-space comes to rest."""
    from femcontact.geometry import shapes

    scene = fc.Scene(dt=1e-2, solver="cond")
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 2, center=(0, 0, 0.07)),
                       fc.Material(1e5, 0.3, 1000.0, rayleigh_beta=0.01), name="cube")
    scene.add_obstacle(shapes.HalfSpace(normal=(0, 0, 1)), friction=0.5, name="ground")
    sim = fc.Simulator(scene)
    sim.run(steps=120)
    vmax = []
    for _ in range(10):
        sim.step()
        vmax.append(np.abs(sim.body_velocities("cube")).max())
    edge = 0.05
    assert sim.body_positions("cube")[:, 2].min() > -0.01 * edge
    assert max(vmax) < 1e-4
    assert sim.last_solve.converged


def test_frobenius_step_is_scaled_below_the_spectral_limit():
    """The Frobenius W alone lets λ_max(W A) exceed 2 on flat tets (a 2 x 2 x 5 cm slab, E = 100 kPa):
    the plain iteration then diverged at the slab's corners, far from the contact. The power
    estimate scales W_F so that the exact λ_max(W A) ends below 2 (target 1.7 on a Rayleigh
    estimate that is a few % low), and the steps of a rigid cube resting on that slab converge."""
    from scipy.sparse import diags
    from scipy.sparse.linalg import eigsh
    scene = fc.Scene(dt=1e-2, solver="cond", integrator="midpoint")
    mat = fc.Material(youngs_modulus=1e5, poisson_ratio=0.3, density=1000.0, rayleigh_beta=0.02)
    slab = scene.add_fem_body(fc.meshes.box(size=(0.4, 0.4, 0.1), resolution=(20, 20, 2), center=(0, 0, -0.05)),
                              mat, name="slab")
    slab.pin("z < -0.099")
    scene.add_rigid_body(fc.shapes.Box((0.02, 0.02, 0.02)), density=8000.0, position=(0, 0, 0.02), name="cube")
    sim = fc.Simulator(scene)
    sim.run(steps=3)
    solver = sim.contact_solver
    assert all(s.iterations < solver.options.max_iter for s in sim.stats), [s.iterations for s in sim.stats]
    n = sim.model.n_nodes
    scalar = (sim.fixed.to_numpy()[:n] == 0) & (solver._blockstep.to_numpy()[:n] == 0)
    w = np.repeat(np.where(scalar, solver._tr.to_numpy()[:n] / solver._rs.to_numpy()[:n], 0.0), 3)
    keep = np.repeat(scalar, 3)
    A = sim.system_matrix()[keep][:, keep]
    sw = diags(np.sqrt(w[keep]))
    lam = eigsh(sw @ A @ sw, k=1, which="LA", return_eigenvectors=False)[0]   # λ_max(W A) with the scaled W
    assert solver.w_scale < 0.85, solver.w_scale                          # measured 0.78 (λ̃ = 2.19)
    assert 1.6 < lam < 1.9, lam                                            # measured 1.77


def test_momentum_tol_stops_on_the_momentum_error():
    """momentum_tol: COND stops only once SAP eq. 32's e_m is below it, tightening θ's tol 10x at a
    time. A soft cube resting on the ground: the default θ stop leaves e_m ≈ 1.3e-7 (measured; with
    momentum_tol 1.0, never binding, e_m is only reported), momentum_tol 1e-8 reaches it."""
    errors, tightened = {}, False
    for tol in (1.0, 1e-8):
        sim, _ = _cube_sim(E=1e5, nu=0.3, options={"momentum_tol": tol})
        sim.run(steps=10)
        default_tol = sim.contact_solver.options.tol
        errors[tol] = []
        for _ in range(10):
            sim.step()
            extra = sim.last_solve.extra
            errors[tol].append(extra["momentum_error"])
            assert sim.last_solve.converged and extra["momentum_error"] <= tol
            tightened |= extra["final_tol"] < default_tol
    assert max(errors[1.0]) > 1e-8 and max(errors[1e-8]) <= 1e-8
    assert tightened                                            # θ's own stop was not enough
