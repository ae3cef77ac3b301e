"""Linear solves ``H Δv = r`` of the Newton path (H = A + Jᵀ G J, symmetric positive definite).

One small interface, ``solver.solve(H, r) -> x`` with ``H`` a scipy sparse matrix and ``r`` a
float64 vector, so a GPU/Taichi implementation can replace it later. Implementations:

- ``"cholmod"``: supernodal sparse Cholesky from SuiteSparse CHOLMOD through **cvxopt**
  (``cvxopt.cholmod``). cvxopt ships manylinux wheels with CHOLMOD built in, so it installs
  from PyPI without a system SuiteSparse. ``scikit-sparse`` (the usual CHOLMOD binding) only
  has a source distribution on PyPI (checked: ``pip download --no-deps scikit-sparse`` gives
  ``scikit_sparse-0.5.0.tar.gz``) and needs SuiteSparse headers that are not installed here.
  The symbolic analysis (fill-reducing ordering, supernodes) is cached and reused while the
  sparsity pattern of ``H`` stays the same (all Newton iterations of a step, and later steps
  whose contacts give ``H`` the same pattern). Fill-reducing ordering: cvxopt's CHOLMOD is built
  without METIS, so from ``METIS_MIN_DOFS`` unknowns on the ordering is METIS nested dissection
  (``METIS_NodeND``, Karypis & Kumar 1998) computed through **pymetis** on the graph of 3x3 node
  blocks and handed to ``cholmod.symbolic(A, p)`` (``nested_dissection``); without pymetis, or
  below that size, CHOLMOD's own AMD. Optional dependency: ``pip install cvxopt`` (``pymetis``
  for the ordering: the ``fast`` extra).
- ``"splu"``: SciPy's SuperLU (``scipy.sparse.linalg.splu``) with a symmetric-mode setup
  (``MMD_AT_PLUS_A`` ordering, no pivoting threshold). Always available; an LU does about
  twice the work of a Cholesky and cannot reuse the analysis, but it needs nothing beyond SciPy.
- ``"pcg"`` (``newton_pcg``): conjugate gradients with a 3x3 block-Jacobi preconditioner in kernels,
  H applied matrix-free on the device (the GPU form, like Genesis' SAP), warm-started from the
  previous Newton direction; stops at ``‖r‖ ≤ rtol ‖rhs‖`` (rtol 1e-10).

- ``"schur"`` (``newton_schur``): one factorization of Ã per step and Newton on the contact DOFs'
  Schur complement; the Newton loop runs it (``sap.py``), this module gives it its full-H fallback.

``make_newton_linear_solver("auto", n_dofs, arch)``: a direct solver (cholmod if importable, else
splu) up to ``DIRECT_MAX_DOFS`` unknowns, PCG above (direct fill grows superlinearly for 3D
meshes, PCG memory stays linear); on a GPU backend PCG from ``PCG_MIN_DOFS_GPU`` unknowns (the
matrix stays on the device; a host factorization would read it back and factor it every Newton
iteration).

``NewtonMatrix`` assembles ``H = Ã + Jᵀ G J`` for all Newton iterations of a step into one fixed
pattern of 3x3 node blocks, built once per step (and kept while Ã's and J's patterns repeat), so
an iteration costs batched 3x3 products and one gather instead of two general sparse matrix
products and a format conversion; ``solve_newton``
hands the lower triangle to CHOLMOD directly (the symbolic analysis kept while the pattern is
the same) and the full matrix to the others.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import scipy.sparse as sp

from ..errors import ParameterError, SimulationError

NEWTON_LINEAR_SOLVERS = ("auto", "direct", "cholmod", "splu", "pcg", "schur")
DIRECT_MAX_DOFS = 150_000
PCG_MIN_DOFS_GPU = 3000    # "auto" on a GPU backend: PCG in kernels from this many unknowns (provisional:
                           # the CPU's Schur threshold, until tools/gpu_check.sh measures the crossover)
ORDERINGS = ("auto", "metis", "amd")
METIS_MIN_DOFS = 5000      # "auto": METIS nested dissection from this many unknowns, AMD below


def cholmod_available() -> bool:
    try:
        from cvxopt import cholmod  # noqa: F401
    except ImportError:
        return False
    return True


def metis_available() -> bool:
    try:
        import pymetis  # noqa: F401
    except ImportError:
        return False
    return True


def nested_dissection(L: sp.csc_matrix, cols: np.ndarray, block: int = 3,
                      blocks: Optional[tuple[np.ndarray, np.ndarray]] = None) -> Optional[np.ndarray]:
    """METIS nested-dissection ordering (``METIS_NodeND`` through pymetis) of the symmetric matrix
    whose lower triangle is ``L`` (``cols``: the column of each entry), computed on the graph of its
    ``block`` x ``block`` node blocks (one vertex per node, so a node's DOFs stay together) and
    expanded to the DOFs. ``blocks`` = (indptr, indices): that block pattern (both triangles) where
    the caller has it, else it is read off ``L``. Returned as CHOLMOD's permutation (row k of P A Pᵀ
    is row p[k] of A, METIS's ``perm``); None when pymetis is not installed or the graph has no
    edges."""
    try:
        import pymetis
    except ImportError:
        return None
    n = L.shape[0]
    if block < 1 or n % block:
        block, blocks = 1, None
    nn = n // block
    if blocks is not None:
        indptr, indices = blocks
        r = np.repeat(np.arange(nn), np.diff(indptr))
        off = r != indices
        r, c = r[off], np.asarray(indices)[off]
    else:
        r, c = L.indices // block, np.asarray(cols) // block
        key = np.unique(c.astype(np.int64) * nn + r)          # one lower-triangle pair per block
        key = key[key // nn != key % nn]
        r, c = key % nn, key // nn
        r, c = np.concatenate([r, c]), np.concatenate([c, r])
    if nn < 2 or len(r) == 0:
        return None
    order = np.lexsort((c, r))                                  # CSR adjacency (both directions)
    adj_starts = np.zeros(nn + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=nn), out=adj_starts[1:])
    perm, _ = pymetis.nested_dissection(pymetis.CSRAdjacency(adj_starts, np.asarray(c)[order]))
    q = np.array(perm).astype(np.int64)         # C long ('l'): what cvxopt's int matrices take
    return (block * q[:, None] + np.arange(block, dtype=np.int64)).ravel()


def make_newton_linear_solver(kind: str = "auto", n_dofs: int = 0, arch: str = "cpu", **options):
    """A linear solver for the Newton system: "auto", "direct", "cholmod", "splu" or "pcg" ("schur":
    the direct one, for the steps ``newton_schur`` leaves to the full H); ``arch``: the backend's
    architecture ("auto" takes PCG on a GPU from ``PCG_MIN_DOFS_GPU`` unknowns); ``options``: PCG's."""
    if kind not in NEWTON_LINEAR_SOLVERS:
        raise ParameterError(f"unknown Newton linear solver {kind!r}; choose one of "
                             f"{', '.join(NEWTON_LINEAR_SOLVERS)}")
    if kind == "auto":
        pcg = n_dofs > DIRECT_MAX_DOFS or (arch != "cpu" and n_dofs >= PCG_MIN_DOFS_GPU)
        kind = "pcg" if pcg else "direct"
    if kind in ("direct", "schur"):     # "schur" (newton_schur): this is its full-H path, for steps without contact DOFs
        kind = "cholmod" if cholmod_available() else "splu"
    if kind == "cholmod":
        if not cholmod_available():
            raise ParameterError("linear solver 'cholmod' needs cvxopt (pip install cvxopt); "
                                 "or use 'splu' / 'auto'")
        return CholmodSolver()
    if kind == "splu":
        return SuperLUSolver()
    from .newton_pcg import NewtonPCG      # kernels: declared where first needed
    return NewtonPCG(**options)


class CholmodSolver:
    """Supernodal Cholesky (CHOLMOD via cvxopt) with the ordering and symbolic analysis cached per
    pattern. ``ordering``: "auto" (METIS nested dissection from ``METIS_MIN_DOFS`` unknowns when
    pymetis is installed, else AMD), "metis" (nested dissection at any size, AMD without pymetis)
    or "amd" (CHOLMOD's default)."""

    name = "cholmod"

    def __init__(self, ordering: str = "auto"):
        from cvxopt import cholmod

        if ordering not in ORDERINGS:
            raise ParameterError(f"unknown ordering {ordering!r}; choose one of {', '.join(ORDERINGS)}")
        self._cholmod = cholmod
        cholmod.options["supernodal"] = 2   # always supernodal
        self.ordering = ordering
        self.ordering_used = None  # "metis" or "amd": the current pattern's ordering
        self.analyses = 0          # symbolic analyses done (one per pattern change)
        self._key = None
        self._symbolic = None
        self._matrix = None        # the cvxopt matrix of the current pattern (values replaced)

    def solve(self, H: sp.spmatrix, r: np.ndarray) -> np.ndarray:
        return self.factorize(H).solve(r)

    def factorize(self, H: sp.spmatrix) -> "CholmodFactor":
        """The numeric factorization of ``H`` (symbolic analysis reused while the pattern is the
        same), for solves with one or many right-hand sides (``CholmodFactor.solve``)."""
        L, cols = _lower_csc(H)
        key = (L.shape[0], L.nnz, hash(L.indices.tobytes()), hash(L.indptr.tobytes()))
        return self.factorize_lower(L, cols, key)

    def factorize_lower(self, L: sp.csc_matrix, cols: np.ndarray, key,
                        blocks: Optional[tuple[np.ndarray, np.ndarray]] = None) -> "CholmodFactor":
        """Factorize from the lower triangle ``L`` (sorted CSC) with ``cols`` the column of each
        entry; ``key`` names the pattern (the symbolic analysis is redone when it changes);
        ``blocks``: the 3x3 node-block pattern (indptr, indices) for the ordering, if known."""
        from cvxopt import matrix, spmatrix

        values = matrix(np.ascontiguousarray(L.data, dtype=np.float64))
        if key != self._key:
            # index arrays handed over as cvxopt int matrices (buffer copies), not Python lists;
            # built once per pattern (ones: no entry dropped), the values set through ``V``
            self._matrix = spmatrix(matrix(np.ones(L.nnz)), matrix(L.indices.astype(np.int64)),
                                    matrix(cols.astype(np.int64)), L.shape)
        Hc = self._matrix
        Hc.V = values
        try:
            if key != self._key:
                self._symbolic = self._analyze(Hc, L, cols, blocks)
                self._key = key
            F = self._symbolic
            self._cholmod.numeric(Hc, F)
        except ArithmeticError as exc:
            raise SimulationError(f"Newton matrix is not positive definite (CHOLMOD: {exc})") from None
        return CholmodFactor(self._cholmod, F)

    def _analyze(self, Hc, L: sp.csc_matrix, cols: np.ndarray, blocks=None):
        """CHOLMOD's symbolic analysis of ``Hc`` with the ordering chosen by ``self.ordering``."""
        from cvxopt import matrix

        p = None
        if self.ordering == "metis" or (self.ordering == "auto" and L.shape[0] >= METIS_MIN_DOFS):
            p = nested_dissection(L, cols, blocks=blocks)
        self.analyses += 1
        self.ordering_used = "amd" if p is None else "metis"
        if p is None:
            return self._cholmod.symbolic(Hc, uplo="L")
        opts = self._cholmod.options
        saved = opts.get("nmethods")
        opts["nmethods"] = 1               # the given ordering only (no AMD run to compare with)
        try:
            return self._cholmod.symbolic(Hc, p=matrix(p), uplo="L")
        finally:
            if saved is None:
                opts.pop("nmethods", None)
            else:
                opts["nmethods"] = saved


class CholmodFactor:
    """A CHOLMOD factorization: ``solve(R)`` for R of shape (n,) or (n, k)."""

    def __init__(self, cholmod, F):
        self._cholmod, self._F = cholmod, F

    def solve(self, R: np.ndarray) -> np.ndarray:
        from cvxopt import matrix

        R = np.asarray(R, dtype=np.float64)
        if R.ndim == 2 and R.shape[1] == 0:
            return R.copy()
        x = matrix(np.asfortranarray(R) if R.ndim == 2 else np.ascontiguousarray(R))
        self._cholmod.solve(self._F, x)
        out = np.array(x)
        return out.ravel() if R.ndim == 1 else out.reshape(R.shape)


def _lower_csc(H: sp.spmatrix):
    """(lower triangle of H as sorted CSC, column index of each entry): the same entries as
    ``sp.tril(H, format="csc")`` with sorted indices, by one mask over H's CSC arrays instead of
    scipy's COO round trip (which dominated the call for a few thousand DOF)."""
    C = H.tocsc() if H.format != "csc" else H
    if not C.has_sorted_indices:
        C = C.copy()
        C.sort_indices()
    n = C.shape[1]
    col = np.repeat(np.arange(n), np.diff(C.indptr))
    keep = C.indices >= col
    indptr = np.zeros(n + 1, dtype=C.indptr.dtype)
    np.cumsum(np.bincount(col[keep], minlength=n), out=indptr[1:])
    L = sp.csc_matrix((C.data[keep], C.indices[keep], indptr), shape=C.shape)
    L.has_sorted_indices = True
    return L, col[keep]


class NewtonMatrix:
    """``H = Ã + Jᵀ G J`` (G block diagonal, 3x3 per contact) in a fixed pattern of 3x3 node blocks.

    ``setup(At, J)`` once per step: the block pattern of H (Ã's blocks and, for each contact m,
    every pair of its node blocks in J), the pairs' positions in it, and the permutation that
    takes the block values to the lower triangle of H in sorted CSC order; this index work is
    kept while Ã's and J's block patterns repeat (later steps with the same contact structure).
    Per Newton iteration (``lower(G)`` / ``full(G)``): ``J_mᵀ G_m J_m`` per contact (batched
    products of its dense 3 x 3K block row, K its most node blocks), summed into the blocks by one
    ``bincount`` over a kept index, and one gather.

    ``At``: scipy sparse, or Ã's block form ``(indptr, indices, blocks)`` (block CSR, sorted);
    ``J``: scipy sparse, or ``newton_dense.ContactRows`` (J in per-contact block rows)."""

    def __init__(self):
        self.key = 0               # changes whenever the pattern of H changes (not when only J's does)
        self._pattern = None       # block patterns of (Ã, J) of the cached map
        self._map = None

    def setup(self, At, J) -> None:
        Ab = _BlockCSR.of(At)
        Jb = _BlockCSR.of(J)
        pattern = (Ab.indptr, Ab.indices, Jb.indptr, Jb.indices)
        if self._pattern is None or any(a.shape != b.shape or not np.array_equal(a, b)
                                        for a, b in zip(pattern, self._pattern)):
            old = self._map
            self._build(Ab, Jb)
            self._pattern = tuple(a.copy() for a in pattern)
            m = self._map
            if old is None or not (np.array_equal(old["indptr"], m["indptr"])
                                   and np.array_equal(old["indices"], m["indices"])):
                self.key += 1      # H's pattern changed (not only J's): a new symbolic analysis
        m = self._map
        self._base = np.zeros((m["nb"], 3, 3))
        self._base[m["a_slot"]] = Ab.data
        # each contact's rows of J as a dense 3 x 3K block row (its K node blocks, zero-padded)
        c, K = m["c"], m["K"]
        Jd = np.zeros((c, 3, K, 3))
        Jd[m["contact"], :, m["q"], :] = Jb.data
        self._Jd = Jd.reshape(c, 3, 3 * K)
        self._JdT = np.ascontiguousarray(self._Jd.transpose(0, 2, 1))

    def _build(self, Ab: "_BlockCSR", Jb: "_BlockCSR") -> None:
        nn = len(Ab.indptr) - 1
        a_row = np.repeat(np.arange(nn), np.diff(Ab.indptr))
        a_key = a_row.astype(np.int64) * nn + Ab.indices
        # pairs (b1, b2) of node blocks of one contact, both orders; q: a block's place in its contact
        c = len(Jb.indptr) - 1
        contact = np.repeat(np.arange(c), np.diff(Jb.indptr))
        q = np.arange(len(contact)) - Jb.indptr[contact]
        K = max(int(np.diff(Jb.indptr).max(initial=0)), 1)
        per = np.diff(Jb.indptr)[contact]
        b1 = np.repeat(np.arange(len(contact)), per)
        offset = np.arange(len(b1)) - np.repeat(np.cumsum(per) - per, per)
        b2 = Jb.indptr[contact[b1]] + offset
        p_key = Jb.indices[b1].astype(np.int64) * nn + Jb.indices[b2]
        keys = np.union1d(a_key, p_key)                  # block CSR order (row, col)
        rows = keys // nn
        indptr = np.zeros(nn + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=nn), out=indptr[1:])
        indices = keys % nn
        p_slot = np.searchsorted(keys, p_key)
        # where entry (i, j) of contact m's J_mᵀ G_m J_m (laid out (c, 3K, 3K)) lands in the flat block
        # data of H; the zero-padded slots of a contact with fewer than K blocks go to a spare block
        nb = len(keys)
        slot = np.full((c, K, K), nb, dtype=np.int64)
        slot[contact[b1], q[b1], q[b2]] = p_slot
        scatter = (9 * slot[:, :, None, :, None] + 3 * np.arange(3)[:, None, None] + np.arange(3))
        # the entry of the flat block data behind each entry of H's lower triangle (sorted CSC)
        tag = sp.bsr_matrix((np.arange(1, 9 * nb + 1, dtype=np.float64).reshape(nb, 3, 3), indices, indptr),
                            shape=(3 * nn, 3 * nn))
        L, cols = _lower_csc(tag.tocsc())
        self._map = {"nb": nb, "a_slot": np.searchsorted(keys, a_key), "c": c, "K": K, "contact": contact, "q": q,
                     "scatter": scatter.reshape(c, 3 * K, 3 * K).ravel(), "indptr": indptr, "indices": indices,
                     "perm": L.data.astype(np.int64) - 1, "l_indices": L.indices, "l_indptr": L.indptr,
                     "cols": cols, "n": 3 * nn}

    def _blocks(self, G: np.ndarray) -> np.ndarray:
        m = self._map
        Hm = self._JdT @ (G @ self._Jd)                                # J_mᵀ G_m J_m, (c, 3K, 3K)
        summed = np.bincount(m["scatter"], Hm.ravel(), minlength=9 * (m["nb"] + 1))[:9 * m["nb"]]
        return self._base + summed.reshape(-1, 3, 3)

    def lower(self, G: np.ndarray) -> sp.csc_matrix:
        """The lower triangle of H (sorted CSC) for the blocks G (c, 3, 3): one matrix per pattern whose
        values each call replaces (valid until the next call)."""
        m = self._map
        data = self._blocks(G).ravel()[m["perm"]]
        L = m.get("lower")
        if L is None:        # built once per pattern; later iterations only swap the values in
            L = m["lower"] = sp.csc_matrix((data, m["l_indices"], m["l_indptr"]), shape=(m["n"], m["n"]))
            L.has_sorted_indices = True
        L.data = data
        return L

    def full(self, G: np.ndarray) -> sp.csc_matrix:
        """H (both triangles, CSC) for the blocks G (c, 3, 3)."""
        m = self._map
        return sp.bsr_matrix((self._blocks(G), m["indices"], m["indptr"]), shape=(m["n"], m["n"])).tocsc()

    @property
    def block_pattern(self) -> tuple[np.ndarray, np.ndarray]:
        """(indptr, indices) of H's 3x3 node blocks (block CSR, both triangles)."""
        return self._map["indptr"], self._map["indices"]

    @property
    def cols(self) -> np.ndarray:
        """The column of each entry of ``lower``'s matrix."""
        return self._map["cols"]


class _BlockCSR:
    """A matrix's 3x3 block CSR arrays (indptr, indices, data), sorted within rows."""

    def __init__(self, indptr, indices, data):
        self.indptr, self.indices, self.data = indptr, indices, data
        self.indices = np.asarray(indices)

    @classmethod
    def of(cls, M) -> "_BlockCSR":
        """From scipy sparse, ``(indptr, indices, blocks)`` or a ``newton_dense.ContactRows``."""
        if isinstance(M, tuple):
            return cls(*M)
        if hasattr(M, "valid"):                  # ContactRows: its slots in use, in node order
            count = M.valid.sum(axis=1)
            indptr = np.zeros(len(count) + 1, dtype=np.int64)
            np.cumsum(count, out=indptr[1:])
            return cls(indptr, M.nodes[M.valid], M.blocks[M.valid])
        B = sp.bsr_matrix(M, blocksize=(3, 3))
        if not B.has_sorted_indices:
            B.sort_indices()
        return cls(B.indptr, B.indices, B.data)


def solve_newton(solver, H: NewtonMatrix, G: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Solve ``H(G) x = r`` with ``solver`` (CHOLMOD from the lower triangle, the others from the
    full matrix)."""
    if isinstance(solver, CholmodSolver):
        return solver.factorize_lower(H.lower(G), H.cols, ("newton", id(H), H.key), H.block_pattern).solve(r)
    return solver.solve(H.full(G), r)


class SuperLUSolver:
    """SciPy SuperLU in symmetric mode."""

    name = "splu"

    def solve(self, H: sp.spmatrix, r: np.ndarray) -> np.ndarray:
        return self.factorize(H).solve(np.asarray(r, dtype=np.float64))

    def factorize(self, H: sp.spmatrix):
        """SuperLU's factorization of ``H``; its ``solve(R)`` takes R of shape (n,) or (n, k)."""
        import scipy.sparse.linalg as spla     # with scipy.linalg ~0.3 s of start-up: imported where used
        return spla.splu(sp.csc_matrix(H), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                         options={"SymmetricMode": True})
