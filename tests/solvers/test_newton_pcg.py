"""The Newton step's PCG in kernels (solvers/newton_pcg.py): H = Ã + Jᵀ G J applied matrix-free on the
device solves the Newton system, and the Newton path through it reaches the direct solve's iterates."""
import numpy as np
import pytest
import scipy.sparse as sp

import femcontact as fc
from femcontact import backend
from femcontact.assembly.sparse import BlockPattern, BlockSparseMatrix
from femcontact.errors import SimulationError
from femcontact.solvers.newton_dense import ContactRows
from femcontact.solvers.newton_linear import CholmodSolver, SuperLUSolver, make_newton_linear_solver
from femcontact.solvers.newton_pcg import NewtonPCG
from tests.helpers.scenes_util import load_scene
from tests.solvers.test_newton_schur import _BothPaths

RNG = np.random.default_rng(5)


def _device_matrix(n_nodes: int) -> tuple[BlockSparseMatrix, np.ndarray]:
    """A random SPD block matrix on the device (a ring of nodes plus random couplings) and its dense copy."""
    i = np.arange(n_nodes)
    pairs = np.concatenate([np.stack([i, (i + 1) % n_nodes], 1), RNG.integers(0, n_nodes, (n_nodes, 2))])
    A = BlockSparseMatrix(BlockPattern(n_nodes, pairs[:, 0], pairs[:, 1]))
    pat = A.pattern
    blocks = RNG.normal(size=(pat.nnzb, 3, 3))
    upper = pat.row < pat.col
    blocks[pat.index(pat.col[upper], pat.row[upper])] = blocks[upper].transpose(0, 2, 1)   # symmetric
    dense = sp.bsr_matrix((blocks, pat.col, pat.indptr), shape=(3 * n_nodes,) * 2).toarray()
    shift = np.abs(dense).sum(axis=1) + 1.0                                                # diagonally dominant
    blocks[pat.diag] += shift.reshape(n_nodes, 3)[:, :, None] * np.eye(3)
    dense += np.diag(shift)
    backend.write(A.blocks, blocks.astype(backend.np_real()))
    return A, dense


def _dense_rows(J: ContactRows) -> np.ndarray:
    c, K = J.nodes.shape
    out = np.zeros((3 * c, 3 * J.n))
    for m in range(c):
        for k in range(K):
            if J.valid[m, k]:
                out[3 * m:3 * m + 3, 3 * J.nodes[m, k]:3 * J.nodes[m, k] + 3] += J.blocks[m, k]
    return out


def test_solve_step_solves_a_plus_jt_g_j():
    """Known answer: for a device A, contact rows J (one node prescribed: its columns zeroed, one slot
    unused) and SPD blocks G, solve_step(G, r) solves (s A + Jᵀ G J) x = r (dense reference) to the CG
    tolerance, for several G on one setup and after a new J."""
    if backend.config()["precision"] != "f64":
        pytest.skip("the known answer is checked at CG rtol 1e-12, below float32 resolution (f32 PCG: tools/bench_newton_pcg.py)")
    n, c, K, scale = 50, 12, 3, 0.7
    A, Ad = _device_matrix(n)
    pcg = NewtonPCG(rtol=1e-12)
    for _ in range(2):
        nodes = np.sort(np.stack([RNG.choice(n, K, replace=False) for _ in range(c)]), axis=1)
        valid = np.ones((c, K), bool)
        valid[0, 2] = False
        J = ContactRows(nodes, RNG.normal(size=(c, K, 3, 3)) * valid[:, :, None, None], n, valid)
        fixed = np.zeros(n, bool)
        fixed[nodes[1, 0]] = True
        J = J.without(fixed)
        Jd = _dense_rows(J)
        pcg.setup(A, scale, J)
        for _ in range(3):
            B = RNG.normal(size=(c, 3, 3))
            G = B @ B.transpose(0, 2, 1)
            H = scale * Ad + Jd.T @ sp.block_diag(list(G)).toarray() @ Jd
            r = RNG.normal(size=3 * n)
            x = pcg.solve_step(G, r)
            assert np.linalg.norm(H @ x - r) <= 1e-10 * np.linalg.norm(r)
            assert pcg.iterations > 1 and pcg.residual <= 1e-12


def test_warm_start_from_the_previous_direction():
    """x₀ = β d with β = dᵀr / dᵀHd: the same system again starts at its answer (no CG iteration); a
    right-hand side scaled by -3 too (β = -3); cold (warm_start=False) it takes the full count again."""
    n = 40
    A, Ad = _device_matrix(n)
    J = ContactRows(np.zeros((0, 1), np.int64), np.zeros((0, 1, 3, 3)), n, np.zeros((0, 1), bool))
    warm, cold = NewtonPCG(rtol=1e-8), NewtonPCG(rtol=1e-8, warm_start=False)
    r = RNG.normal(size=3 * n)
    for pcg in (warm, cold):
        pcg.setup(A, 1.0, J)
        pcg.solve_step(np.zeros((0, 3, 3)), r)
    first = warm.iterations
    assert first > 5 and cold.iterations == first
    x = warm.solve_step(np.zeros((0, 3, 3)), -3 * r)
    assert warm.iterations == 0
    np.testing.assert_allclose(Ad @ x, -3 * r, rtol=0, atol=1e-6 * np.linalg.norm(r))
    cold.solve_step(np.zeros((0, 3, 3)), -3 * r)
    assert cold.iterations == first


def test_breakdown_and_selection():
    """An indefinite H stops CG with a SimulationError; "pcg" is this solver, and "auto" takes it on a
    GPU from PCG_MIN_DOFS_GPU unknowns (on the CPU: the direct solver up to DIRECT_MAX_DOFS)."""
    from femcontact.solvers.newton_linear import DIRECT_MAX_DOFS, PCG_MIN_DOFS_GPU

    H = sp.kron(np.array([[1.0, 2.0], [2.0, 1.0]]), sp.eye(3)).tocsc()       # eigenvalues 3 and -1
    with pytest.raises(SimulationError, match="not positive definite"):
        NewtonPCG().solve(H, np.r_[np.ones(3), np.zeros(3)])                # p₁ᵀHp₁ = -36
    assert isinstance(make_newton_linear_solver("pcg", 10), NewtonPCG)
    assert isinstance(make_newton_linear_solver("auto", PCG_MIN_DOFS_GPU, "cuda"), NewtonPCG)
    assert not isinstance(make_newton_linear_solver("auto", PCG_MIN_DOFS_GPU - 1, "cuda"), NewtonPCG)
    assert isinstance(make_newton_linear_solver("auto", 50_000, "cpu"), (CholmodSolver, SuperLUSolver))
    assert isinstance(make_newton_linear_solver("auto", DIRECT_MAX_DOFS + 3, "cpu"), NewtonPCG)


def _agree(scene, kind: str, duration: float, min_records: int):
    """Every contact step solved by the kernel PCG (rtol 1e-12) from the same problem and warm start as
    the CHOLMOD reference: v̂ to 1e-9 relative, the same Newton iteration count, e_m to 1e-3 relative
    (or both below 1e-10)."""
    if backend.config()["precision"] != "f64":
        pytest.skip("the iterates agree to f64 round-off")
    sim = fc.Simulator(scene)
    both = _BothPaths(sim.model, dict(scene.solver_options), kind, "pcg")
    assert both.schur.kernel_pcg
    both.schur.linear.rtol = 1e-12          # tightened for the test (the default stops at 1e-10)
    sim.contact_solver = both
    sim.run(duration=duration)
    assert len(both.records) >= min_records
    # e_m below 1e-10 is the last direction's CG residual (rtol 1e-12), not the direct solve's round-off
    both.assert_same_iterates("pcg", em_abs=1e-10)
    assert both.schur.linear.solves >= len(both.records)
    return both


@pytest.mark.parametrize("kind, integrator", [("lagged", "euler"), ("sap", "midpoint"), ("similar", "euler")])
def test_kernel_pcg_gives_the_direct_newton_iterates_on_the_cube_drop(kind, integrator):
    """Agreement: the soft cube (4 cells per edge, 375 DOF) dropped onto the ground."""
    from femcontact.bench.cases import cube_drop

    scene = cube_drop(4, kind)
    scene.integrator = integrator
    _agree(scene, kind, 0.16, 4)


def test_kernel_pcg_gives_the_direct_newton_iterates_on_the_gripper():
    """Agreement: the rigid gripper closing on the soft ball (scenes/gripper_ball.py, Lagged, prismatic
    PD drives, prescribed palm): the fingers touch the ball within the first 0.6 s."""
    scene = load_scene("gripper_ball").build(solver="lagged")
    both = _agree(scene, "lagged", 0.6, 30)
    assert max(st.extra["contacts"] for _, _, st, _ in both.records) > 30
