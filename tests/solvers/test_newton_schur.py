"""The contact-space Schur complement of the Newton path (solvers/newton_schur.py): the trailing
block of CHOLMOD's factor with the contact DOFs ordered last is the Cholesky factor of the Schur
complement, and H = Ã + Jᵀ G J is solved exactly through it."""
import numpy as np
import pytest
import scipy.sparse as sp

from femcontact.solvers import newton_schur as ns
from femcontact.solvers.newton_dense import ContactRows
from femcontact.solvers.newton_linear import _lower_csc

RNG = np.random.default_rng(31)


def _spd(n_nodes: int) -> sp.csc_matrix:
    """A random sparse SPD matrix in 3x3 node blocks (a ring of nodes plus random couplings)."""
    i = np.arange(n_nodes)
    pairs = np.concatenate([np.stack([i, (i + 1) % n_nodes], 1), RNG.integers(0, n_nodes, (2 * n_nodes, 2))])
    nb = sp.csr_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n_nodes, n_nodes))
    nb = nb + nb.T + sp.eye(n_nodes)
    M = sp.kron(nb, np.ones((3, 3))).tocsr()
    M.data = RNG.normal(size=M.nnz)
    M = M + M.T
    return (M + sp.diags(np.abs(M).sum(axis=1).A1 + 1.0)).tocsc()


def _contact_rows(n_nodes: int, c: int, K: int = 2) -> ContactRows:
    nodes = np.sort(np.stack([RNG.choice(n_nodes, K, replace=False) for _ in range(c)]), axis=1)
    return ContactRows(nodes, RNG.normal(size=(c, K, 3, 3)), n_nodes, np.ones((c, K), bool))


@pytest.mark.parametrize("ordering", ["amd", "metis"])
def test_trailing_block_is_the_cholesky_factor_of_the_schur_complement(ordering):
    """Known answer: with random contact nodes ordered last, L Lᵀ = A[perm][:, perm] and the trailing
    k x k block gives S = A_cc − A_ci A_ii⁻¹ A_ic, computed densely."""
    if ordering == "metis":
        pytest.importorskip("pymetis")
    n_nodes = 60
    A = _spd(n_nodes)
    J = _contact_rows(n_nodes, 7)
    nodes_c = ns.contact_nodes(J, np.zeros(n_nodes, bool))
    solver = ns.SchurSolver(ordering)
    L, cols = _lower_csc(A)
    solver.setup(L, cols, "A", J, nodes_c)
    assert solver.ordering_used == ordering
    perm, ni, k = solver._perm, solver._ni, solver.contact_dofs
    cdof = (3 * nodes_c[:, None] + np.arange(3)).ravel()
    assert k == len(cdof) and np.array_equal(perm[ni:], cdof)
    assert np.array_equal(np.sort(perm), np.arange(3 * n_nodes))
    Lf = sp.csc_matrix((solver._data, solver._indices, solver._indptr), shape=A.shape).toarray()
    Ap = A.toarray()[np.ix_(perm, perm)]
    assert np.abs(Lf @ Lf.T - Ap).max() <= 1e-12 * np.abs(Ap).max()
    Ad = A.toarray()
    inner = np.setdiff1d(np.arange(3 * n_nodes), cdof)
    S = Ad[np.ix_(cdof, cdof)] - Ad[np.ix_(cdof, inner)] @ np.linalg.solve(Ad[np.ix_(inner, inner)],
                                                                         Ad[np.ix_(inner, cdof)])
    S_factor = np.tril(solver.dense._At)
    assert np.abs(np.tril(S) - S_factor).max() <= 1e-12 * np.abs(S).max()


def test_solve_is_the_full_newton_solve():
    """H(G) x = r through the complement agrees with a dense solve of Ã + Jᵀ G J, for several G on one
    factorization; prescribed nodes' columns (zero blocks), a changed and a repeated contact set are handled."""
    n_nodes = 80
    A = _spd(n_nodes)
    L, cols = _lower_csc(A)
    solver = ns.SchurSolver("amd")
    for step in range(3):
        if step < 2:                            # step 2 repeats step 1's contacts (a new factor, same pattern)
            J = _contact_rows(n_nodes, 9, K=3)
        fixed = np.zeros(n_nodes, bool)
        fixed[J.nodes[0, 0]] = True
        Jf = J.without(fixed)
        nodes_c = ns.contact_nodes(Jf, fixed)
        assert J.nodes[0, 0] not in nodes_c
        solver.setup(L, cols, "A", Jf, nodes_c)
        Jd = np.zeros((3 * len(Jf.nodes), 3 * n_nodes))
        for m in range(len(Jf.nodes)):
            for q in range(Jf.nodes.shape[1]):
                Jd[3 * m:3 * m + 3, 3 * Jf.nodes[m, q]:3 * Jf.nodes[m, q] + 3] += Jf.blocks[m, q]
        for _ in range(3):
            B = RNG.normal(size=(len(Jf.nodes), 3, 3))
            G = B @ B.transpose(0, 2, 1)                     # SPD blocks, like the contact models' G
            H = A.toarray() + Jd.T @ _blockdiag(G) @ Jd
            r = RNG.normal(size=3 * n_nodes)
            x = solver.solve(G, r)
            assert np.linalg.norm(H @ x - r) <= 1e-11 * np.linalg.norm(r)
    assert solver.analyses == 3                               # one per step


def _blockdiag(G: np.ndarray) -> np.ndarray:
    out = np.zeros((3 * len(G), 3 * len(G)))
    for m, g in enumerate(G):
        out[3 * m:3 * m + 3, 3 * m:3 * m + 3] = g
    return out


class _BothPaths:
    """Solves each contact step's problem with the full-H path (the reference, whose answer the
    simulation keeps) and again from the same warm start with the Schur path; records both."""

    def __init__(self, model, options: dict, kind: str, schur_option: str = "schur"):
        from femcontact.solvers.sap import NewtonContactSolver

        self.reference = NewtonContactSolver(model, {**options, "linear_solver": "cholmod"}, kind)
        self.schur = NewtonContactSolver(model, {**options, "linear_solver": schur_option}, kind)
        self.name = kind
        self.records = []

    def solve(self, problem):
        if int(problem.contacts.count) == 0:
            return self.reference.solve(problem)
        warm = problem.v_hat.to_numpy().copy()
        st_s = self.schur.solve(problem)
        v_s = problem.v_hat.to_numpy().copy()
        problem.v_hat.from_numpy(warm)
        st = self.reference.solve(problem)
        self.records.append((problem.v_hat.to_numpy().copy(), v_s, st, st_s))
        return st

    def memory(self):
        return {}

    def restore(self, memory):
        pass

    def assert_same_iterates(self, linear_solver: str, em_abs: float) -> None:
        """Every recorded step: the tested path's v̂ to 1e-9 (relative) of the reference's, the same Newton
        iteration count, both converged, e_m to 1e-3 relative (or both below ``em_abs``)."""
        for v_ref, v_s, st, st_s in self.records:
            assert st_s.extra["linear_solver"] == linear_solver and st.extra["linear_solver"] == "cholmod"
            assert np.linalg.norm(v_s - v_ref) <= 1e-9 * np.linalg.norm(v_ref)
            assert st_s.iterations == st.iterations
            assert st_s.converged and st.converged
            assert st_s.extra["momentum_error"] == pytest.approx(st.extra["momentum_error"], rel=1e-3, abs=em_abs)


@pytest.mark.parametrize("kind, integrator, cells, option", [
    ("lagged", "euler", 4, "schur"), ("sap", "midpoint", 4, "schur"), ("similar", "euler", 4, "schur"),
    pytest.param("lagged", "euler", 10, "auto", marks=pytest.mark.slow),     # 3,993 DOF: "auto" takes it
])
def test_schur_path_gives_the_full_newton_iterates(kind, integrator, cells, option):
    """Agreement: on a soft cube dropped onto the ground, every contact step solved by the Schur path
    from the same problem and warm start gives the full-H path's v̂ to 1e-9 (relative), the same
    Newton iteration count and the same e_m to round-off; the Schur path factored Ã once per step."""
    import femcontact as fc
    from femcontact.bench.cases import cube_drop

    scene = cube_drop(cells, kind)
    scene.integrator = integrator
    sim = fc.Simulator(scene)
    both = _BothPaths(sim.model, dict(scene.solver_options), kind, option)
    sim.contact_solver = both
    sim.run(duration=0.16)
    assert len(both.records) >= 4
    both.assert_same_iterates("schur", em_abs=1e-12)
    assert both.schur.schur.analyses >= 1


def test_reuse_keeps_the_factor_while_the_pattern_and_contact_nodes_repeat():
    """Factor reuse: a setup with the same pattern of Ã and contact nodes among the factor's last ones
    keeps the factor (stale, J mapped onto the factor's contact nodes); a new contact node, a new
    pattern or the refactor trigger factors again; without reuse every setup factors."""
    n_nodes = 60
    A = _spd(n_nodes)
    L, cols = _lower_csc(A)
    J = _contact_rows(n_nodes, 8)
    nodes_c = ns.contact_nodes(J, np.zeros(n_nodes, bool))
    solver = ns.SchurSolver("amd", reuse=True)
    solver.setup(L, cols, "A", J, nodes_c)
    assert solver.factorizations == 1 and not solver.stale
    k = solver.contact_dofs
    sub = J.without(~np.isin(np.arange(n_nodes), nodes_c[:3]))     # contacts on a subset of those nodes
    solver.setup(L, cols, "A", sub, ns.contact_nodes(sub, np.zeros(n_nodes, bool)))
    assert solver.factorizations == 1 and solver.stale and solver.contact_dofs == k
    assert np.array_equal(solver.J_local.rows, sub.rows)                   # the same rows, the factor's slots
    assert np.array_equal(nodes_c[solver.J_local.nodes[sub.valid]], sub.nodes[sub.valid])
    outside = np.setdiff1d(np.arange(n_nodes), nodes_c)[:1]
    solver.setup(L, cols, "A", J, np.union1d(nodes_c, outside))
    assert solver.factorizations == 2 and not solver.stale
    solver.setup(L, cols, "B", J, nodes_c)
    assert solver.factorizations == 3
    solver.refactor_next = True
    solver.setup(L, cols, "B", J, nodes_c)
    assert solver.factorizations == 4
    exact = ns.SchurSolver("amd")
    for _ in range(2):
        exact.setup(L, cols, "A", J, nodes_c)
    assert exact.factorizations == 2 and not exact.stale


class _ExactAndReused(_BothPaths):
    """The exact Schur path (the reference, kept) and the Schur path with factor reuse on each problem."""

    def __init__(self, model, options: dict, kind: str):
        from femcontact.solvers.sap import NewtonContactSolver

        self.reference = NewtonContactSolver(model, {**options, "linear_solver": "schur"}, kind)
        self.schur = NewtonContactSolver(model, {**options, "linear_solver": "schur", "factor_reuse": True}, kind)
        self.name = kind
        self.records = []


def _reuse_run(rel_tol: float, kind: str = "lagged", integrator: str = "euler",
               duration: float = 0.3) -> _ExactAndReused:
    import femcontact as fc
    from femcontact.bench.cases import cube_drop

    scene = cube_drop(4, kind)
    scene.integrator = integrator
    sim = fc.Simulator(scene)
    both = _ExactAndReused(sim.model, {**scene.solver_options, "rel_tol": rel_tol}, kind)
    sim.contact_solver = both
    sim.run(duration=duration)
    return both


@pytest.mark.parametrize("rel_tol, kind, integrator", [
    (1e-6, "lagged", "euler"), (1e-9, "lagged", "euler"), (1e-6, "sap", "midpoint"),
])
def test_factor_reuse_agrees_with_the_exact_path_within_the_tolerance(rel_tol, kind, integrator):
    """Agreement: on the soft cube dropped onto the ground (impact, rebound, rest), every contact step
    solved with an earlier step's factor converges on its own problem (e_m ≤ ε_r) to the exact path's
    v̂ within the tolerance, ‖Δv̂‖ ≤ 5 ε_r max(‖v̂‖, |g| dt √n) (the second term: e_m's momentum scale
    at rest, the weight's impulse per DOF), at ε_r = 1e-6 and again at 1e-9 (the same answer to the
    tolerance, not merely a close one), under Lagged and SAP; the factor was reused (under Lagged
    on most steps), with restarts."""
    both = _reuse_run(rel_tol, kind, integrator)
    solver = both.schur.schur
    steps = len(both.records)
    assert steps >= 15
    assert solver.factorizations < steps and len(solver.restarts) >= steps - solver.factorizations
    if kind == "lagged":                              # (measured: 3 and 5 of 21; SAP under the midpoint rule 10 of 17)
        assert solver.factorizations <= steps // 3
    assert max(solver.restarts) >= 1                  # Ã changed between steps: the restarts did work
    for v_ref, v_r, st, st_r in both.records:
        assert st_r.converged and st.converged
        assert st_r.extra["momentum_error"] <= rel_tol
        scale = max(np.linalg.norm(v_ref), 9.81 * 1e-2 * np.sqrt(v_ref.size))
        assert np.linalg.norm(v_r - v_ref) <= 5 * rel_tol * scale


def test_factor_reuse_option_is_checked():
    """Bad input: option factor_reuse takes True or False only."""
    import femcontact as fc
    from femcontact.bench.cases import cube_drop
    from femcontact.errors import ParameterError
    from femcontact.solvers.sap import NewtonContactSolver

    sim = fc.Simulator(cube_drop(2, "lagged"))
    with pytest.raises(ParameterError, match="factor_reuse"):
        NewtonContactSolver(sim.model, {"linear_solver": "schur", "factor_reuse": "yes"}, "lagged")
    solver = NewtonContactSolver(sim.model, {"linear_solver": "schur", "factor_reuse": True}, "lagged")
    assert solver.schur.reuse and not NewtonContactSolver(sim.model, {"linear_solver": "schur"}, "lagged").schur.reuse
