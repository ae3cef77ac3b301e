"""Rigid bodies (docs/THEORY.md §2): mass properties, contact proxies and the rotational-block kernels.

A rigid body owns two DOF blocks of the global velocity vector: its centre-of-mass velocity
``v`` (a translational block, lumped mass ``m``) and its angular velocity ``ω`` in the world
frame (a *rotational* block). Rotational blocks (rigid bodies and, with the same kernels, rod
segments) carry a body-frame inertia ``I_b`` and an orientation quaternion ``q = (w, x, y, z)``
in the State; their world inertia is ``I_w = R I_bᵀ R``.

**Gyroscopic term.** The block alone obeys the integrator applied to Euler's equations in the
body frame, ``a_m I Ω̂ = b_m I Ω_k − b_f Ω̂ × I Ω̂`` (θ = ½ for the midpoint rule, 1 for implicit
Euler). ``assemble_rotational`` solves this 3x3 problem by Newton and adds ``a_m I_w`` to the
diagonal block of ``A`` and ``b_m I_w ω_k − b_f R (Ω̂ × I Ω̂)`` to ``b``, so a free body gets
exactly that solution while contacts and joints see the SPD block ``a_m I_w`` (the gyroscopic
coupling is lagged to the free solution).

**Rotation update.** ``advance_rotations`` turns the step's ω̂ into ``q ← cay(dt ω̂) ⊗ q`` (the
Cayley map, quaternion ∝ (1, dt ω̂/2)) and carries the end-of-step velocity with the body
(``ω ← cay(dt ω̂) ω``). With the implicit midpoint solve above this is the Lie–Poisson
midpoint scheme: a free body conserves its kinetic energy and its world angular momentum
exactly (to the Newton tolerance), near the unstable intermediate axis too.

(No ``from __future__ import annotations`` here: Taichi reads the annotations.)
"""
import numpy as np

from ..backend import ti
from ..contact import shapes as S
from ..errors import ParameterError
from ..smallmat import inv3, mm, mmT, mTv, mv

# contact proxy kinds (body frame): a sphere (radius 0: a point) and a circle (cylinder rims)
PROXY_SPHERE, PROXY_CIRCLE = 0, 1
# which obstacles a proxy is tested against
PROXY_ANY, PROXY_HALFSPACE_ONLY, PROXY_NOT_HALFSPACE = 0, 1, 2


# ---------------------------------------------------------------- mass properties (host)
def mass_properties(shape, density: float) -> tuple[float, np.ndarray, np.ndarray]:
    """(mass kg, centre of mass (3,) and inertia about it (3, 3), both in the shape frame)."""
    rho = float(density)
    if isinstance(shape, S.Box):
        hx, hy, hz = shape.half_extents
        m = rho * 8 * hx * hy * hz
        return m, np.zeros(3), m / 3 * np.diag([hy**2 + hz**2, hx**2 + hz**2, hx**2 + hy**2])
    if isinstance(shape, S.Sphere):
        r = shape.radius
        m = rho * 4 / 3 * np.pi * r**3
        return m, np.zeros(3), 0.4 * m * r * r * np.eye(3)
    if isinstance(shape, S.Cylinder):
        r, L = shape.radius, 2 * shape.half_length
        m = rho * np.pi * r * r * L
        ixx = m * (3 * r * r + L * L) / 12
        return m, np.zeros(3), np.diag([ixx, ixx, 0.5 * m * r * r])
    if isinstance(shape, S.Capsule):
        r, L = shape.radius, 2 * shape.half_length
        mc, ms = rho * np.pi * r * r * L, rho * 4 / 3 * np.pi * r**3
        izz = 0.5 * mc * r * r + 0.4 * ms * r * r
        ixx = mc * (L * L / 12 + r * r / 4) + ms * (0.4 * r * r + L * L / 4 + 3 * L * r / 8)
        return mc + ms, np.zeros(3), np.diag([ixx, ixx, izz])
    if isinstance(shape, S.TriangleMesh):
        return _mesh_mass_properties(shape.vertices, shape.faces, rho)
    if isinstance(shape, S.Compound):
        return _compound_mass_properties(shape, rho)
    raise ParameterError(f"a rigid body cannot have shape {type(shape).__name__} (it has no finite volume); "
                         "use Box, Sphere, Capsule, Cylinder or TriangleMesh")


def _compound_mass_properties(shape, rho: float):
    """Sum of the parts' mass properties (each rotated and moved into the compound's frame, inertia
    moved to the common centre of mass by the parallel-axis theorem); overlaps count once per part."""
    parts = []
    for part, t, R in shape.parts:
        m, c, I = mass_properties(part, rho)
        parts.append((m, t + R @ c, R @ I @ R.T))
    m = sum(p[0] for p in parts)
    com = sum(p[0] * p[1] for p in parts) / m
    inertia = np.zeros((3, 3))
    for mi, ci, Ii in parts:
        d = ci - com
        inertia += Ii + mi * (d @ d * np.eye(3) - np.outer(d, d))
    return m, com, inertia


def _outside_other_parts(shape, k: int, points: np.ndarray, radius: np.ndarray) -> np.ndarray:
    """Mask of compound part k's points (balls of ``radius``) not buried inside another part."""
    if len(shape.parts) == 1 or not len(points):
        return np.ones(len(points), bool)
    phi, _ = shape.part_sdf(points)
    phi[:, k] = np.inf
    return phi.min(1) >= -radius - 1e-9 * (1.0 + shape.bounding_radius())


def _mesh_mass_properties(v: np.ndarray, f: np.ndarray, rho: float):
    """Volume integrals of a closed outward surface by signed tets from the origin."""
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    det = np.einsum("ij,ij->i", a, np.cross(b, c))
    vol = det.sum() / 6.0
    if not vol > 0:
        raise ParameterError("rigid TriangleMesh has non-positive volume: is it closed and outward-oriented?")
    com = ((a + b + c) * det[:, None]).sum(0) / 24.0 / vol
    # second moment ∫ p pᵀ dV of each tet (0, a, b, c): det/120 (Σ_i p_i p_iᵀ + (Σ p_i)(Σ p_i)ᵀ)
    s = a + b + c
    C = (np.einsum("k,ki,kj->ij", det, a, a) + np.einsum("k,ki,kj->ij", det, b, b)
         + np.einsum("k,ki,kj->ij", det, c, c) + np.einsum("k,ki,kj->ij", det, s, s)) / 120.0
    C = rho * C - rho * vol * np.outer(com, com)        # about the centre of mass
    return rho * vol, com, np.trace(C) * np.eye(3) - C


def check_inertia(inertia, what: str) -> np.ndarray:
    """A symmetric positive-definite 3x3 inertia (diagonal (3,) accepted) satisfying the triangle
    inequality of principal moments, or a clear error."""
    I = np.asarray(inertia, float)
    if I.shape == (3,):
        I = np.diag(I)
    if I.shape != (3, 3) or not np.isfinite(I).all() or not np.allclose(I, I.T, rtol=1e-9, atol=1e-15):
        raise ParameterError(f"{what}: inertia must be a symmetric 3x3 matrix (or its diagonal), kg m^2")
    p = np.linalg.eigvalsh(I)
    if p[0] <= 0 or p[0] + p[1] < p[2] * (1 - 1e-9):
        raise ParameterError(f"{what}: inertia must be positive definite with principal moments satisfying "
                             f"I1 + I2 >= I3; got principal moments {p}")
    return I


# ---------------------------------------------------------------- contact proxies (host)
def contact_proxies(shape) -> dict:
    """Body-frame points that can touch other things, for rigid-vs-obstacle and rigid-vs-rigid
    detection: arrays ``point`` (k,3), ``radius`` (k,), ``kind`` (PROXY_*), ``axis`` (k,3) of
    circles, ``against`` (PROXY_ANY / HALFSPACE_ONLY / NOT_HALFSPACE).

    Sphere: its centre with its radius (exact against every SDF). Capsule: balls along the axis.
    Cylinder: its two rim circles against half-spaces (exact lowest point, so it rolls smoothly)
    and rim/cap samples against everything else. Box: corners, edge midpoints and face centres (26 points; few redundant contacts keep COND converging). Mesh: its
    vertices. Points with radius r touch where ``sdf(p) < r``.
    """
    P, r, kind, axis, against = [], [], [], [], []

    def add(points, radius=0.0, k=PROXY_SPHERE, ax=(0.0, 0.0, 1.0), ag=PROXY_ANY):
        points = np.atleast_2d(np.asarray(points, float))
        P.append(points)
        r.append(np.full(len(points), radius))
        kind.append(np.full(len(points), k))
        axis.append(np.tile(ax, (len(points), 1)))
        against.append(np.full(len(points), ag))

    if isinstance(shape, S.Sphere):
        add([0.0, 0.0, 0.0], shape.radius)
    elif isinstance(shape, S.Capsule):
        n = max(2, int(np.ceil(2 * shape.half_length / shape.radius)) + 1)
        add(np.c_[np.zeros(n), np.zeros(n), np.linspace(-shape.half_length, shape.half_length, n)], shape.radius)
    elif isinstance(shape, S.Cylinder):
        R, h = shape.radius, shape.half_length
        add([[0, 0, -h], [0, 0, h]], R, PROXY_CIRCLE, ag=PROXY_HALFSPACE_ONLY)
        th = np.linspace(0, 2 * np.pi, 24, endpoint=False)
        ring = np.c_[R * np.cos(th), R * np.sin(th)]
        nz = max(2, int(np.ceil(2 * h / (R * 2 * np.pi / 24))) + 1)
        for z in np.linspace(-h, h, nz):
            add(np.c_[ring, np.full(len(th), z)], ag=PROXY_NOT_HALFSPACE)
        for z in (-h, h):
            add(np.c_[0.5 * ring, np.full(len(th), z)], ag=PROXY_NOT_HALFSPACE)
            add([0, 0, z], ag=PROXY_NOT_HALFSPACE)
    elif isinstance(shape, S.Box):
        hx = shape.half_extents
        g = np.linspace(-1, 1, 3)
        pts = np.array([[x, y, z] for x in g for y in g for z in g])
        on_surface = (np.abs(pts) == 1).any(1)
        add(pts[on_surface] * hx)
    elif isinstance(shape, S.TriangleMesh):
        add(np.unique(shape.vertices[shape.faces.ravel()], axis=0))
    elif isinstance(shape, S.Compound):                  # the parts' proxies, those buried in another left out
        for k, (part, t, R) in enumerate(shape.parts):
            px = contact_proxies(part)
            keep = _outside_other_parts(shape, k, px["point"] @ R.T + t,
                                        np.where(px["kind"] == PROXY_SPHERE, px["radius"], np.inf))
            for pt, rad, kd, ax, ag in zip(px["point"][keep] @ R.T + t, px["radius"][keep], px["kind"][keep],
                                           px["axis"][keep] @ R.T, px["against"][keep]):
                add(pt, rad, kd, ax, ag)
    else:
        mass_properties(shape, 1.0)  # raises the clear error
    return {"point": np.concatenate(P), "radius": np.concatenate(r), "kind": np.concatenate(kind).astype(np.int32),
            "axis": np.concatenate(axis), "against": np.concatenate(against).astype(np.int32)}


def surface_samples(shape, n_sphere: int = 32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Body-frame surface points tested against FEM tets (``detection.detect_rigid_in_fem``), each with
    the axis ``g`` (k, 3, unit, outward) and cosine (k,) of the half-angle of a cone around it that
    holds the surface's outward normals there (its normal cone: one direction on a smooth or flat
    part, the faces' normals at an edge, corner or mesh vertex). Points: the radius-0 contact
    proxies (box corners, edge midpoints, face centres; mesh vertices; cylinder rims, sides, caps);
    a sphere gets ``n_sphere`` Fibonacci points, a capsule those on its end caps plus rings of 12; a
    compound its parts' (those inside another part left out)."""
    if isinstance(shape, S.Compound):
        out = []
        for k, (part, t, R) in enumerate(shape.parts):
            p, g, c = surface_samples(part, n_sphere)
            p, g = p @ R.T + t, g @ R.T
            keep = _outside_other_parts(shape, k, p, np.zeros(len(p)))
            out.append((p[keep], g[keep], c[keep]))
        return tuple(np.concatenate(z) for z in zip(*out))
    if isinstance(shape, (S.Sphere, S.Capsule)):
        k = np.arange(n_sphere) + 0.5
        z = 1 - 2 * k / n_sphere
        th = np.pi * (1 + 5**0.5) * k
        u = np.c_[np.sqrt(1 - z * z) * np.cos(th), np.sqrt(1 - z * z) * np.sin(th), z]
        if isinstance(shape, S.Sphere):
            return shape.radius * u, u, np.ones(len(u))
        h, r = shape.half_length, shape.radius
        th = np.linspace(0, 2 * np.pi, 12, endpoint=False)
        zs = np.linspace(-h, h, max(2, int(np.ceil(2 * h / r)) + 1))
        side = np.tile(np.c_[np.cos(th), np.sin(th), np.zeros(12)], (len(zs), 1))
        p = np.r_[r * u + np.c_[0 * z, 0 * z, np.sign(z) * h], r * side + np.c_[0 * side[:, :2], np.repeat(zs, 12)]]
        g = np.r_[u, side]
        return p, g, np.ones(len(p))
    px = contact_proxies(shape)
    p = px["point"][(px["radius"] == 0) & (px["kind"] == PROXY_SPHERE)]
    if isinstance(shape, S.Box):
        f = np.isclose(np.abs(p), shape.half_extents) * np.sign(p)      # the faces each point is on
        n_faces = (f != 0).sum(1)
    elif isinstance(shape, S.Cylinder):
        rim = np.isclose(np.hypot(p[:, 0], p[:, 1]), shape.radius)
        cap = np.isclose(np.abs(p[:, 2]), shape.half_length)
        radial = p[:, :2] / np.maximum(np.hypot(p[:, 0], p[:, 1]), 1e-300)[:, None]
        f = np.c_[radial * rim[:, None], np.sign(p[:, 2]) * cap]
        n_faces = rim.astype(int) + cap
    else:                                                  # mesh: the faces around each vertex
        return p, *_vertex_cones(shape, p)
    g = f / np.linalg.norm(f, axis=1, keepdims=True)
    return p, g, 1.0 / np.sqrt(n_faces)                    # box and cylinder faces meet at right angles


def _vertex_cones(shape, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Axis (area-weighted vertex normal) and cosine of the smallest cone around it holding the unit
    normals of the faces at each of the mesh vertices p."""
    v, f = shape.vertices, shape.faces
    fn = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    un = fn / np.linalg.norm(fn, axis=1, keepdims=True)
    g, c = np.zeros_like(p), np.ones(len(p))
    # the faces at p[i]: those with a corner at p[i] (np.isclose per coordinate); matched vertex by
    # vertex (a face corner is a vertex), in blocks, then through a vertex -> faces incidence list
    corner_of = np.argsort(f.ravel(), kind="stable")
    starts = np.searchsorted(f.ravel()[corner_of], np.arange(len(v) + 1))
    atol = 1e-12 * (1 + np.abs(p).max(1))
    for lo in range(0, len(p), 256):
        near = np.isclose(v[None], p[lo:lo + 256, None], atol=atol[lo:lo + 256, None, None]).all(2)
        for i, row in enumerate(near, lo):
            at = np.unique(np.concatenate([corner_of[starts[w]:starts[w + 1]] for w in np.flatnonzero(row)]
                                          + [np.zeros(0, np.int64)]) // 3)
            n = fn[at].sum(0)
            g[i] = n / np.linalg.norm(n)
            c[i] = max((un[at] @ g[i]).min(), 0.0)
    return g, c


# ---------------------------------------------------------------- quaternions (host)
def quat_from_matrix(R: np.ndarray) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    x, y, z, w = Rotation.from_matrix(R).as_quat()
    return np.array([w, x, y, z])


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """(..., 4) quaternions (w, x, y, z) -> (..., 3, 3) rotation matrices."""
    q = np.asarray(q, float)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


def cayley_velocity(R0: np.ndarray, R1: np.ndarray, dt: float) -> np.ndarray:
    """The ω whose Cayley step ``cay(dt ω)`` takes R0 to R1 (kinematic bodies track poses exactly)."""
    from scipy.spatial.transform import Rotation

    x, y, z, w = Rotation.from_matrix(R1 @ R0.T).as_quat()
    if w < 0:
        x, y, z, w = -x, -y, -z, -w
    return 2.0 * np.array([x, y, z]) / (w * dt)


# ---------------------------------------------------------------- kernels
@ti.func
def quat_matrix(q):
    """Rotation matrix of a (w, x, y, z) quaternion (normalized here)."""
    qn = q.normalized()
    w, x, y, z = qn[0], qn[1], qn[2], qn[3]
    return ti.Matrix([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                      [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                      [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


@ti.func
def skew(a):
    return ti.Matrix([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


@ti.func
def assemble_rotational_block(r, blocks_of: ti.template(), inertia: ti.template(), quat: ti.template(),
                              v: ti.template(), diag: ti.template(), blocks: ti.template(), b: ti.template(),
                              a_m, b_m, b_f):
    """Rotational block r of ``assemble_rotational`` (shared with the fused step kernels)."""
    i = blocks_of[r]
    R = quat_matrix(quat[r])
    Ib = inertia[r]
    Om_k = mTv(R, v[i])
    Om = Om_k
    for _ in range(8):   # Newton on g(Ω) = a_m I Ω − b_m I Ω_k + b_f Ω × I Ω
        IOm = mv(Ib, Om)
        g = a_m * IOm - b_m * mv(Ib, Om_k) + b_f * Om.cross(IOm)
        Jg = a_m * Ib + b_f * (mm(skew(Om), Ib) - skew(IOm))
        Om -= mv(inv3(Jg), g)
    Iw = mmT(mm(R, Ib), R)
    blocks[diag[i]] += a_m * Iw
    b[i] += b_m * mv(Iw, v[i]) - b_f * mv(R, Om.cross(mv(Ib, Om)))


@ti.kernel
def assemble_rotational(blocks_of: ti.types.ndarray(), inertia: ti.types.ndarray(), quat: ti.types.ndarray(),
                        v: ti.types.ndarray(), diag: ti.types.ndarray(), blocks: ti.types.ndarray(),
                        b: ti.types.ndarray(), a_m: float, b_m: float, b_f: float):
    """Rotational blocks: A_ii += a_m I_w; b_i += b_m I_w ω_k − b_f R (Ω̂ × I Ω̂) (module docstring).
    Units follow the integrator's λ scaling (midpoint: torques, N m; Euler: angular impulses)."""
    for r in range(blocks_of.shape[0]):
        assemble_rotational_block(r, blocks_of, inertia, quat, v, diag, blocks, b, a_m, b_m, b_f)


@ti.func
def advance_rotation_block(r, blocks_of: ti.template(), quat: ti.template(), v_hat: ti.template(),
                           v: ti.template(), fixed: ti.template(), dt):
    """Rotational block r of ``advance_rotations`` (shared with the fused step kernels)."""
    i = blocks_of[r]
    h = 0.5 * dt * v_hat[i]
    d = ti.Vector([1.0, h[0], h[1], h[2]]).normalized()
    q = quat[r]
    qn = ti.Vector([d[0] * q[0] - d[1] * q[1] - d[2] * q[2] - d[3] * q[3],
                    d[0] * q[1] + d[1] * q[0] + d[2] * q[3] - d[3] * q[2],
                    d[0] * q[2] - d[1] * q[3] + d[2] * q[0] + d[3] * q[1],
                    d[0] * q[3] + d[1] * q[2] - d[2] * q[1] + d[3] * q[0]]).normalized()
    quat[r] = qn
    if fixed[i] == 0:
        v[i] = mv(quat_matrix(d), v[i])


@ti.kernel
def advance_rotations(blocks_of: ti.types.ndarray(), quat: ti.types.ndarray(), v_hat: ti.types.ndarray(),
                      v: ti.types.ndarray(), fixed: ti.types.ndarray(), dt: float):
    """q ← cay(dt ω̂) ⊗ q, and the end-of-step ω of free blocks turns with the body (module docstring).
    Run after the generic advance (which set ω_{k+1} in the start-of-step frame)."""
    for r in range(blocks_of.shape[0]):
        advance_rotation_block(r, blocks_of, quat, v_hat, v, fixed, dt)
