"""Linear corotational FEM on tetrahedra (docs/THEORY.md §2; COND eq. 7-9 constraint form).

Per element with rest shape matrix D_m and current D_s: F = D_s D_m^-1, R the
rotation of the polar decomposition of F (from the SVD, sign-corrected so that
inverted elements still give a proper rotation), small strain in the rotated
frame eps = sym(R^T F) - I, stress sigma = 2 mu eps + lam tr(eps) I.
Elastic force on node a: f_a = -V R sigma g_a (equal to -R K0 (R^T x - X)),
stiffness block K_ab = R K0_ab R^T with
K0_ab = V (lam g_a g_b^T + mu g_b g_a^T + mu (g_a . g_b) I),
g_a the gradient of the linear shape function of node a.
"""
from .. import backend
from ..backend import ti
from ..math.smallmat import mm, mmT, mTm, mv


@ti.func
def shape_gradients(dm_inv):
    """Gradients g_0..g_3 of the linear shape functions (rows of D_m^-T)."""
    g1 = ti.Vector([dm_inv[0, 0], dm_inv[0, 1], dm_inv[0, 2]])
    g2 = ti.Vector([dm_inv[1, 0], dm_inv[1, 1], dm_inv[1, 2]])
    g3 = ti.Vector([dm_inv[2, 0], dm_inv[2, 1], dm_inv[2, 2]])
    return -(g1 + g2 + g3), g1, g2, g3


@ti.func
def rotation_of(F):
    """Rotation factor of the polar decomposition F = R S, det R = +1 even for inverted F."""
    U, S, V = ti.svd(F)
    R = mmT(U, V)
    if R.determinant() < 0:
        U[0, 2] *= -1.0
        U[1, 2] *= -1.0
        U[2, 2] *= -1.0
        R = mmT(U, V)
    return R


@ti.func
def deformation_gradient(x: ti.template(), tet, dm_inv):
    ds = ti.Matrix.cols([x[tet[1]] - x[tet[0]], x[tet[2]] - x[tet[0]], x[tet[3]] - x[tet[0]]])
    return mm(ds, dm_inv)


@ti.func
def corotated_stress(F, R, mu, lam):
    """Small-strain stress in the rotated frame: sigma = 2 mu eps + lam tr(eps) I."""
    eps = 0.5 * (mTm(R, F) + mTm(F, R)) - ti.Matrix.identity(float, 3)
    return 2.0 * mu * eps + lam * eps.trace() * ti.Matrix.identity(float, 3), eps


@ti.kernel
def assemble_elastic(x: ti.types.ndarray(), tets: ti.types.ndarray(), dm_inv: ti.types.ndarray(),
                     vol: ti.types.ndarray(), mu: ti.types.ndarray(), lam: ti.types.ndarray(),
                     beta: ti.types.ndarray(), blk: ti.types.ndarray(), blocks: ti.types.ndarray(),
                     b: ti.types.ndarray(), k_coef: float, k_beta_coef: float, f_coef: float):
    """Add (k_coef + k_beta_coef * beta_e) K_e to A and f_coef * f_el to b for every tet."""
    for e in range(tets.shape[0]):
        tet = tets[e]
        Dinv = dm_inv[e]
        F = deformation_gradient(x, tet, Dinv)
        R = rotation_of(F)
        sigma, eps = corotated_stress(F, R, mu[e], lam[e])
        g0, g1, g2, g3 = shape_gradients(Dinv)
        P = vol[e] * mm(R, sigma)
        f_c = -f_coef
        b[tet[0]] += f_c * mv(P, g0)
        b[tet[1]] += f_c * mv(P, g1)
        b[tet[2]] += f_c * mv(P, g2)
        b[tet[3]] += f_c * mv(P, g3)
        # R K0_ab Rᵀ = lam h_a h_bᵀ + mu h_b h_aᵀ + mu (g_a·g_b) I with h = R g: rotated gradients
        # instead of two 3x3 products per block (the same blocks, a fraction of the front-end time)
        c = vol[e] * (k_coef + k_beta_coef * beta[e])
        G = ti.Matrix.cols([g0, g1, g2, g3])
        H = mm(R, G)
        GtG = mTm(G, G)
        lam_c, mu_c = c * lam[e], c * mu[e]
        for ab in range(16):
            a, bb = ab // 4, ab % 4
            ha = ti.Vector([H[0, a], H[1, a], H[2, a]])
            hb = ti.Vector([H[0, bb], H[1, bb], H[2, bb]])
            blocks[blk[e, ab]] += lam_c * ha.outer_product(hb) + mu_c * hb.outer_product(ha) \
                + (mu_c * GtG[a, bb]) * ti.Matrix.identity(float, 3)


@ti.kernel
def elastic_forces(x: ti.types.ndarray(), tets: ti.types.ndarray(), dm_inv: ti.types.ndarray(),
                   vol: ti.types.ndarray(), mu: ti.types.ndarray(), lam: ti.types.ndarray(),
                   f: ti.types.ndarray()):
    """f += elastic nodal forces (N) of all tets."""
    for e in range(tets.shape[0]):
        tet = tets[e]
        F = deformation_gradient(x, tet, dm_inv[e])
        R = rotation_of(F)
        sigma, eps = corotated_stress(F, R, mu[e], lam[e])
        g0, g1, g2, g3 = shape_gradients(dm_inv[e])
        P = vol[e] * mm(R, sigma)
        f[tet[0]] += -mv(P, g0)
        f[tet[1]] += -mv(P, g1)
        f[tet[2]] += -mv(P, g2)
        f[tet[3]] += -mv(P, g3)


@ti.kernel
def stress_and_energy(x: ti.types.ndarray(), tets: ti.types.ndarray(), dm_inv: ti.types.ndarray(),
                      vol: ti.types.ndarray(), mu: ti.types.ndarray(), lam: ti.types.ndarray(),
                      von_mises: ti.types.ndarray()) -> float:
    """``von_mises[e]``: the von Mises equivalent of element e's corotated Cauchy stress, Pa; returns the
    total corotated linear-elastic energy V (mu eps:eps + lam/2 tr(eps)^2), J. One kernel for both (the
    energy monitor's and the output's): the polar decomposition (``ti.svd``) is most of its compile time."""
    total = 0.0
    for e in range(tets.shape[0]):
        F = deformation_gradient(x, tets[e], dm_inv[e])
        R = rotation_of(F)
        sigma, eps = corotated_stress(F, R, mu[e], lam[e])
        total += vol[e] * (mu[e] * (eps * eps).sum() + 0.5 * lam[e] * eps.trace() ** 2)
        s = sigma - sigma.trace() / 3.0 * ti.Matrix.identity(float, 3)
        von_mises[e] = ti.sqrt(1.5 * (s * s).sum())
    return total


class FemSystem:
    """The FEM elements of a Model as a body system (``bodies/system.py``): corotated elastic forces,
    stiffness and Rayleigh stiffness damping of every tet."""

    def __init__(self, model):
        self.model = model
        self._von_mises = None          # stress_and_energy's per-element output, allocated at first use

    def assemble(self, state, control, A, b, coef, t: float, dt: float) -> None:
        m = self.model
        assemble_elastic(state.x, m.tets, m.dm_inv, m.vol, m.mu, m.lam, m.beta, m.tet_blocks, A.blocks, b,
                         coef.a_k, coef.a_kb, coef.b_f)

    def after_advance(self, state) -> None:
        """Nothing follows from the positions."""

    def elastic_energy(self, state) -> float:
        m = self.model
        if self._von_mises is None:
            self._von_mises = backend.scalar_array(m.n_tets)
        return float(stress_and_energy(state.x, m.tets, m.dm_inv, m.vol, m.mu, m.lam, self._von_mises))
