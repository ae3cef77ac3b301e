"""Cosserat rods (cables) as the user describes them: the host side of ``Scene.add_rod``.

A rod of ``n`` segments owns ``2n + 1`` DOF blocks of the global velocity vector, in this
body-local order: its ``n + 1`` centre-line nodes (translational blocks, lumped mass) and then its
``n`` segments (rotational blocks holding the segment's world angular velocity; the block's
position slot holds the segment midpoint, for output and broadphase boxes only).

Segment frames (docs/THEORY.md §2): ``d3`` along the segment, ``d1, d2`` parallel transported from the
first segment (minimal rotation between consecutive tangents), so the initial shape has no twist
unless the user gives frames. Rest strains: unit stretch, no shear, and the rest Darboux vectors
``Ω⁰_j = (2/l̄_j) Im(q̄_j q_{j+1})`` of the initial frames (natural curvature), or zero with
``rest_shape="straight"`` (a cable hanging from a sagging initial shape).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..errors import ParameterError
from ..math.quaternion import quat_conj, quat_mul
from .drive import NodeDrive
from .force import nodal_force
from .material import Material
from .selection import NodeSelector, require_nodes, select_nodes
from .validation import as_float_array, check_drive, check_drive_output, positive, vec3

SHEAR_COEFFICIENT = 0.9  # Timoshenko k of a solid circular section, ≈ 6(1+ν)/(7+6ν)


def darboux(q: np.ndarray, lbar: np.ndarray) -> np.ndarray:
    """(n-1, 3) discrete Darboux vectors Ω_j = (2/l̄_j) Im(q̄_j q_{j+1}) of consecutive segment
    quaternions (n, 4), in the frame of segment j (rad/m). The sign of the relative quaternion is
    taken with non-negative real part (relative rotations of consecutive segments stay < π)."""
    qr = quat_mul(quat_conj(q[:-1]), q[1:])
    qr = np.where(qr[:, :1] < 0, -qr, qr)
    return 2.0 * qr[:, 1:] / np.asarray(lbar)[:, None]


def parallel_transport_frames(points: np.ndarray, d1: Optional[np.ndarray] = None) -> np.ndarray:
    """(n, 4) quaternions of segment frames with d3 along each segment, d1 of the first segment
    ``d1`` (projected; default: any perpendicular) and transported by minimal rotations."""
    t = np.diff(points, axis=0)
    t = t / np.linalg.norm(t, axis=1, keepdims=True)
    if d1 is None:
        helper = np.array([0.0, 0.0, 1.0]) if abs(t[0, 2]) < 0.9 else np.array([1.0, 0.0, 0.0])
        d1 = np.cross(helper, t[0])
    d1 = np.asarray(d1, float) - np.dot(d1, t[0]) * t[0]
    if np.linalg.norm(d1) < 1e-9:
        raise ParameterError("rod frame: d1 is parallel to the first segment")
    d1 = d1 / np.linalg.norm(d1)
    from scipy.spatial.transform import Rotation     # scipy.spatial: ~0.3 s of start-up, imported where used
    R = np.empty((len(t), 3, 3))
    R[0] = np.stack([d1, np.cross(t[0], d1), t[0]], axis=1)
    for j in range(1, len(t)):
        a, b = t[j - 1], t[j]
        axis = np.cross(a, b)
        s, c = np.linalg.norm(axis), float(np.clip(np.dot(a, b), -1.0, 1.0))
        if s < 1e-14:
            P = np.eye(3)
        else:
            P = Rotation.from_rotvec(axis / s * np.arctan2(s, c)).as_matrix()
        R[j] = P @ R[j - 1]
    x, y, z, w = Rotation.from_matrix(R).as_quat().T
    q = np.stack([w, x, y, z], axis=1)
    for j in range(1, len(q)):            # keep consecutive quaternions in one hemisphere
        if np.dot(q[j], q[j - 1]) < 0:
            q[j] = -q[j]
    return q


@dataclass
class RodSpec:
    """One Cosserat rod. Units: m, Pa, kg/m^3; ``points`` (n+1, 3) the initial centre line."""

    name: str
    points: np.ndarray
    radius: float
    youngs_modulus: float
    shear_modulus: float
    density: float
    rayleigh_alpha: float
    rayleigh_beta: float
    velocity: np.ndarray                 # (n+1, 3) initial node velocities, m/s
    quats: np.ndarray                    # (n, 4) initial segment frames (w, x, y, z)
    rest_lengths: np.ndarray             # (n,)
    rest_darboux: np.ndarray             # (n-1, 3) rad/m, frame of the first segment of each pair
    self_contact: bool = True
    drives: list = field(default_factory=list)
    forces: list = field(default_factory=list)
    anchors: list = field(default_factory=list)   # clamped segments (index): bend–twist to a fixed frame

    # ---------------------------------------------------------------- sizes and blocks
    @property
    def n_segments(self) -> int:
        return len(self.points) - 1

    @property
    def n_points(self) -> int:
        return len(self.points)

    @property
    def n_nodes(self) -> int:
        """DOF blocks of the rod (nodes then segments)."""
        return 2 * len(self.points) - 1

    @property
    def positions(self) -> np.ndarray:
        """(2n+1, 3) block positions: the nodes, then the segment midpoints."""
        return np.concatenate([self.points, 0.5 * (self.points[1:] + self.points[:-1])])

    @property
    def block_velocities(self) -> np.ndarray:
        return np.concatenate([self.velocity, np.zeros((self.n_segments, 3))])

    def segment_block(self, j) -> np.ndarray:
        """Body-local block indices of segments j (negative counts from the end)."""
        j = np.atleast_1d(np.asarray(j, np.int64))
        n = self.n_segments
        if np.any((j < -n) | (j >= n)):
            raise ParameterError(f"segment index out of range for rod {self.name!r} with {n} segments: {j}")
        return self.n_points + np.mod(j, n)

    @property
    def areas(self) -> tuple[float, float, float]:
        """(A, I, J) of the circular section: m^2, m^4 (second moment), m^4 (polar)."""
        r = self.radius
        return np.pi * r * r, 0.25 * np.pi * r**4, 0.5 * np.pi * r**4

    @property
    def node_masses(self) -> np.ndarray:
        """(n+1,) lumped masses, kg (half of each adjacent segment)."""
        A = self.areas[0]
        m = np.zeros(self.n_points)
        seg = self.density * A * self.rest_lengths
        m[:-1] += 0.5 * seg
        m[1:] += 0.5 * seg
        return m

    @property
    def segment_inertias(self) -> np.ndarray:
        """(n, 3, 3) body-frame segment inertias ρ l diag(I, I, J), kg m^2."""
        _, I, J = self.areas
        return self.density * self.rest_lengths[:, None, None] * np.diag([I, I, J])[None]

    # ---------------------------------------------------------------- boundary conditions
    def _end(self, end) -> int:
        if end in (0, "start", "first"):
            return 0
        if end in (-1, "end", "last"):
            return -1
        raise ParameterError(f"rod {self.name!r}: end must be 'start' (0) or 'end' (-1), got {end!r}")

    def select(self, nodes: NodeSelector) -> np.ndarray:
        """Body-local indices of the centre-line nodes picked by ``nodes`` (``"start"``/``"end"``
        name the end nodes; otherwise as ``femcontact.spec.selection.select_nodes``)."""
        if isinstance(nodes, str) and nodes in ("start", "end"):
            return np.array([0 if nodes == "start" else self.n_points - 1])
        return select_nodes(nodes, self.points, f"rod {self.name!r}")

    def clamp(self, end="start") -> np.ndarray:
        """A built-in end: the end node is held in place and the end segment is tied to its initial
        frame by a bend–twist element of length l/2 (so the clamped cross-section sits at the end
        node, not at the first segment's centre, which would stiffen the rod by one segment).
        Returns the body-local block index of the held node."""
        e = self._end(end)
        idx = np.array([0 if e == 0 else self.n_points - 1])
        self.drives.append(NodeDrive(idx, velocity=lambda t: np.zeros(3)))
        self.anchors.append(0 if e == 0 else self.n_segments - 1)
        return idx

    def pin(self, nodes: NodeSelector) -> np.ndarray:
        """Hold the selected nodes in place (their segments stay free to turn: a ball joint)."""
        idx = require_nodes(self.select(nodes), nodes, self.points, f"pin on rod {self.name!r}")
        self.drives.append(NodeDrive(idx, velocity=lambda t: np.zeros(3)))
        return idx

    def drive(self, nodes: NodeSelector = None, *, position=None, velocity=None, segments=None,
              angular_velocity=None) -> np.ndarray:
        """Prescribe motion. Nodes: exactly one of ``position(t, x0) -> (k, 3)`` (m) or
        ``velocity(t) -> (3,)|(k, 3)`` (m/s). Segments (indices, e.g. ``[-1]`` for the end
        segment): ``angular_velocity(t) -> (3,)`` world frame, rad/s. Returns the block indices."""
        if segments is not None:
            if angular_velocity is None or not callable(angular_velocity) or position or velocity:
                raise ParameterError(f"rod {self.name!r}: drive(segments=...) needs angular_velocity=f(t) only")
            idx = self.segment_block(segments)
            check_drive_output(f"angular_velocity drive on rod {self.name!r}", None, angular_velocity,
                               np.zeros((len(idx), 3)))
            self.drives.append(NodeDrive(idx, velocity=angular_velocity))
            return idx
        if angular_velocity is not None:
            raise ParameterError(f"rod {self.name!r}: angular_velocity drives need segments=")
        what = f"drive on rod {self.name!r}"
        check_drive(what, position, velocity)
        idx = require_nodes(self.select(nodes), nodes, self.points, what)
        check_drive_output(what, position, velocity, self.points[idx])
        self.drives.append(NodeDrive(idx, position=position, velocity=velocity))
        return idx

    def add_force(self, force, nodes: NodeSelector = None, mode: str = "total") -> np.ndarray:
        """External force (3,) N or t -> (3,) on the selected nodes ("total": split by lumped mass;
        "per_node": each node gets it)."""
        idx = require_nodes(self.select(nodes), nodes, self.points, f"force on rod {self.name!r}")
        self.forces.append(nodal_force(idx, force, mode, f"force on rod {self.name!r}"))
        return idx

    def add_torque(self, torque, segments=-1) -> np.ndarray:
        """External torque (3,) N m (world frame) or t -> (3,) on each of the given segments."""
        idx = self.segment_block(segments)
        self.forces.append(nodal_force(idx, torque, "per_node", f"torque on rod {self.name!r}"))
        return idx


def make_rod(name: str, points, radius, material: Optional[Material], youngs_modulus, poisson_ratio,
             shear_modulus, density, rayleigh_alpha, rayleigh_beta, velocity, rest_shape: str, d1,
             self_contact: bool) -> RodSpec:
    """Validate ``Scene.add_rod``'s arguments and build the RodSpec (rest lengths, frames, Darboux)."""
    what = f"rod {name!r}"
    try:
        pts = np.array(points, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(f"{what}: points must be an (n, 3) array of coordinates in m") from None
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise ParameterError(f"{what}: points must be an (n, 3) array, got shape {pts.shape}")
    if len(pts) < 2:
        raise ParameterError(f"{what}: a rod needs at least 2 points (1 segment), got {len(pts)}")
    if not np.isfinite(pts).all():
        raise ParameterError(f"{what}: points contain NaN or infinite coordinates")
    lengths = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    short = np.flatnonzero(lengths <= 1e-9 * max(lengths.max(), 1e-300))
    if short.size:
        raise ParameterError(f"{what}: segment {int(short[0])} has zero length (points {int(short[0])} and "
                             f"{int(short[0]) + 1} coincide); remove duplicate points")
    positive(radius, f"{what}: radius (m)")
    if material is not None:
        if not isinstance(material, Material):
            raise ParameterError(f"{what}: material must be a femcontact.Material, got {type(material).__name__}")
        E, nu, rho = material.youngs_modulus, material.poisson_ratio, material.density
        alpha, beta = material.rayleigh_alpha, material.rayleigh_beta
        if youngs_modulus is not None or density is not None:
            raise ParameterError(f"{what}: give material= or youngs_modulus=/density=, not both")
    else:
        if youngs_modulus is None or density is None:
            raise ParameterError(f"{what}: give material=femcontact.Material(...) or youngs_modulus= and density=")
        Material(youngs_modulus, 0.3 if poisson_ratio is None else poisson_ratio, density,
                 rayleigh_alpha, rayleigh_beta)  # validates
        E, nu, rho = float(youngs_modulus), 0.3 if poisson_ratio is None else float(poisson_ratio), float(density)
        alpha, beta = float(rayleigh_alpha), float(rayleigh_beta)
    G = E / (2.0 * (1.0 + nu))
    if shear_modulus is not None:
        G = positive(shear_modulus, f"{what}: shear_modulus (Pa)")
    if rest_shape not in ("initial", "straight"):
        raise ParameterError(f"{what}: rest_shape must be 'initial' (natural curvature from the points) or "
                             f"'straight', got {rest_shape!r}")
    vel = as_float_array(velocity)
    if vel.shape == (3,):
        vel = np.tile(vec3(vel, f"velocity of {what}"), (len(pts), 1))
    if vel.shape != pts.shape or not np.isfinite(vel).all():
        raise ParameterError(f"{what}: velocity must be (3,) or one finite 3-vector per point")
    q = parallel_transport_frames(pts, None if d1 is None else vec3(d1, f"d1 of {what}"))
    lbar = 0.5 * (lengths[1:] + lengths[:-1])
    omega0 = darboux(q, lbar) if rest_shape == "initial" else np.zeros((len(lbar), 3))
    return RodSpec(name, pts, float(radius), float(E), float(G), float(rho), float(alpha), float(beta), vel, q,
                   lengths, omega0, bool(self_contact))
