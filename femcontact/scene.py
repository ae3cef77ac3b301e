"""Scene: the user-facing builder. It only records what the user asked for: each ``add_*`` call
makes a spec (``femcontact.spec``, where the checks live) and collects it; ``Model`` turns the
scene into static Taichi data."""
from __future__ import annotations

import os
from typing import Callable, Optional, Sequence

from .errors import ParameterError
from .meshes.types import TetMesh
from .spec.contact import ContactPair, ContactParams, ObstacleSpec, make_contact_pair, make_obstacle
from .spec.drive import NodeDrive, PositionDrive, VelocityDrive  # noqa: F401 (re-exported: their old home)
from .spec.fem import FemBodySpec, check_tet_mesh, make_fem_body  # noqa: F401 (likewise)
from .spec.force import BodyForce, NodalForce, nodal_force  # noqa: F401 (likewise)
from .spec.joint import Attachment, JointSpec, make_attachment, make_joint
from .spec.material import Material
from .spec.names import INTEGRATORS, LINEAR_SOLVERS, check_solver_name
from .spec.rigid import RigidBodySpec, make_rigid_body
from .spec.rod import RodSpec, make_rod
from .spec.spring import SpringSpec, make_spring
from .spec.selection import NodeSelector
from .spec.validation import as_rotation_matrix, check_drive, non_negative, positive, vec3  # noqa: F401 (likewise)


STICTION_MODES = ("regularized", "anchored")


class Scene:
    """What to simulate: bodies, materials, boundary conditions and step settings.

    dt: step size in s. gravity: (3,) m/s^2. integrator: "midpoint" (passive midpoint,
    COND eq. 9) or "euler" (implicit Euler, SAP eq. 15). solver: contact solver name (one of
    ``femcontact.spec.names.SOLVER_NAMES``: "cond", "sap", "lagged", "similar", "pgs", "incp"), or "auto" (default:
    the one that converges on this kind of scene, picked by the Simulator: "lagged" where a dynamic rigid body or
    robot can touch something, else "cond"; ``femcontact.convergence.choose_solver``); solver_options: its options.
    duration: default simulated time in s when a run does not say. frame_dt: time between
    written frames in s (None: every step). friction: default friction coefficient mu (or
    (mu1, mu2)) of body-body contacts and of obstacles added without one. contact_margin:
    detection distance in m (contacts with gap phi < margin are reported, so the solvers see
    them before touch); None: half the mean surface edge length of the scene's meshes.
    stiction: "anchored" (default: a sticking contact takes back the slip it made since it stuck,
    ``femcontact.contact.anchors``) or "regularized" (each solver's own friction law alone: SAP's and
    ICF's regularized stiction, COND's virtual-node damper, which let a contact held below the cone
    creep slowly, as in the papers).
    """

    def __init__(self, dt: float = 1e-2, gravity=(0.0, 0.0, -9.81), integrator: str = "midpoint",
                 solver: str = "auto", duration: float = 1.0, frame_dt: Optional[float] = None,
                 linear_solver: str = "auto", linear_tol: float = 1e-8, solver_options: Optional[dict] = None,
                 name: str = "scene", friction=0.5, contact_margin: Optional[float] = None,
                 stiction: str = "anchored"):
        self.dt = positive(dt, "dt")
        self.gravity = vec3(gravity, "gravity")
        if integrator not in INTEGRATORS:
            raise ParameterError(f"unknown integrator {integrator!r}; choose one of {', '.join(INTEGRATORS)}")
        self.integrator = integrator
        self.solver = solver
        self.duration = positive(duration, "duration")
        self.frame_dt = None if frame_dt is None else positive(frame_dt, "frame_dt")
        self.linear_tol = positive(linear_tol, "linear_tol")
        if linear_solver not in LINEAR_SOLVERS:
            raise ParameterError(f"unknown linear_solver {linear_solver!r}; choose one of {', '.join(LINEAR_SOLVERS)}")
        self.linear_solver = linear_solver
        self.solver_options = dict(solver_options or {})
        self.name = name
        self.fem_bodies: list[FemBodySpec] = []
        self.rigid_bodies: list[RigidBodySpec] = []
        self.rods: list[RodSpec] = []   # after the rigid bodies in DOF order
        self.joints: list[JointSpec] = []
        self.robots: list = []          # femcontact.robots.Robot handles (their bodies and joints are above)
        self.attachments: list[Attachment] = []
        self.springs: list[SpringSpec] = []
        # contact: obstacles, per-pair settings, defaults for body-body pairs
        self.obstacles: list[ObstacleSpec] = []
        self.contact_pairs: list[ContactPair] = []
        self.contact_defaults = ContactParams(friction=friction)
        self.contact_defaults.row("Scene contact defaults")
        self.contact_margin = None if contact_margin is None else non_negative(
            contact_margin, "contact_margin (a distance in m, or None)")
        if stiction not in STICTION_MODES:
            raise ParameterError(f"unknown stiction {stiction!r}; choose one of {', '.join(STICTION_MODES)}")
        self.stiction = stiction

    @property
    def solver(self) -> str:
        """Contact solver name; setting it checks that this version implements it."""
        return self._solver

    @solver.setter
    def solver(self, name: str) -> None:
        self._solver = check_solver_name(name)

    def _unique_name(self, name: Optional[str], prefix: str) -> str:
        taken = {b.name for b in self.all_bodies} | {o.name for o in self.obstacles}
        if name is None:
            k = len(taken)
            while f"{prefix}{k}" in taken:
                k += 1
            return f"{prefix}{k}"
        if name in taken:
            raise ParameterError(f"a body or obstacle named {name!r} already exists in the scene")
        return name

    def add_fem_body(self, mesh: TetMesh, material: Material, position=(0.0, 0.0, 0.0), rotation=None,
                     velocity=(0.0, 0.0, 0.0), name: Optional[str] = None, self_contact: bool = False) -> FemBodySpec:
        """Add a deformable body. The mesh (m) is rotated by ``rotation`` then moved by ``position``;
        ``velocity`` (m/s) is the initial velocity of every node. ``self_contact``: the body's surface
        also collides with itself (a mat folded onto itself), between a vertex and the surface
        triangles farther from it at rest than ``SELF_CONTACT_REST_GAP`` surface edges (friction:
        the bodies' default, or ``set_contact(name, name, ...)``). Returns the body's spec, whose
        ``pin``, ``drive`` and ``add_force`` set boundary conditions."""
        body = make_fem_body(self._unique_name(name, "body"), mesh, material, position, rotation, velocity,
                             self_contact)
        self.fem_bodies.append(body)
        return body

    def add_rigid_body(self, shape, *, density: Optional[float] = None, mass: Optional[float] = None,
                       inertia=None, position=(0.0, 0.0, 0.0), rotation=None, velocity=(0.0, 0.0, 0.0),
                       angular_velocity=(0.0, 0.0, 0.0), motion: Optional[Callable] = None,
                       name: Optional[str] = None) -> RigidBodySpec:
        """Add a rigid body (docs/THEORY.md §2): 6 DOF, linear and angular velocity in the world frame.

        shape: Box, Sphere, Capsule, Cylinder or TriangleMesh from ``femcontact.shapes``, placed
        by ``rotation`` then ``position`` (of the shape's own origin). Mass properties from
        ``density`` (kg/m^3), or ``mass`` (kg) with the shape's inertia scaled to it, or ``mass``
        and ``inertia`` (3x3 or its diagonal, kg m^2, about the centre of mass, shape frame).
        velocity: of the centre of mass (m/s); angular_velocity: world frame (rad/s).
        motion(t) -> (position, rotation): a kinematic body that follows this pose (infinite mass).
        Returns the body's spec (``add_force``, ``add_torque``).
        """
        spec = make_rigid_body(self._unique_name(name, "rigid"), shape, density, mass, inertia, position, rotation,
                               velocity, angular_velocity, motion)
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
        names = {**{b.name: "fem" for b in self.fem_bodies}, **{b.name: "rigid" for b in self.rigid_bodies},
                 **{b.name: "rod" for b in self.rods}}
        name = name or f"joint{len(self.joints)}"
        if child in names and names[child] == "rigid" and anchor is None:
            anchor = self.body(child).com
        joint = make_joint(kind, parent, child, (0.0, 0.0, 0.0) if anchor is None else anchor, axis, limits,
                           stiffness, damping, name, names)
        self.joints.append(joint)
        return joint

    def add_spring(self, body_a: str, body_b: Optional[str] = None, *, anchor_a=None, anchor_b=None,
                   stiffness: float, damping: float = 0.0, rest_length: Optional[float] = None,
                   name: Optional[str] = None) -> SpringSpec:
        """A linear spring–damper between rigid body ``body_a`` and rigid body ``body_b`` (None: the world).

        anchor_a, anchor_b: world points at build time (m) fixed in each body from then on (default:
        the body's centre of mass; required for the world). stiffness k (N/m) and damping c (N s/m),
        both >= 0: force ``k (ℓ − ℓ₀)`` along the line between the anchors plus ``c`` times the rate
        of ℓ. rest_length ℓ₀ (m; None: the anchors' distance now, so the spring starts unloaded; 0:
        a zero-length spring, force ``−k d``, which is how coincident anchors are handled).
        Implicit in the step like a joint (``femcontact.bodies.springs``). Returns the SpringSpec."""
        bodies = {b.name: (kind, b) for kind, group in (("fem", self.fem_bodies), ("rigid", self.rigid_bodies),
                                                        ("rod", self.rods)) for b in group}
        name = name or f"spring{len(self.springs)}"
        if name in {s.name for s in self.springs}:
            raise ParameterError(f"a spring named {name!r} already exists in the scene")
        spec = make_spring(name, body_a, body_b, anchor_a, anchor_b, stiffness, damping, rest_length, bodies)
        self.springs.append(spec)
        return spec

    def add_robot(self, source: str | os.PathLike, *, base_pose=None, joint_positions=None, fixed_base: bool = True,
                  name: Optional[str] = None, kp=None, kd=None, drive_time_constant: float = 0.05,
                  gravity_compensation: bool = True, package_dirs: Sequence[str] = (),
                  end_effector: str | Sequence[str] | None = None):
        """Add a robot from a URDF file, or by name from an installed package (``"panda"``: the
        Franka Panda arm and hand of ``example-robot-data``, ``pip install 'femcontact[robots]'``).

        Links become rigid bodies (links joined by fixed joints: one body), joints hinges and
        prismatic joints with their limits, mimic joints joint-space couplings
        (``femcontact.robots.urdf``). base_pose: (position, rotation) or a 4x4 world pose of the
        base link; joint_positions: URDF positions (rad, m) of the actuated joints (array in URDF
        order or a dict by name; default 0 within limits, the Panda's "ready" pose for "panda");
        fixed_base: the base link is welded to the world (kinematic). Every actuated joint gets a PD
        drive toward its start position with the URDF effort limit: gains ``kp``, ``kd`` (a number,
        one per joint, or a dict), by default critically damped with time constant
        ``drive_time_constant`` s for the inertia it carries at the start; gravity_compensation:
        the joints also balance the weight they carry. Bodies are named ``"<name>.<link>"``, joints
        ``"<name>.<joint>"``. end_effector: the URDF link(s) whose net contact force the run's
        ``<name>_joints.csv`` reports (default: the Panda's hand and fingers; other robots: None, the
        total over all links). Returns a ``Robot`` (joint names, ``link_pose``, ``joint_positions``,
        ``set_targets(sim.control, q)``, ``forward_kinematics``)."""
        from .robots.urdf import load_robot

        robot = load_robot(self, source, base_pose=base_pose, joint_positions=joint_positions, fixed_base=fixed_base,
                           name=name, kp=kp, kd=kd, drive_time_constant=drive_time_constant,
                           gravity_compensation=gravity_compensation, package_dirs=package_dirs,
                           end_effector=end_effector)
        self.robots.append(robot)
        return robot

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
        spec = self.body(body)
        target = None if to is None else self.body(to)
        attachment = make_attachment(spec, target, nodes, f"attach{len(self.attachments)}", orientation, target_nodes,
                                     tolerance, stiffness, damping)
        self.attachments.append(attachment)
        return attachment.nodes

    def add_rod(self, points, radius: float, material: Optional[Material] = None, *, youngs_modulus=None,
                poisson_ratio=None, shear_modulus=None, density=None, rayleigh_alpha: float = 0.0,
                rayleigh_beta: float = 0.0, velocity=(0.0, 0.0, 0.0), rest_shape: str = "initial", d1=None,
                self_contact: bool = True, name: Optional[str] = None):
        """Add a Cosserat rod (cable; docs/THEORY.md §2) along the polyline ``points`` ((n+1, 3), m; e.g.
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
        name = self._unique_name(name, "rod")
        spec = make_rod(name, points, radius, material, youngs_modulus, poisson_ratio, shear_modulus, density,
                        rayleigh_alpha, rayleigh_beta, velocity, rest_shape, d1, self_contact)
        self.rods.append(spec)
        return spec

    @property
    def all_bodies(self) -> list:
        """Every body in DOF order: FEM bodies, then rigid bodies, then rods."""
        return [*self.fem_bodies, *self.rigid_bodies, *self.rods]

    def body(self, name: str):
        for b in self.all_bodies:
            if b.name == name:
                return b
        raise ParameterError(f"no body named {name!r}; bodies: {[b.name for b in self.all_bodies]}")

    # ------------------------------------------------------------------ contact
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
        when the model is built (so bodies may be added later). The same name twice sets an FEM
        body's self-contact (added before, with ``self_contact=True``).
        """
        if name_a == name_b and not any(b.name == name_a and b.self_contact for b in self.fem_bodies):
            raise ParameterError(f"set_contact({name_a!r}, {name_b!r}): give two different bodies/obstacles, or the "
                                 "same FEM body twice for its self-contact (add it first, with self_contact=True)")
        self.contact_pairs.append(make_contact_pair(
            name_a, name_b, enabled, friction_axes, friction=friction, restitution=restitution, stiffness=stiffness,
            tau_d=tau_d, hc_dissipation=hc_dissipation, stiction_tolerance=stiction_tolerance, sigma=sigma))
