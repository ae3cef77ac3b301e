"""Mass properties of shapes (host, numpy): mass, centre of mass and inertia of a shape of uniform
density in its own frame (``mass_properties``), and the check of a given inertia (``check_inertia``)."""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from . import shapes as S


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
