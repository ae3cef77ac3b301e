"""COND's FEM step (option ``fem_step``, docs/COND.md "FEM step"): the free FEM rows (no contact
side on them) take a 3x3 block-Jacobi step or K Chebyshev sweeps preconditioned by it instead of
the scalar Frobenius step. Known answers on a soft cube resting on the ground: the same solution
as the scalar step, in fewer iterations; the kernel's step is the SPD matrix p(D⁻¹M) D⁻¹ built
here from A; λ_max(W A) < 2; contact rows keep their scalar step (Γ diagonal)."""
import numpy as np
import pytest

import femcontact as fc
from femcontact.solvers.cond import CondSolver
from femcontact.solvers.cond import step_matrix
from femcontact.solvers.cond.layout import ROW, STEP_FEM, STEP_SCALAR, VROWS
from femcontact.errors import ParameterError

TOL = 1e-10


def _scene(options=None):
    scene = fc.Scene(dt=1e-2, solver="cond", integrator="euler", solver_options=options or {})
    scene.add_fem_body(fc.meshes.box((0.1, 0.1, 0.1), 3), fc.Material(1e5, 0.4, 1000.0),
                       position=(0.0, 0.0, 0.05), name="cube")
    scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.5, name="ground")
    return scene


@pytest.fixture(scope="module")
def resting(tmp_path_factory):
    """A checkpoint of the cube after 0.3 s on the ground (scalar step)."""
    sim = fc.Simulator(_scene())
    sim.run(steps=30)
    return sim.save_checkpoint(tmp_path_factory.mktemp("cond_step") / "rest.npz")


def _one_step(path, options):
    sim = fc.Simulator(_scene())
    sim.contact_solver = CondSolver(sim.model, {"tol": TOL, "max_iter": 5000, **options})
    sim.load_checkpoint(path)
    st = sim.step()
    return sim, st


def _fem_step_matrix(solver, A, rows, K):
    """W on ``rows`` (the STEP_FEM rows) from the recurrence of iterate.py, as a dense matrix."""
    WB = solver._WB.to_numpy()
    Dinv = np.zeros((3 * len(rows),) * 2)
    M = A[np.repeat(rows, 3) * 3 + np.tile(np.arange(3), len(rows))][:, np.repeat(rows, 3) * 3
                                                                     + np.tile(np.arange(3), len(rows))].toarray()
    for r, i in enumerate(rows):
        s = slice(3 * r, 3 * r + 3)
        Dinv[s, s] = WB[0, i]
        M[s, s] += WB[1, i]                      # A_ii plus the virtual coupling (none here)
    a, b, c = step_matrix.fem_interval(solver.fem_lmax, K)
    theta, delta = (a + b) / 2, (b - a) / 2
    P = Dinv / theta
    R = np.eye(len(M))
    W = P.copy()
    rho = delta / theta
    for _ in range(K - 1):
        R = R - M @ P
        rho_new = 1.0 / (2.0 * theta / delta - rho)
        P = rho_new * rho * P + (2.0 * rho_new / delta) * Dinv @ R
        W += P
        rho = rho_new
    return c * W


def test_fem_step_same_solution_fewer_iterations_and_spectral_bound(resting):
    ref, st_ref = _one_step(resting, {"fem_step": "jacobi"})
    n = ref.model.n_nodes
    v_ref = ref.state.velocities()[:n]
    imp_ref = ref.contacts.read("impulse")["impulse"]
    assert st_ref.iterations < 5000 and int(ref.contacts.count) > 0
    for fem, K in (("block3", 1), ("chebyshev", 4)):
        sim, st = _one_step(resting, {"fem_step": fem, "fem_sweeps": 4})
        solver = sim.contact_solver
        assert st.iterations < 5000
        # at rest v ≈ 5e-7 m/s: compare on the velocity change the step resolves, g dt (measured 5e-11 m/s)
        assert np.abs(sim.state.velocities()[:n] - v_ref).max() < 1e-7 * 9.81 * 1e-2, fem
        imp = sim.contacts.read("impulse")["impulse"]
        assert np.abs(imp - imp_ref).max() < 1e-5 * np.abs(imp_ref).max(), fem
        # measured at tol 1e-10: 42 iterations (scalar step), 31 (block3), 11 (4 sweeps)
        assert st.iterations < (0.9 if fem == "block3" else 0.5) * st_ref.iterations, (st.iterations, st_ref.iterations)
        # which rows took the step: every free node without a contact side, none with one
        step = solver._RK.to_numpy()[:n, ROW.step.off]
        sides = solver._RT.to_numpy()[:2 * int(sim.contacts.count)]
        contact_rows = np.unique(sides[(sides >= 0) & (sides < n)])
        assert len(contact_rows) > 0 and np.all(step[contact_rows] == STEP_SCALAR)
        rows = np.flatnonzero(step == STEP_FEM)
        assert solver.fem_rows == len(rows) == n - len(contact_rows)
        # the kernel's step is W_F g on those rows, W_F symmetric positive definite
        A = sim.system_matrix()
        WF = _fem_step_matrix(solver, A, rows, K)
        V = solver.V.to_numpy()
        g, d = V[VROWS.G, rows].ravel(), V[VROWS.D_FEM, rows].ravel() * step_matrix.fem_interval(solver.fem_lmax, K)[2]
        assert np.abs(d - WF @ g).max() <= 1e-9 * np.abs(d).max()
        assert np.abs(WF - WF.T).max() <= 1e-9 * np.abs(WF).max()
        assert np.linalg.eigvalsh(0.5 * (WF + WF.T)).min() > 0.0
        # λ_max(W A) < 2 with W = W_F on the FEM rows and the scalar w̄ on the contact rows
        W = np.zeros((3 * n, 3 * n))
        idx = (3 * rows[:, None] + np.arange(3)).ravel()
        W[np.ix_(idx, idx)] = WF
        w = solver._W.to_numpy()[:n]
        for i in contact_rows:
            W[3 * i:3 * i + 3, 3 * i:3 * i + 3] = w[i] * np.eye(3)
        lam = np.linalg.eigvals(W @ A.toarray()).real
        assert lam.max() < 2.0 and lam.min() > -1e-9, (fem, lam.max())


def test_fem_step_options_validated():
    with pytest.raises(ParameterError, match="fem_step"):
        CondSolver(fc.Simulator(_scene()).model, {"fem_step": "multigrid"})
    with pytest.raises(ParameterError, match="fem_sweeps"):
        CondSolver(fc.Simulator(_scene()).model, {"fem_step": "chebyshev", "fem_sweeps": 0})
    with pytest.raises(ParameterError, match="needs step='frobenius'"):
        CondSolver(fc.Simulator(_scene()).model, {"fem_step": "block3", "step": "bb"})


def test_auto_takes_the_sweeps_on_a_soft_body_on_obstacles_only(resting):
    """fem_step "auto" (the default): the resting cube (48 of 64 rows free, contacts on the ground
    only) takes the 8 sweeps, with the same iterations as asking for them; a step with a virtual
    node (a body against a rigid or FEM body) keeps the scalar step."""
    auto, st_auto = _one_step(resting, {})
    cheb, st_cheb = _one_step(resting, {"fem_step": "chebyshev"})
    assert auto.contact_solver.fem_rows == cheb.contact_solver.fem_rows > 0
    assert st_auto.iterations == st_cheb.iterations
    solver = auto.contact_solver
    assert not solver._fem_step_pays(None, solver.n0, nvx=1)   # (a virtual node decides before the rows are read)
    bb = CondSolver(auto.model, {"step": "bb"})          # auto under the BB step: the scalar step
    assert bb._fem == 0
