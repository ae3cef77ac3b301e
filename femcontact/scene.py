"""Scene: the user-facing builder. It only records what the user asked for and
validates it; ``Model.build`` turns it into static Taichi data."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
from scipy.spatial.transform import Rotation

from .assembly.integrator import INTEGRATORS
from .errors import MeshError, ParameterError
from .materials import Material
from .meshes.types import TetMesh
from .meshes.validate import check_finite
from .contact.shapes import Shape
from .solvers.linear import LINEAR_SOLVERS
from .selection import NodeSelector, select_nodes

PositionDrive = Callable[[float, np.ndarray], np.ndarray]
VelocityDrive = Callable[[float], np.ndarray]


def _vec3(value, what: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise ParameterError(f"{what} must be three finite numbers, got {value!r}")
    return arr


def as_rotation_matrix(rotation) -> np.ndarray:
    """3x3 rotation matrix from None, a 3x3 matrix, a quaternion (w, x, y, z) or a scipy Rotation."""
    if rotation is None:
        return np.eye(3)
    if isinstance(rotation, Rotation):
        return rotation.as_matrix()
    arr = np.asarray(rotation, dtype=float)
    if arr.shape == (4,):
        if not np.isfinite(arr).all() or np.linalg.norm(arr) == 0:
            raise ParameterError(f"rotation quaternion must be finite and non-zero, got {rotation!r}")
        return Rotation.from_quat(arr[[1, 2, 3, 0]]).as_matrix()
    if arr.shape == (3, 3) and np.isfinite(arr).all():
        if np.allclose(arr @ arr.T, np.eye(3), atol=1e-6) and np.linalg.det(arr) > 0:
            return arr
    raise ParameterError("rotation must be a 3x3 rotation matrix, a quaternion (w, x, y, z) "
                         f"or a scipy Rotation, got {rotation!r}")


def check_tet_mesh(mesh: TetMesh, name: str, rel_tol: float = 1e-12) -> None:
    """Refuse NaN coordinates, bad indices, inverted and zero-volume tets, naming them."""
    if mesh.n_tets == 0:
        raise MeshError(f"mesh of body {name!r} has no tetrahedra")
    check_finite(mesh.vertices, f"mesh of body {name!r}")
    if mesh.tets.min() < 0 or mesh.tets.max() >= mesh.n_vertices:
        e = int(np.flatnonzero((mesh.tets < 0).any(1) | (mesh.tets >= mesh.n_vertices).any(1))[0])
        raise MeshError(f"tet {e} of body {name!r} refers to a vertex outside 0..{mesh.n_vertices - 1}")
    vol = mesh.signed_volumes()
    scale = mesh.mean_edge_length() ** 3
    degenerate = np.flatnonzero(np.abs(vol) <= rel_tol * scale)
    if degenerate.size:
        raise MeshError(f"tet {int(degenerate[0])} of body {name!r} has zero volume "
                        f"({degenerate.size} degenerate tets, indices {degenerate[:10].tolist()}); "
                        "remove or repair them (femcontact.meshes.load repairs what it can)")
    inverted = np.flatnonzero(vol < 0)
    if inverted.size:
        raise MeshError(f"tet {int(inverted[0])} of body {name!r} is inverted (negative volume; "
                        f"{inverted.size} in all, indices {inverted[:10].tolist()}); swap two vertices "
                        "or load the mesh through femcontact.meshes.load, which fixes the order")


def check_drive(what: str, position, velocity) -> None:
    """Exactly one of a position drive f(t, x0) and a velocity drive f(t), and it is callable."""
    if (position is None) == (velocity is None):
        raise ParameterError(f"{what}: give exactly one of position= or velocity=")
    if not callable(position or velocity):
        raise ParameterError(f"{what}: position/velocity must be a function of time")


@dataclass
class NodeDrive:
    """Prescribed motion of some nodes of a body (kinematic boundary condition)."""

    nodes: np.ndarray                        # body-local node indices
    position: Optional[PositionDrive] = None  # (t, x0 (k,3)) -> positions (k,3), m
    velocity: Optional[VelocityDrive] = None  # t -> (3,) or (k,3), m/s


@dataclass
class NodalForce:
    """An external force on some nodes: constant (3,) N or a function of time."""

    nodes: np.ndarray
    force: object
    mode: str = "total"  # "total": distributed by lumped mass; "per_node": on every node


def nodal_force(nodes: np.ndarray, force, mode: str, what: str) -> NodalForce:
    """A checked NodalForce: ``force`` a constant (3,) or a function of time, ``mode`` as above."""
    if mode not in ("total", "per_node"):
        raise ParameterError(f"force mode must be 'total' or 'per_node', got {mode!r}")
    return NodalForce(nodes, force if callable(force) else _vec3(force, what), mode)


@dataclass
class FemBodySpec:
    """One FEM body as the user described it (world-frame rest positions)."""

    name: str
    mesh: TetMesh
    material: Material
    positions: np.ndarray          # (n, 3) placed rest positions, m
    velocity: np.ndarray           # (n, 3) initial velocities, m/s
    drives: list = field(default_factory=list)
    forces: list = field(default_factory=list)

    @property
    def n_nodes(self) -> int:
        return len(self.positions)

    def select(self, nodes: NodeSelector) -> np.ndarray:
        """Body-local indices picked by ``nodes`` (see ``femcontact.selection.select_nodes``)."""
        return select_nodes(nodes, self.positions, self.name)

    def pin(self, nodes: NodeSelector) -> np.ndarray:
        """Hold the selected nodes fixed in place. Returns their indices."""
        idx = self.select(nodes)
        self.drives.append(NodeDrive(idx, velocity=lambda t: np.zeros(3)))
        return idx

    def drive(self, nodes: NodeSelector, *, position: Optional[PositionDrive] = None,
              velocity: Optional[VelocityDrive] = None) -> np.ndarray:
        """Prescribe the motion of the selected nodes.

        position(t, x0) -> (k, 3) world positions at time t given their placed positions x0;
        or velocity(t) -> (3,) or (k, 3) in m/s. Exactly one of the two.
        """
        check_drive(f"drive on {self.name!r}", position, velocity)
        idx = self.select(nodes)
        self.drives.append(NodeDrive(idx, position=position, velocity=velocity))
        return idx

    def add_force(self, force, nodes: NodeSelector = None, mode: str = "total") -> np.ndarray:
        """Apply an external force (3,) N, or a function t -> (3,), to the selected nodes.

        mode "total": the force is the resultant, split over the nodes by lumped mass;
        "per_node": every selected node gets the full force.
        """
        idx = self.select(nodes)
        self.forces.append(nodal_force(idx, force, mode, f"force on {self.name!r}"))
        return idx


@dataclass
class BodyForce:
    """A force (3,) N or function t -> (3,) on a rigid body, at a body-frame point (None: the centre
    of mass); or a torque (3,) N m (world frame) when ``torque`` is True."""

    value: object
    point: Optional[np.ndarray] = None
    torque: bool = False


@dataclass
class RigidBodySpec:
    """One rigid body as the user described it. Pose of the shape's own frame: ``position`` (m)
    and ``rotation`` (3x3); the centre of mass sits at ``com_local`` in that frame. ``motion``
    (t -> (position, rotation)) makes it kinematic (its pose is prescribed, infinite mass)."""

    name: str
    shape: object
    mass: float
    inertia: np.ndarray            # about the centre of mass, shape frame, kg m^2
    com_local: np.ndarray
    position: np.ndarray
    rotation: np.ndarray
    velocity: np.ndarray           # of the centre of mass, m/s
    angular_velocity: np.ndarray   # world frame, rad/s
    motion: Optional[Callable] = None
    forces: list = field(default_factory=list)

    @property
    def kinematic(self) -> bool:
        return self.motion is not None

    @property
    def com(self) -> np.ndarray:
        """Initial centre of mass in the world, m."""
        return self.position + self.rotation @ self.com_local

    def add_force(self, force, point=None) -> None:
        """Apply a world-frame force (3,) N, or a function t -> (3,), at a shape-frame ``point``
        (m; None: the centre of mass, so no torque)."""
        if not callable(force):
            force = _vec3(force, f"force on {self.name!r}")
        pt = None if point is None else _vec3(point, f"force point on {self.name!r}")
        self.forces.append(BodyForce(force, pt))

    def add_torque(self, torque) -> None:
        """Apply a world-frame torque (3,) N m, or a function t -> (3,)."""
        if not callable(torque):
            torque = _vec3(torque, f"torque on {self.name!r}")
        self.forces.append(BodyForce(torque, None, True))

    def pose(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Prescribed (shape-frame origin, rotation) of a kinematic body at time t."""
        from .contact.obstacles import evaluate_motion

        return evaluate_motion(self.motion, t, f"rigid body {self.name!r}")


class Scene:
    """What to simulate: bodies, materials, boundary conditions and step settings.

    dt: step size in s. gravity: (3,) m/s^2. integrator: "midpoint" (passive midpoint,
    COND eq. 9) or "euler" (implicit Euler, SAP eq. 15). solver: contact solver name
    ("cond", "sap", "lagged", "similar", "pgs", "incp"); solver_options: its options.
    duration: default simulated time in s when a run does not say. frame_dt: time between
    written frames in s (None: every step). friction: default friction coefficient mu (or
    (mu1, mu2)) of body-body contacts and of obstacles added without one. contact_margin:
    detection distance in m (contacts with gap phi < margin are reported, so the solvers see
    them before touch); None: half the mean surface edge length of the scene's meshes.
    """

    def __init__(self, dt: float = 1e-2, gravity=(0.0, 0.0, -9.81), integrator: str = "midpoint",
                 solver: str = "cond", duration: float = 1.0, frame_dt: Optional[float] = None,
                 linear_solver: str = "auto", linear_tol: float = 1e-8, solver_options: Optional[dict] = None,
                 name: str = "scene", friction=0.5, contact_margin: Optional[float] = None):
        from .solvers import check_solver_name

        self.dt = self._positive(dt, "dt")
        self.gravity = _vec3(gravity, "gravity")
        if integrator not in INTEGRATORS:
            raise ParameterError(f"unknown integrator {integrator!r}; choose one of {', '.join(INTEGRATORS)}")
        self.integrator = integrator
        self.solver = check_solver_name(solver)
        self.duration = self._positive(duration, "duration")
        self.frame_dt = None if frame_dt is None else self._positive(frame_dt, "frame_dt")
        self.linear_tol = self._positive(linear_tol, "linear_tol")
        if linear_solver not in LINEAR_SOLVERS:
            raise ParameterError(f"unknown linear_solver {linear_solver!r}; choose one of {', '.join(LINEAR_SOLVERS)}")
        self.linear_solver = linear_solver
        self.solver_options = dict(solver_options or {})
        self.name = name
        self.fem_bodies: list[FemBodySpec] = []
        self.rigid_bodies: list[RigidBodySpec] = []
        self.joints: list = []
        self.attachments: list = []
        self.rods: list = []           # RodSpec (femcontact.rod_spec), after rigid bodies in DOF order
        # contact (femcontact.contact): obstacles, per-pair settings, defaults for body-body pairs
        from .contact.obstacles import ContactParams

        self.obstacles: list = []
        self.contact_pairs: list = []
        self.contact_defaults = ContactParams(friction=friction)
        self.contact_defaults.row("Scene contact defaults")
        self.contact_margin = self._margin(contact_margin)

    @staticmethod
    def _positive(value, what: str) -> float:
        if not isinstance(value, (int, float)) or not np.isfinite(value) or value <= 0:
            raise ParameterError(f"{what} must be a positive number, got {value!r}")
        return float(value)

    def _unique_name(self, name: Optional[str], prefix: str) -> str:
        taken = {b.name for b in self.all_bodies} | {o.name for o in getattr(self, "obstacles", [])}
        if name is None:
            k = len(taken)
            while f"{prefix}{k}" in taken:
                k += 1
            return f"{prefix}{k}"
        if name in taken:
            raise ParameterError(f"a body or obstacle named {name!r} already exists in the scene")
        return name

    def add_fem_body(self, mesh: TetMesh, material: Material, position=(0.0, 0.0, 0.0), rotation=None,
                     velocity=(0.0, 0.0, 0.0), name: Optional[str] = None) -> FemBodySpec:
        """Add a deformable body. The mesh (m) is rotated by ``rotation`` then moved by ``position``;
        ``velocity`` (m/s) is the initial velocity of every node. Returns the body's spec, whose
        ``pin``, ``drive`` and ``add_force`` set boundary conditions."""
        name = self._unique_name(name, "body")
        if not isinstance(mesh, TetMesh):
            raise MeshError(f"body {name!r}: expected a femcontact.meshes.TetMesh, got {type(mesh).__name__}")
        if not isinstance(material, Material):
            raise ParameterError(f"body {name!r}: expected a femcontact.Material, got {type(material).__name__}")
        check_tet_mesh(mesh, name)
        R = as_rotation_matrix(rotation)
        x = mesh.vertices @ R.T + _vec3(position, f"position of {name!r}")
        v = np.tile(_vec3(velocity, f"velocity of {name!r}"), (len(x), 1))
        body = FemBodySpec(name, mesh, material, x, v)
        self.fem_bodies.append(body)
        return body

    def add_rigid_body(self, shape, *, density: Optional[float] = None, mass: Optional[float] = None,
                       inertia=None, position=(0.0, 0.0, 0.0), rotation=None, velocity=(0.0, 0.0, 0.0),
                       angular_velocity=(0.0, 0.0, 0.0), motion: Optional[Callable] = None,
                       name: Optional[str] = None) -> RigidBodySpec:
        """Add a rigid body (MATH.md §2): 6 DOF, linear and angular velocity in the world frame.

        shape: Box, Sphere, Capsule, Cylinder or TriangleMesh from ``femcontact.shapes``, placed
        by ``rotation`` then ``position`` (of the shape's own origin). Mass properties from
        ``density`` (kg/m^3), or ``mass`` (kg) with the shape's inertia scaled to it, or ``mass``
        and ``inertia`` (3x3 or its diagonal, kg m^2, about the centre of mass, shape frame).
        velocity: of the centre of mass (m/s); angular_velocity: world frame (rad/s).
        motion(t) -> (position, rotation): a kinematic body that follows this pose (infinite mass).
        Returns the body's spec (``add_force``, ``add_torque``).
        """
        from .bodies import rigid

        name = self._unique_name(name, "rigid")
        what = f"rigid body {name!r}"
        if not isinstance(shape, Shape):
            raise ParameterError(f"{what}: expected a shape from femcontact.shapes, got {type(shape).__name__}")
        if motion is not None and not callable(motion):
            raise ParameterError(f"{what}: motion must be a function t -> (position, rotation)")
        if (density is None) == (mass is None) and motion is None:
            raise ParameterError(f"{what}: give exactly one of density= (kg/m^3) or mass= (kg)")
        for value, label in ((density, "density"), (mass, "mass")):
            if value is not None and (not isinstance(value, (int, float)) or not np.isfinite(value) or value <= 0):
                raise ParameterError(f"{what}: {label} must be a positive number, got {value!r}")
        m1, com, I1 = rigid.mass_properties(shape, 1.0)
        if density is not None:
            m, I = m1 * density, I1 * density
        else:
            m = float(mass) if mass is not None else m1 * 1000.0
            I = I1 * (m / m1)
        if inertia is not None:
            I = rigid.check_inertia(inertia, what)
        R = as_rotation_matrix(rotation)
        spec = RigidBodySpec(name, shape, float(m), I, com, _vec3(position, f"position of {what}"), R,
                             _vec3(velocity, f"velocity of {what}"),
                             _vec3(angular_velocity, f"angular_velocity of {what}"), motion)
        if motion is not None:
            spec.position, spec.rotation = spec.pose(0.0)
        self.rigid_bodies.append(spec)
        return spec

    def add_joint(self, kind: str, parent: Optional[str], child: str, *, anchor=None, axis=None, limits=None,
                  stiffness: Optional[float] = None, damping: Optional[float] = None, name: Optional[str] = None):
        """Join rigid body ``child`` to rigid body ``parent`` (None: the world) where they are now.

        kind: "weld", "ball", "hinge" (rotation about ``axis``) or "prismatic" (sliding along
        ``axis``); anchor: world point (default: the child's centre of mass), axis: world direction.
        limits: (lower, upper) of the joint coordinate (rad for a hinge, m for a prismatic joint,
        measured from the pose at build time). stiffness (N/m or N m/rad) and damping (s) of the
        joint springs: None = automatic (``femcontact.bodies.joints``). Returns the JointSpec, whose
        ``set_drive(kp=, kd=, target=, velocity=, max_force=)`` adds a PD drive."""
        from .bodies.joints import make_joint

        names = {b.name: ("rigid" if isinstance(b, RigidBodySpec) else "fem") for b in self.all_bodies}
        name = name or f"joint{len(self.joints)}"
        if child in names and names[child] == "rigid" and anchor is None:
            anchor = self.body(child).com
        joint = make_joint(kind, parent, child, (0.0, 0.0, 0.0) if anchor is None else anchor, axis, limits,
                           stiffness, damping, name, names)
        self.joints.append(joint)
        return joint

    def attach(self, body: str, nodes: NodeSelector, to: Optional[str] = None, *, orientation: bool = False,
               target_nodes=None, tolerance: Optional[float] = None, stiffness: Optional[float] = None,
               damping: Optional[float] = None):
        """Glue the selected nodes of FEM body or rod ``body`` where they are now, by stiff springs
        (``femcontact.bodies.joints``), to ``to``: None (the world), a rigid body, or an FEM body (each
        node tied to the material point where it lies: barycentric in its containing tet, or on the
        nearest surface triangle within ``tolerance`` m (default 1e-3 of the body's size); or to the
        given FEM ``target_nodes``, one per selected node). Rod nodes may be "start" or "end". ``orientation=True`` (rods, to the world
        or a rigid body) also welds the frames of the segments touching the selected nodes: a clamp.
        Returns the selected body-local node indices."""
        from .bodies.joints import Attachment, locate_points
        from .rod_spec import RodSpec

        spec = self.body(body)
        what = f"attach {body!r}"
        if not isinstance(spec, (FemBodySpec, RodSpec)):
            raise ParameterError(f"{what}: {body!r} is a rigid body; connect rigid bodies with add_joint")
        target = None if to is None else self.body(to)
        if target is not None and not isinstance(target, (FemBodySpec, RigidBodySpec)):
            raise ParameterError(f"{what}: the target {to!r} must be a rigid body, an FEM body or None (the world)")
        if to == body:
            raise ParameterError(f"{what}: a body cannot be attached to itself")
        for value, label in ((stiffness, "stiffness"), (damping, "damping"), (tolerance, "tolerance")):
            if value is not None and (not isinstance(value, (int, float)) or not np.isfinite(value) or value <= 0):
                raise ParameterError(f"{what}: {label} must be a positive number or None, got {value!r}")
        if isinstance(spec, RodSpec):
            if isinstance(nodes, str) and nodes in ("start", "end"):
                nodes = [0 if nodes == "start" else spec.n_points - 1]
            idx, points = spec._nodes(nodes), spec.points
        else:
            idx, points = spec.select(nodes), spec.positions
        if len(idx) == 0:
            raise ParameterError(f"{what}: the selection {nodes!r} picks no node")
        segments = np.zeros(0, np.int64)
        if orientation:
            if not isinstance(spec, RodSpec) or isinstance(target, FemBodySpec):
                raise ParameterError(f"{what}: orientation=True clamps rod segments to a rigid body or the world")
            segments = np.unique(np.concatenate([idx - 1, idx]).clip(0, spec.n_segments - 1))
        name = f"attach{len(self.attachments)}"
        if isinstance(target, FemBodySpec):
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
                t_nodes, weights = locate_points(points[idx], target.positions, target.mesh.tets, tol,
                                                 f"{what} to {to!r}")
            self.attachments.append(Attachment(body, idx, None, stiffness, damping, name, to, t_nodes, weights))
        else:
            if target_nodes is not None:
                raise ParameterError(f"{what}: target_nodes only applies to an FEM target")
            self.attachments.append(Attachment(body, idx, to, stiffness, damping, name, segments=segments))
        return idx

    def add_rod(self, points, radius: float, material: Optional[Material] = None, *, youngs_modulus=None,
                poisson_ratio=None, shear_modulus=None, density=None, rayleigh_alpha: float = 0.0,
                rayleigh_beta: float = 0.0, velocity=(0.0, 0.0, 0.0), rest_shape: str = "initial", d1=None,
                self_contact: bool = True, name: Optional[str] = None):
        """Add a Cosserat rod (cable; MATH.md §2) along the polyline ``points`` ((n+1, 3), m; e.g.
        ``fc.meshes.rod_straight/rod_arc/rod_helix``) with circular section ``radius`` (m).

        Material: ``material=fc.Material(E, nu, density, rayleigh_alpha, rayleigh_beta)``, or
        ``youngs_modulus`` (Pa), ``poisson_ratio`` (default 0.3) and ``density`` (kg/m^3);
        ``shear_modulus`` (Pa) overrides G = E/(2(1+nu)). Stiffnesses: stretch EA, shear kGA,
        bend EI, twist GJ. velocity: (3,) or (n+1, 3) initial node velocities (m/s).
        rest_shape: "initial" (natural curvature and twist of the given points) or "straight".
        d1: first material direction of the first segment (default: any perpendicular).
        self_contact: detect contact between non-adjacent segments of this rod.
        Returns a ``RodSpec`` with ``clamp``, ``pin``, ``drive``, ``add_force``, ``add_torque``.
        """
        from .rod_spec import make_rod

        name = self._unique_name(name, "rod")
        spec = make_rod(name, points, radius, material, youngs_modulus, poisson_ratio, shear_modulus, density,
                        rayleigh_alpha, rayleigh_beta, velocity, rest_shape, d1, self_contact)
        self.rods.append(spec)
        return spec

    @property
    def all_bodies(self) -> list:
        """Every body in DOF order: FEM bodies, then rigid bodies, then rods."""
        return [*self.fem_bodies, *getattr(self, "rigid_bodies", []), *getattr(self, "rods", [])]

    def body(self, name: str):
        for b in self.all_bodies:
            if b.name == name:
                return b
        raise ParameterError(f"no body named {name!r}; bodies: {[b.name for b in self.all_bodies]}")

    # ------------------------------------------------------------------ contact
    @staticmethod
    def _margin(value) -> Optional[float]:
        if value is None:
            return None
        if not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
            raise ParameterError(f"contact_margin must be a non-negative distance in m or None, got {value!r}")
        return float(value)

    def add_obstacle(self, shape, position=(0.0, 0.0, 0.0), rotation=None, *, motion=None, velocity=None,
                     angular_velocity=None, friction=None, friction_axes=None, restitution: float = 0.0,
                     stiffness=None, tau_d=None, hc_dissipation=None, stiction_tolerance=None, sigma=None,
                     name: Optional[str] = None):
        """Add a static or kinematic obstacle (infinite mass; its pose is prescribed).

        shape: a ``femcontact.shapes`` shape (HalfSpace, Box, Sphere, Capsule, Cylinder,
        TriangleMesh), placed by ``rotation`` (3x3, quaternion wxyz or scipy Rotation) then
        ``position`` (m). Kinematic motion: ``motion(t) -> (position (3,), rotation)`` or constant
        ``velocity`` (m/s) / ``angular_velocity`` (rad/s, world frame, about the obstacle origin).
        friction: mu or (mu1, mu2) (default: the scene's); with (mu1, mu2), ``friction_axes`` is the
        first tangent direction in the obstacle's frame (projected onto the tangent plane).
        restitution in [0, 1]; stiffness (N/m), tau_d (s), hc_dissipation (s/m), stiction_tolerance
        (m/s), sigma: Newton-path contact parameters, None = automatic. Returns the ObstacleSpec.
        """
        from .contact.obstacles import make_obstacle

        name = self._unique_name(name, "obstacle")
        params = self.contact_defaults.merged(friction=friction, restitution=restitution, stiffness=stiffness,
                                              tau_d=tau_d, hc_dissipation=hc_dissipation,
                                              stiction_tolerance=stiction_tolerance, sigma=sigma)
        spec = make_obstacle(name, shape, position, rotation, motion, velocity, angular_velocity, params,
                             friction_axes)
        self.obstacles.append(spec)
        return spec

    def obstacle(self, name: str):
        for o in self.obstacles:
            if o.name == name:
                return o
        raise ParameterError(f"no obstacle named {name!r}; obstacles: {[o.name for o in self.obstacles]}")

    def set_contact(self, name_a: str, name_b: str, *, enabled: bool = True, friction=None, friction_axes=None,
                    restitution=None, stiffness=None, tau_d=None, hc_dissipation=None, stiction_tolerance=None,
                    sigma=None) -> None:
        """Contact settings of one pair of bodies or of a body and an obstacle (by name).

        enabled=False: the pair never collides. Unset parameters keep the pair's defaults (the
        scene's for two bodies, the obstacle's for body-obstacle). friction_axes: first tangent
        direction (world frame for body pairs, obstacle frame for obstacles). Names are checked
        when the model is built (so bodies may be added later).
        """
        from .contact.obstacles import ContactParams, friction_pair

        what = f"set_contact({name_a!r}, {name_b!r})"
        if not isinstance(name_a, str) or not isinstance(name_b, str) or name_a == name_b:
            raise ParameterError(f"{what}: give the names of two different bodies/obstacles")
        if friction is not None:
            friction_pair(friction, what)
        ContactParams(friction=0.0 if friction is None else friction,
                      restitution=0.0 if restitution is None else restitution, stiffness=stiffness, tau_d=tau_d,
                      hc_dissipation=hc_dissipation, stiction_tolerance=stiction_tolerance, sigma=sigma).row(what)
        axes = None
        if friction_axes is not None:
            axes = np.asarray(friction_axes, float).reshape(-1, 3)[0] if np.size(friction_axes) >= 3 else None
            if axes is None or not np.isfinite(axes).all() or np.linalg.norm(axes) < 1e-12:
                raise ParameterError(f"{what}: friction_axes must be a non-zero 3-vector, got {friction_axes!r}")
            axes = axes / np.linalg.norm(axes)
        self.contact_pairs.append(dict(a=name_a, b=name_b, enabled=bool(enabled), friction_axes=axes,
                                       overrides=dict(friction=friction, restitution=restitution,
                                                      stiffness=stiffness, tau_d=tau_d,
                                                      hc_dissipation=hc_dissipation,
                                                      stiction_tolerance=stiction_tolerance, sigma=sigma)))
