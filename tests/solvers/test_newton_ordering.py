"""The fill-reducing ordering of the Newton path's CHOLMOD solves (newton_linear: METIS nested
dissection through pymetis, AMD without it) and the symbolic analysis kept across contact changes."""
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from femcontact.solvers import newton_linear as nl

pytest.importorskip("cvxopt")
RNG = np.random.default_rng(14)


def _grid_spd(k: int) -> sp.csc_matrix:
    """An SPD matrix with the 3x3 node-block pattern of a k x k x k grid (27-point stencil), like Ã."""
    idx = np.arange(k ** 3).reshape(k, k, k)
    rows, cols = [], []
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            for dz in (-1, 0, 1):
                a = idx[max(0, -dx):k - max(0, dx), max(0, -dy):k - max(0, dy), max(0, -dz):k - max(0, dz)]
                b = idx[max(0, dx):k - max(0, -dx) or None, max(0, dy):k - max(0, -dy) or None,
                        max(0, dz):k - max(0, -dz) or None]
                rows.append(a.ravel())
                cols.append(b.ravel())
    nb = sp.csr_matrix((np.ones(sum(len(r) for r in rows)), (np.concatenate(rows), np.concatenate(cols))),
                       shape=(k ** 3, k ** 3))
    nb.sum_duplicates()
    M = sp.kron(nb, np.ones((3, 3))).tocsr()
    M.data = RNG.normal(size=M.nnz)
    M = M + M.T
    return (M + sp.diags(np.abs(M).sum(axis=1).A1 + 1.0)).tocsc()    # diagonally dominant: SPD


def _nnz_factor(solver: nl.CholmodSolver, H: sp.csc_matrix) -> int:
    from cvxopt import cholmod
    F = solver.factorize(H)._F
    return len(cholmod.getfactor(F))           # consumes the numeric factor: call last


def test_metis_ordering_solves_and_reduces_fill():
    """With METIS nested dissection the factor solves H x = r to round-off, and on a 3D grid its
    factor has less fill than AMD's (a check that pymetis's ``perm`` is CHOLMOD's permutation: the
    inverse gives several times AMD's fill)."""
    pytest.importorskip("pymetis")
    H = _grid_spd(12)                          # 5,184 unknowns
    r = RNG.normal(size=H.shape[0])
    solver = nl.CholmodSolver("metis")
    x = solver.solve(H, r)
    assert solver.ordering_used == "metis"
    assert np.linalg.norm(H @ x - r) <= 1e-10 * np.linalg.norm(r)
    R = RNG.normal(size=(H.shape[0], 3))       # several right-hand sides, same factor
    X = solver.factorize(H).solve(R)
    assert np.linalg.norm(H @ X - R) <= 1e-10 * np.linalg.norm(R)
    assert solver.analyses == 1                # same pattern: analysis reused
    amd = nl.CholmodSolver("amd")
    assert amd.ordering == "amd"
    assert _nnz_factor(nl.CholmodSolver("metis"), H) < _nnz_factor(amd, H)
    assert amd.ordering_used == "amd"
    from cvxopt import cholmod
    assert "nmethods" not in cholmod.options   # the global CHOLMOD options are left as found


def test_auto_ordering_uses_metis_only_from_the_size_threshold():
    pytest.importorskip("pymetis")
    small = _grid_spd(4)
    solver = nl.CholmodSolver()
    solver.solve(small, np.ones(small.shape[0]))
    assert small.shape[0] < nl.METIS_MIN_DOFS and solver.ordering_used == "amd"
    big = _grid_spd(12)
    assert big.shape[0] >= nl.METIS_MIN_DOFS
    x = solver.solve(big, np.ones(big.shape[0]))
    assert solver.ordering_used == "metis" and solver.analyses == 2
    assert np.linalg.norm(big @ x - 1.0) <= 1e-10 * np.sqrt(big.shape[0])


def test_falls_back_to_amd_without_pymetis(monkeypatch):
    """No pymetis: no error, CHOLMOD's AMD, the same solution."""
    monkeypatch.setitem(sys.modules, "pymetis", None)          # import pymetis -> ImportError
    assert not nl.metis_available()
    H = _grid_spd(6)
    r = RNG.normal(size=H.shape[0])
    L, cols = nl._lower_csc(H)
    assert nl.nested_dissection(L, cols) is None
    solver = nl.CholmodSolver("metis")
    x = solver.solve(H, r)
    assert solver.ordering_used == "amd"
    assert np.linalg.norm(H @ x - r) <= 1e-10 * np.linalg.norm(r)


def test_unknown_ordering_is_an_error():
    from femcontact.errors import ParameterError
    with pytest.raises(ParameterError):
        nl.CholmodSolver("nd")


@pytest.mark.parametrize("ordering", ["amd", "metis"])
def test_analysis_is_kept_when_only_the_contacts_change(ordering):
    """NewtonMatrix keeps its key (so CHOLMOD its ordering and analysis) when a new contact set gives
    H the same pattern, e.g. one contact per node against the ground, contacts reordered; the
    Newton solve still solves the new H."""
    if ordering == "metis":
        pytest.importorskip("pymetis")
    A = _grid_spd(5)
    nn = A.shape[0] // 3
    solver = nl.CholmodSolver(ordering)
    H = nl.NewtonMatrix()
    keys = []
    for seed in range(3):
        nodes = np.random.default_rng(seed).permutation(nn)[:20]        # one node per contact
        c = len(nodes)
        R = np.linalg.qr(RNG.normal(size=(c, 3, 3)))[0]
        J = sp.bsr_matrix((R, nodes, np.arange(c + 1)), shape=(3 * c, 3 * nn)).tocsr()
        H.setup(A, J)
        keys.append(H.key)
        G = RNG.normal(size=(c, 3, 3))
        G = G @ G.transpose(0, 2, 1)
        ref = (A + J.T @ sp.block_diag(list(G)) @ J).tocsc()
        r = RNG.normal(size=3 * nn)
        x = nl.solve_newton(solver, H, G, r)
        assert np.linalg.norm(ref @ x - r) <= 1e-10 * np.linalg.norm(r)
    assert keys == [1, 1, 1] and solver.analyses == 1
    assert solver.ordering_used == ordering


def test_metis_and_amd_give_the_same_cube_drop_within_round_off():
    """The ordering changes only the round-off: a soft cube landing on the ground under Lagged with
    METIS and with AMD ends at the same positions (to 1e-9 of its size) with the same Newton
    iteration counts."""
    pytest.importorskip("pymetis")
    import femcontact as fc

    def run(ordering):
        scene = fc.Scene(dt=1e-2, solver="lagged", integrator="euler")
        scene.add_fem_body(fc.meshes.box(size=(0.1, 0.1, 0.1), resolution=4, center=(0.0, 0.0, 0.0505)),
                           material=fc.Material(youngs_modulus=1e5, poisson_ratio=0.4, density=1000.0))
        scene.add_obstacle(fc.shapes.HalfSpace(normal=(0.0, 0.0, 1.0)), friction=0.5)
        sim = fc.Simulator(scene)
        sim.contact_solver.linear.ordering = ordering
        its = []
        for _ in range(8):
            sim.step()
            its.append(sim.contact_solver.last_stats.iterations if sim.contact_solver.last_stats else 0)
        return sim.state.x.to_numpy()[:sim.model.n_nodes], its, sim.contact_solver.linear.ordering_used

    x_amd, it_amd, used_amd = run("amd")
    x_nd, it_nd, used_nd = run("metis")
    assert (used_amd, used_nd) == ("amd", "metis")
    assert sum(it_amd) > 8                      # contact steps were solved
    assert it_amd == it_nd
    assert np.abs(x_nd - x_amd).max() <= 1e-9 * 0.1


def test_ordering_from_the_block_pattern_equals_the_one_read_off_the_matrix():
    """NewtonMatrix hands its 3x3 block pattern to the ordering (no graph built from H's entries):
    the same graph, so the same METIS permutation."""
    pytest.importorskip("pymetis")
    A = _grid_spd(5)
    L, cols = nl._lower_csc(A)
    B = sp.bsr_matrix(A, blocksize=(3, 3))
    B.sort_indices()
    p_blocks = nl.nested_dissection(L, cols, blocks=(B.indptr, B.indices))
    p_matrix = nl.nested_dissection(L, cols)
    assert np.array_equal(np.sort(p_matrix), np.arange(A.shape[0]))
    assert np.array_equal(p_blocks, p_matrix)
