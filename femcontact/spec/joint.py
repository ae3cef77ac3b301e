"""Joints and attachments as the user describes them: the host side of ``Scene.add_joint`` and
``Scene.attach``. The springs that enforce them are ``femcontact.bodies.joints.JointSystem``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..errors import ParameterError
from ..meshes.surface import boundary_faces
from ..meshes.types import TetMesh
from .drive import Drive, Target
from .fem import FemBodySpec
from .rigid import RigidBodySpec
from .rod import RodSpec
from .selection import NodeSelector
from .validation import as_float_array, non_negative, positive_or_none, unit_vector

JOINT_KINDS = ("weld", "ball", "hinge", "prismatic")


@dataclass
class JointSpec:
    """A joint between rigid body ``parent`` (None: the world) and rigid body ``child``."""

    kind: str
    parent: Optional[str]
    child: str
    anchor: np.ndarray                # world point at build time, m
    axis: np.ndarray                  # world unit axis at build time (hinge, prismatic)
    limits: Optional[tuple] = None    # (lower, upper) of the joint coordinate
    stiffness: Optional[float] = None
    damping: Optional[float] = None   # s (β of the joint springs); None: dt
    name: str = ""
    drive: Optional[Drive] = None
    # joint coordinate at the build pose (a URDF joint's position there): coordinates, limits and
    # drive targets are s = position0 + (motion since build)
    position0: float = 0.0
    # masses that set the default stiffness (None: the smaller of the two sides); a robot joint uses
    # the mass (kg) and the largest moment (kg m^2, about the anchor) of everything it carries
    ref_mass: Optional[float] = None
    ref_inertia: Optional[float] = None
    subtree: tuple = ()               # rigid bodies this joint carries (gravity compensation)
    gravity_compensation: bool = False
    mimic: Optional["Mimic"] = None   # s = multiplier · s_leader + offset, a stiff joint-space row

    def set_drive(self, *, kp: float, kd: float = 0.0, target: Optional[Target] = None, velocity: Target = 0.0,
                  max_force: Optional[float] = None) -> Drive:
        """PD drive on the joint coordinate (hinge angle in rad, prismatic slide in m, measured from
        the build-time pose): force ``−kp (s − target) − kd (ṡ − velocity)``, clamped to
        ``±max_force``. ``target=None`` drives velocity only. Change ``joint.drive.target`` (or
        ``max_force``) between steps to command it."""
        if self.kind not in ("hinge", "prismatic"):
            raise ParameterError(f"joint {self.name!r}: only hinge and prismatic joints have a coordinate to drive")
        kp = non_negative(kp, f"joint {self.name!r}: drive kp")
        kd = non_negative(kd, f"joint {self.name!r}: drive kd")
        max_force = positive_or_none(max_force, f"joint {self.name!r}: max_force")
        self.drive = Drive(kp, kd, target, velocity, max_force)
        return self.drive


@dataclass(frozen=True)
class Mimic:
    """A joint-space coupling ``s = multiplier · s_leader + offset`` (URDF ``<mimic>``)."""

    leader: str
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass
class Attachment:
    """Nodes (body-local) of FEM body or rod ``body`` glued where they are now to rigid body ``rigid``
    (None: the world), or, when ``target`` names an FEM body, to its material points
    ``Σ_k weights[i, k] x[target_nodes[i, k]]`` (body-local, padded with weight 0). ``segments``: rod
    segments (local indices) whose orientation is welded to ``rigid`` (None: the world)."""

    body: str
    nodes: np.ndarray
    rigid: Optional[str]
    stiffness: Optional[float] = None
    damping: Optional[float] = None
    name: str = ""
    target: Optional[str] = None
    target_nodes: Optional[np.ndarray] = None
    weights: Optional[np.ndarray] = None
    segments: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def locate_points(points: np.ndarray, positions: np.ndarray, tets: np.ndarray, tolerance: float,
                  what: str) -> tuple[np.ndarray, np.ndarray]:
    """Barycentric (nodes (n, 4), weights (n, 4)) of world ``points`` in an FEM body: the containing
    tet, else the closest point of the nearest boundary triangle (weight 0 in the 4th slot) if it
    lies within ``tolerance``; ParameterError otherwise."""
    X = positions[tets]                                        # (m, 4, 3)
    T = np.transpose(X[:, 1:] - X[:, :1], (0, 2, 1))
    Tinv = np.linalg.inv(T)
    faces = boundary_faces(TetMesh(positions, tets))
    out_n = np.zeros((len(points), 4), np.int64)
    out_w = np.zeros((len(points), 4))
    for i, p in enumerate(points):
        lam = np.einsum("mij,mj->mi", Tinv, p - X[:, 0])
        bary = np.concatenate([1.0 - lam.sum(1, keepdims=True), lam], 1)
        best = int(np.argmax(bary.min(1)))
        if bary[best].min() >= -1e-9:
            out_n[i], out_w[i] = tets[best], np.clip(bary[best], 0.0, 1.0) / np.clip(bary[best], 0, 1).sum()
            continue
        q, w = closest_on_triangles(p, positions[faces])
        f = int(np.argmin(np.linalg.norm(q - p, axis=1)))
        dist = float(np.linalg.norm(q[f] - p))
        if dist > tolerance:
            raise ParameterError(f"{what}: point {i} at {np.round(p, 6).tolist()} is {dist:.3g} m outside the "
                                 f"FEM body (tolerance {tolerance:.3g} m)")
        out_n[i, :3], out_w[i, :3] = faces[f], w[f]
        out_n[i, 3] = faces[f][0]
    return out_n, out_w


def closest_on_triangles(p: np.ndarray, tri: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closest points (m, 3) of triangles (m, 3, 3) to p and their barycentric weights (m, 3)
    (Ericson's region test, vectorized)."""
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = (ab * ap).sum(1), (ac * ap).sum(1)
    bp, cp = p - b, p - c
    d3, d4 = (ab * bp).sum(1), (ac * bp).sum(1)
    d5, d6 = (ab * cp).sum(1), (ac * cp).sum(1)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    w = np.zeros((len(tri), 3))
    den = np.where(np.abs(va + vb + vc) > 0, va + vb + vc, 1.0)
    w[:, 1], w[:, 2] = vb / den, vc / den                   # interior
    w[:, 0] = 1.0 - w[:, 1] - w[:, 2]
    cases = [  # (condition, weights) in reverse priority: later ones win
        ((va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0), "bc"),
        ((vb <= 0) & (d2 >= 0) & (d6 <= 0), "ac"),
        ((d6 >= 0) & (d5 <= d6), "c"), ((vc <= 0) & (d1 >= 0) & (d3 <= 0), "ab"),
        ((d3 >= 0) & (d4 <= d3), "b"), ((d1 <= 0) & (d2 <= 0), "a")]
    for cond, kind in cases:
        if kind == "a":
            val = np.array([1.0, 0, 0])
        elif kind == "b":
            val = np.array([0, 1.0, 0])
        elif kind == "c":
            val = np.array([0, 0, 1.0])
        else:
            if kind == "ab":
                t = d1 / np.where(d1 - d3 != 0, d1 - d3, 1.0)
                val = np.stack([1 - t, t, 0 * t], 1)
            elif kind == "ac":
                t = d2 / np.where(d2 - d6 != 0, d2 - d6, 1.0)
                val = np.stack([1 - t, 0 * t, t], 1)
            else:
                t = (d4 - d3) / np.where((d4 - d3) + (d5 - d6) != 0, (d4 - d3) + (d5 - d6), 1.0)
                val = np.stack([0 * t, 1 - t, t], 1)
            val = val[cond]
        w[cond] = val
    return np.einsum("mk,mkj->mj", w, tri), w


def make_joint(kind: str, parent, child, anchor, axis, limits, stiffness, damping, name: str,
               body_names: dict) -> JointSpec:
    """Validate a joint definition (names, axis, limits, parameters) with clear errors."""
    what = f"joint {name!r}"
    if kind not in JOINT_KINDS:
        raise ParameterError(f"{what}: unknown joint kind {kind!r}; choose one of {', '.join(JOINT_KINDS)}")
    for role, body in (("parent", parent), ("child", child)):
        if body is None and role == "parent":
            continue
        if body not in body_names:
            raise ParameterError(f"{what}: {role} {body!r} is not a body of the scene (bodies: {sorted(body_names)})")
        if body_names[body] != "rigid":
            raise ParameterError(f"{what}: {role} {body!r} is a {body_names[body]} body; joints connect rigid bodies "
                                 "(glue FEM nodes with scene.attach)")
    if parent == child:
        raise ParameterError(f"{what}: parent and child are the same body {child!r}")
    anchor = as_float_array(anchor)
    if anchor.shape != (3,) or not np.isfinite(anchor).all():
        raise ParameterError(f"{what}: anchor must be a world point (3 finite numbers), got {anchor!r}")
    ax = unit_vector((0.0, 0.0, 1.0) if axis is None else axis, f"{what}: axis")
    if limits is not None:
        lim = as_float_array(limits)
        lo, hi = (lim[0], lim[-1]) if lim.shape == (2,) else (np.nan, np.nan)
        if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
            raise ParameterError(f"{what}: limits must be (lower, upper) with lower <= upper, got {limits!r}")
        limits = (float(lo), float(hi))
    positive_or_none(stiffness, f"{what}: stiffness")
    positive_or_none(damping, f"{what}: damping")
    return JointSpec(kind, parent, child, anchor, ax, limits, stiffness, damping, name)




def make_attachment(spec, target, nodes: NodeSelector, name: str, orientation: bool, target_nodes,
                    tolerance: Optional[float], stiffness: Optional[float], damping: Optional[float]) -> Attachment:
    """Validate ``Scene.attach``'s arguments: FEM body or rod ``spec`` glued to ``target`` (a rigid
    body or FEM body spec, None: the world); an FEM target's material points are located now."""
    body, to = spec.name, None if target is None else target.name
    what = f"attach {body!r}"
    if not isinstance(spec, (FemBodySpec, RodSpec)):
        raise ParameterError(f"{what}: {body!r} is a rigid body; connect rigid bodies with add_joint")
    if target is not None and not isinstance(target, (FemBodySpec, RigidBodySpec)):
        raise ParameterError(f"{what}: the target {to!r} must be a rigid body, an FEM body or None (the world)")
    if to == body:
        raise ParameterError(f"{what}: a body cannot be attached to itself")
    for value, label in ((stiffness, "stiffness"), (damping, "damping"), (tolerance, "tolerance")):
        positive_or_none(value, f"{what}: {label}")
    idx = spec.select(nodes)
    points = spec.points if isinstance(spec, RodSpec) else spec.positions
    if len(idx) == 0:
        raise ParameterError(f"{what}: the selection {nodes!r} picks no node")
    segments = np.zeros(0, np.int64)
    if orientation:
        if not isinstance(spec, RodSpec) or isinstance(target, FemBodySpec):
            raise ParameterError(f"{what}: orientation=True clamps rod segments to a rigid body or the world")
        segments = np.unique(np.concatenate([idx - 1, idx]).clip(0, spec.n_segments - 1))
    if not isinstance(target, FemBodySpec):
        if target_nodes is not None:
            raise ParameterError(f"{what}: target_nodes only applies to an FEM target")
        return Attachment(body, idx, to, stiffness, damping, name, segments=segments)
    if target_nodes is not None:
        tn = np.asarray(target_nodes).reshape(-1)
        if tn.dtype.kind not in "iu" or len(tn) != len(idx):
            raise ParameterError(f"{what}: target_nodes must be {len(idx)} integer node indices of {to!r}")
        if np.any((tn < 0) | (tn >= target.n_nodes)):
            raise ParameterError(f"{what}: target node index out of range 0..{target.n_nodes - 1} of {to!r}")
        t_nodes = np.repeat(tn.astype(np.int64)[:, None], 4, axis=1)
        weights = np.zeros((len(idx), 4))
        weights[:, 0] = 1.0
    else:
        size = float(np.linalg.norm(np.ptp(target.positions, axis=0)))
        tol = tolerance if tolerance is not None else 1e-3 * size
        t_nodes, weights = locate_points(points[idx], target.positions, target.mesh.tets, tol, f"{what} to {to!r}")
    return Attachment(body, idx, None, stiffness, damping, name, to, t_nodes, weights)
