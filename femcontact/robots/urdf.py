"""URDF robots as rigid bodies and joints: the host side of ``Scene.add_robot``.

A URDF is read with ``yourdfpy`` (its collision meshes with ``trimesh``; the optional extra
``femcontact[robots]``; ``robots/description.py``). The mapping:

- links joined by ``fixed`` joints are merged into one rigid body (masses, centres of mass and
  inertias combined exactly; a massless frame link such as a tool centre point costs nothing);
  each URDF link keeps its frame in its body (``Robot.link_pose``);
- collision geometry: one box, sphere or cylinder is that shape; a mesh, or several pieces, is a
  ``TriangleMesh`` (pieces united by trimesh's boolean union, else their convex hull, with a
  warning); a body with none gets a small sphere at its centre of mass and a warning;
- ``revolute`` / ``continuous`` joints are hinges, ``prismatic`` ones prismatic joints, with the
  URDF limits and the URDF coordinate (``JointSpec.position0``: coordinates, limits and targets are
  URDF joint positions); ``<mimic>`` joints are stiff joint-space rows ``s = m s_leader + offset``;
- the stiffness of a robot joint's rows scales with what it carries (``ref_mass``,
  ``ref_inertia``): its error under the weight of the chain below it stays that of one light link;
- every actuated joint gets an effort-limited PD drive (URDF ``effort``) toward the build pose,
  critically damped at ``drive_time_constant`` unless gains are given, and gravity compensation;
- a fixed base is a kinematic body; links of one robot never collide with each other.

Limits of this version: a hinge's coordinate is unwrapped step by step (a continuous joint may
turn any number of times; it must turn less than π in one step); floating and planar
joints are refused; the first load of a URDF parses it (yourdfpy), makes its collision meshes (trimesh)
and samples their SDF grids (about 1 s of CPU for the Panda's ten links, on background threads while
the caller goes on: the Simulator's contact tables wait for it); all of these land in the geometry
cache (``femcontact.geometry_cache``, keyed by content), so a later process reads them back without
importing yourdfpy or trimesh.

Output (``io/robot_output.py``, ``Simulator.run(out=...)``): ``<robot>_joints.csv`` and the links'
meshes (``Robot.link_meshes``: collision, or visual with ``link_geometry = "visual"``) as pieces.

``package://NAME/path`` resolves against an ancestor folder of the URDF named NAME (or holding
NAME), then the folders in ``package_dirs`` and ``ROS_PACKAGE_PATH``. Nothing is downloaded.
"""
from __future__ import annotations

import importlib.metadata
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence, Union

import numpy as np
from scipy.spatial.transform import Rotation

from .. import geometry_cache
from ..errors import ParameterError
from ..geometry.mass import check_inertia
from ..geometry.shapes import Box, Cylinder, Sphere, TriangleMesh
from ..spec.drive import Drive
from ..spec.joint import Mimic, make_joint
from ..spec.rigid import RigidBodySpec
from ..spec.validation import as_rotation_matrix, positive, vec3
from .description import read_urdf
from .ik import JointTrajectory, cartesian_path

# robots shipped by installable packages: name -> (distribution, URDF inside it)
KNOWN_ROBOTS = {
    "panda": ("example-robot-data",
              "cmeel.prefix/share/example-robot-data/robots/panda_description/urdf/panda.urdf"),
}
# the links whose contact force a known robot reports as its end effector's (output)
KNOWN_END_EFFECTORS = {"panda": ("panda_hand", "panda_leftfinger", "panda_rightfinger")}
# the Panda's "ready" pose (rad; fingers 4 cm open each)
PANDA_READY = (0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398, 0.04)
JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed")
MESH_RESOLUTION = 24
# in the geometry cache's keys: grids sampled by an older sample_grid (version 1 took only the 24 nearest
# centroids' triangles: up to 33 mm off near long thin ones on the Panda) are not served again; the same
# for meshes made by an older _collision_shape / link_meshes
SDF_VERSION = 2
MESH_VERSION = 1

Gains = Union[float, Sequence[float], Mapping[str, float], None]


def robot_urdf_path(name: str) -> Path:
    """The URDF of a robot shipped by an installed package (``KNOWN_ROBOTS``), or a clear error."""
    dist, rel = KNOWN_ROBOTS[name]
    try:
        path = Path(str(importlib.metadata.distribution(dist).locate_file(rel)))
    except importlib.metadata.PackageNotFoundError:
        raise ParameterError(f"robot {name!r} comes with the package {dist!r}: install the optional extra "
                             "with pip install 'femcontact[robots]'") from None
    if not path.is_file():
        raise ParameterError(f"robot {name!r}: {path} is missing from the installed package {dist!r}")
    return path


def _transform(R=None, p=None) -> np.ndarray:
    T = np.eye(4)
    if R is not None:
        T[:3, :3] = R
    if p is not None:
        T[:3, 3] = p
    return T


def _joint_motion(kind: str, axis: np.ndarray, q: float) -> np.ndarray:
    if kind in ("revolute", "continuous"):
        return _transform(Rotation.from_rotvec(axis * q).as_matrix())
    if kind == "prismatic":
        return _transform(p=axis * q)
    return np.eye(4)


@dataclass
class RobotJoint:
    """One non-fixed URDF joint: its scene joint, URDF kind, axis (joint frame), origin (parent link
    frame), limits and its mimic leader (URDF names)."""

    urdf_name: str
    name: str
    kind: str
    parent: str
    child: str
    origin: np.ndarray
    axis: np.ndarray
    limits: Optional[tuple]
    effort: Optional[float]
    mimic: Optional[tuple] = None     # (leader URDF name, multiplier, offset)


@dataclass
class Robot:
    """A robot added by ``Scene.add_robot``: names, frames and joint-space helpers.

    ``joints``: the actuated (driven, non-mimic) joints' URDF names in URDF order; ``joint_names``:
    their scene joint names (for ``sim.control``). Joint positions are URDF coordinates (rad, m).
    """

    name: str
    urdf_path: Path
    base_link: str
    base_pose: np.ndarray                          # 4x4 world pose of the base link at build
    joints: list[str]
    all_joints: dict[str, RobotJoint]              # every non-fixed joint by URDF name
    link_body: dict[str, tuple[str, np.ndarray]]   # URDF link -> (body name, T_body_link)
    tree: dict[str, list]                          # link -> [(joint URDF name or None, origin, child link)]
    q0: dict[str, float]                           # every non-fixed joint's build position
    bodies: list[str] = field(default_factory=list)
    com_local: dict[str, np.ndarray] = field(default_factory=dict)
    end_effector: Optional[list[str]] = None       # URDF links whose contact force is reported (output)
    link_geometry: str = "collision"               # what the output draws per link: "collision" or "visual"
    geometry: dict[str, tuple] = field(default_factory=dict, repr=False)   # link -> (visuals, collisions)
    resolve: Optional[Callable] = field(default=None, repr=False)          # package:// resolver
    _link_meshes: Optional[dict] = field(default=None, repr=False)

    @property
    def end_effector_bodies(self) -> list[str]:
        """The bodies holding the ``end_effector`` links (every body of the robot when None)."""
        if self.end_effector is None:
            return list(self.bodies)
        return list(dict.fromkeys(self.link_body[link][0] for link in self.end_effector))

    @property
    def joint_names(self) -> list[str]:
        return [self.all_joints[j].name for j in self.joints]

    def positions(self, q=None) -> dict[str, float]:
        """URDF positions of every non-fixed joint from an array over ``joints`` or a dict (mimics follow)."""
        out = dict(self.q0)
        if isinstance(q, Mapping):
            for k, v in q.items():
                if k not in self.all_joints:
                    raise ParameterError(f"robot {self.name!r}: no joint {k!r} (joints: {self.joints})")
                out[k] = float(v)
        elif q is not None:
            arr = np.asarray(q, float).reshape(-1)
            if len(arr) != len(self.joints):
                raise ParameterError(f"robot {self.name!r}: expected {len(self.joints)} joint positions "
                                     f"({self.joints}), got {len(arr)}")
            out.update(zip(self.joints, arr.tolist()))
        for j in self.all_joints.values():
            if j.mimic is not None:
                out[j.urdf_name] = j.mimic[1] * out[j.mimic[0]] + j.mimic[2]
        return out

    def chain(self, link: str) -> list[str]:
        """The moving joints (URDF names) from the base to ``link``, base first."""
        parent = {child: (jname, link_) for link_, kids in self.tree.items() for jname, _, child in kids}
        out = []
        while link in parent:
            jname, link = parent[link]
            if jname is not None:
                out.append(jname)
        return out[::-1]

    def kinematics_key(self) -> str:
        """Content key of everything ``forward_kinematics`` and ``positions`` read (the geometry cache's
        key of an IK path includes it)."""
        tree = sorted((link, [(j, np.asarray(o, float), c) for j, o, c in kids]) for link, kids in self.tree.items())
        joints = [(j.urdf_name, j.kind, j.parent, j.child, j.origin, j.axis, j.limits, j.mimic)
                  for j in self.all_joints.values()]
        return geometry_cache.content_key(self.base_link, self.base_pose, list(self.joints), tree, joints)

    def cartesian_path(self, link: str, path, duration: float, **options) -> JointTrajectory:
        """Joint trajectory that moves a point of ``link`` along ``path(t)`` (differential IK:
        ``femcontact.robots.ik.cartesian_path``, which lists the options)."""
        return cartesian_path(self, link, path, duration, **options)

    def follow(self, control, trajectory: JointTrajectory, t0: float = 0.0) -> None:
        """Drive the joints along ``trajectory`` (positions and rates as targets, starting at
        simulation time ``t0``) from the next step on."""
        for name, target, velocity in self._trajectory_targets(trajectory, t0):
            control.set_joint_drive(name, target=target, velocity=velocity)

    def set_trajectory(self, scene, trajectory: JointTrajectory, t0: float = 0.0) -> None:
        """``follow`` at build time: the scene's drives of the trajectory's joints track it from ``t0``."""
        joints = {j.name: j for j in scene.joints}
        for name, target, velocity in self._trajectory_targets(trajectory, t0):
            drive = joints[name].drive
            drive.target, drive.velocity = target, velocity

    def _trajectory_targets(self, trajectory: JointTrajectory, t0: float):
        """(scene joint name, target(t), rate(t)) per joint of ``trajectory``, time shifted by t0."""
        return [(self.all_joints[jn].name, lambda t, i=i: float(trajectory(t - t0)[i]),
                 lambda t, i=i: float(trajectory.velocity(t - t0)[i])) for i, jn in enumerate(trajectory.joints)]

    def forward_kinematics(self, q=None) -> dict[str, np.ndarray]:
        """World 4x4 pose of every link for joint positions ``q`` (array over ``joints`` or dict;
        None: the build pose), the base at its build pose."""
        pos = self.positions(q)
        out = {self.base_link: self.base_pose.copy()}
        stack = [self.base_link]
        while stack:
            link = stack.pop()
            for jname, origin, child in self.tree.get(link, []):
                j = self.all_joints.get(jname)
                motion = np.eye(4) if j is None else _joint_motion(j.kind, j.axis, pos[jname])
                out[child] = out[link] @ origin @ motion
                stack.append(child)
        return out

    def link_pose(self, sim, link: str) -> np.ndarray:
        """World 4x4 pose of URDF link ``link`` now in ``sim``."""
        if link not in self.link_body:
            raise ParameterError(f"robot {self.name!r}: no link {link!r} (links: {sorted(self.link_body)})")
        body, T_bl = self.link_body[link]
        c, R = sim.rigid_pose(body)
        return _transform(R, c - R @ self.com_local[body]) @ T_bl

    def joint_position(self, sim, joint: str) -> float:
        """URDF position (rad or m) of any moving joint (mimics too) now in ``sim``, from its links' poses
        (a hinge's on the branch of the simulator's unwrapped angle: 4 rad reads 4, not 4 − 2π)."""
        if joint not in self.all_joints:
            raise ParameterError(f"robot {self.name!r}: no moving joint {joint!r} ({sorted(self.all_joints)})")
        j = self.all_joints[joint]
        T = np.linalg.inv(self.link_pose(sim, j.parent) @ j.origin) @ self.link_pose(sim, j.child)
        if j.kind == "prismatic":
            return float(T[:3, 3] @ j.axis)
        q = float(Rotation.from_matrix(T[:3, :3]).as_rotvec() @ j.axis)
        ref = None if sim.model.joints is None else sim.model.joints.hinge_coordinate(sim.state, j.name)
        ref = self.q0[joint] if ref is None else ref          # the hinge's unwrapped angle (turns counted)
        return q + 2 * np.pi * round((ref - q) / (2 * np.pi))

    def joint_velocity(self, sim, joint: str) -> float:
        """Rate (rad/s or m/s) of any moving joint now in ``sim``: the child's angular velocity relative
        to the parent about the joint axis (hinge), or the relative velocity of the joint origin along
        it (prismatic)."""
        if joint not in self.all_joints:
            raise ParameterError(f"robot {self.name!r}: no moving joint {joint!r} ({sorted(self.all_joints)})")
        j = self.all_joints[joint]
        T = self.link_pose(sim, j.parent) @ j.origin
        axis, point = T[:3, :3] @ j.axis, T[:3, 3]
        rel = []
        for link in (j.parent, j.child):
            body = self.link_body[link][0]
            (c, _), (v, w) = sim.rigid_pose(body), sim.rigid_velocity(body)
            rel.append(w if j.kind != "prismatic" else v + np.cross(w, point - c))
        return float(axis @ (rel[1] - rel[0]))

    def joint_positions(self, sim) -> np.ndarray:
        """URDF positions (rad, m) of ``joints`` now in ``sim``."""
        return np.array([self.joint_position(sim, jn) for jn in self.joints])

    def set_targets(self, control, positions=None, velocities=None) -> None:
        """Drive targets from the next step on: ``positions`` / ``velocities`` arrays over ``joints``
        (or dicts by URDF joint name; None leaves them)."""
        for values, key in ((positions, "target"), (velocities, "velocity")):
            if values is None:
                continue
            items = values.items() if isinstance(values, Mapping) else zip(
                self.joints, np.broadcast_to(np.asarray(values, float), (len(self.joints),)).tolist())
            for jn, val in items:
                if jn not in self.all_joints or jn not in self.joints:
                    raise ParameterError(f"robot {self.name!r}: {jn!r} is not a driven joint ({self.joints})")
                control.set_joint_drive(self.all_joints[jn].name, **{key: val})

    def set_gravity_compensation(self, control, on: bool = True) -> None:
        """Gravity compensation of every joint of the robot on or off from the next step on."""
        control.set_gravity_compensation([j.name for j in self.all_joints.values()], on)

    def link_meshes(self) -> dict[str, tuple[np.ndarray, np.ndarray, str]]:
        """Per URDF link with geometry: ``(vertices (n, 3) in the link frame, triangles, source)``.
        ``link_geometry = "collision"`` (default): the link's own collision meshes and primitives, as
        the URDF gives them (a few hundred triangles per Panda link); ``"visual"``: its visual meshes
        (the Panda's: 150k triangles, 2.5 s to read, 4 MB per frame), the collision ones for a link
        whose visual mesh cannot be read. Read on the first call, then kept (source says which)."""
        if self.link_geometry not in ("collision", "visual"):
            raise ParameterError(f"robot {self.name!r}: link_geometry must be 'collision' or 'visual', "
                                 f"got {self.link_geometry!r}")
        if self._link_meshes is None or self._link_meshes[0] != self.link_geometry:
            out = {}
            for link, (visuals, collisions) in self.geometry.items():
                order = (("visual", visuals),) if self.link_geometry == "visual" else ()
                for source, pieces in order + (("collision", collisions),):
                    if not pieces:
                        continue
                    try:
                        mesh = self._merged_mesh(pieces, f"robot {self.name!r}: link {link!r}")
                    except (ParameterError, ValueError, ImportError):
                        continue
                    if len(mesh["faces"]):
                        out[link] = (mesh["vertices"], mesh["faces"], source)
                        break
            self._link_meshes = (self.link_geometry, out)
        return self._link_meshes[1]

    def _merged_mesh(self, pieces: list, what: str) -> dict:
        """The pieces [(geometry, T_link_piece)] as one mesh {vertices, faces}: made by trimesh once,
        then read from the geometry cache."""
        def merge() -> dict:
            import trimesh

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                meshes = [_piece_mesh(g, T, self.resolve, what) for g, T in pieces]
            mesh = trimesh.util.concatenate(meshes)
            mesh.merge_vertices()
            return {"vertices": np.asarray(mesh.vertices, float), "faces": np.asarray(mesh.faces, np.int64)}

        key = _pieces_key(pieces, self.resolve, "link mesh")
        return merge() if key is None else geometry_cache.cached("linkmesh", key, ["vertices", "faces"], merge)

    def link_surfaces(self, sim) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Every link with geometry (``link_meshes``) in its pose now: {link: (world vertices, triangles)}."""
        out = {}
        for link, (v, f, _) in self.link_meshes().items():
            T = self.link_pose(sim, link)
            out[link] = (v @ T[:3, :3].T + T[:3, 3], f)
        return out


# ---------------------------------------------------------------------------------------------- loading
def _package_resolver(urdf_path: Path, package_dirs: Sequence[str]):
    roots = list(urdf_path.resolve().parents)
    extra = [Path(p) for p in package_dirs] + [Path(p) for p in os.environ.get("ROS_PACKAGE_PATH", "").split(":") if p]

    def resolve(filename: str) -> Path:
        if filename.startswith("package://"):
            pkg, _, rest = filename[len("package://"):].partition("/")
            for root in roots + extra:
                for cand in (root / rest if root.name == pkg else None, root / pkg / rest):
                    if cand is not None and cand.is_file():
                        return cand
            return roots[0] / pkg / rest       # not found: reported by the caller
        if filename.startswith("file://"):
            filename = filename[len("file://"):]
        p = Path(filename)
        return p if p.is_absolute() else urdf_path.resolve().parent / p
    return resolve


def _piece_mesh(geometry, T: np.ndarray, resolve, what: str):
    """A collision piece as a trimesh in the body frame."""
    import trimesh

    if geometry.box is not None:
        m = trimesh.creation.box(extents=np.asarray(geometry.box.size, float))
    elif geometry.sphere is not None:
        m = trimesh.creation.icosphere(subdivisions=2, radius=float(geometry.sphere.radius))
    elif geometry.cylinder is not None:
        m = trimesh.creation.cylinder(radius=float(geometry.cylinder.radius), height=float(geometry.cylinder.length),
                                      sections=24)
    else:
        path = resolve(geometry.mesh.filename)
        if not path.is_file():
            raise ParameterError(f"{what}: mesh file {geometry.mesh.filename!r} not found (looked for {path})")
        try:
            m = trimesh.load(str(path), force="mesh")
        except Exception as exc:   # trimesh raises many kinds for an unreadable file
            raise ParameterError(f"{what}: cannot read mesh {path}: {exc}") from None
        if geometry.mesh.scale is not None:
            m.apply_scale(np.broadcast_to(np.asarray(geometry.mesh.scale, float), (3,)))
    m = m.copy()
    m.apply_transform(T)
    return m


def _pieces_key(pieces: list, resolve, *parts) -> Optional[str]:
    """Content key of geometry pieces [(geometry, T)]: each one's primitive parameters or mesh file
    bytes and scale, its transform, plus ``parts`` and the versions of the libraries that process them;
    None when a mesh file cannot be read (the caller then reports it)."""
    desc = []
    for g, T in pieces:
        if g.box is not None:
            item = ("box", np.asarray(g.box.size, float))
        elif g.sphere is not None:
            item = ("sphere", float(g.sphere.radius))
        elif g.cylinder is not None:
            item = ("cylinder", float(g.cylinder.radius), float(g.cylinder.length))
        else:
            try:
                data = resolve(g.mesh.filename).read_bytes()
            except OSError:
                return None
            scale = None if g.mesh.scale is None else np.asarray(g.mesh.scale, float)
            item = ("mesh", str(Path(g.mesh.filename).suffix).lower(), data, scale)
        desc.append((item, np.asarray(T, float)))
    versions = tuple(geometry_cache.library_version(d) for d in ("trimesh", "manifold3d"))
    return geometry_cache.content_key(MESH_VERSION, versions, parts, desc)


def _collision_shape(pieces: list, resolve, what: str):
    """(shape, T_body_shape) for a body's collision pieces [(geometry, T_body_piece)]; None if none.
    A mesh (or several pieces) is processed by trimesh once, then read from the geometry cache."""
    if not pieces:
        return None
    if len(pieces) == 1:
        g, T = pieces[0]
        if g.box is not None:
            return Box(np.asarray(g.box.size, float) / 2), T
        if g.sphere is not None:
            return Sphere(float(g.sphere.radius)), T
        if g.cylinder is not None:
            return Cylinder(float(g.cylinder.radius), float(g.cylinder.length) / 2), T

    def closed_surface() -> dict:
        meshes = [_piece_mesh(g, T, resolve, what) for g, T in pieces]
        import trimesh

        mesh = meshes[0]
        if len(meshes) > 1:
            try:
                mesh = trimesh.boolean.union(meshes)
            except Exception:          # no boolean engine, or it failed: the hull below
                mesh = None
        hull = mesh is None or not mesh.is_watertight or not mesh.is_winding_consistent or mesh.volume <= 0
        if hull:
            mesh = trimesh.util.concatenate(meshes).convex_hull
        return {"vertices": np.asarray(mesh.vertices, float), "faces": np.asarray(mesh.faces, np.int64),
                "hull": np.array(hull)}

    key = _pieces_key(pieces, resolve, "collision")
    surface = closed_surface() if key is None else geometry_cache.cached(
        "collision", key, ["vertices", "faces", "hull"], closed_surface)
    if bool(surface["hull"]):
        warnings.warn(f"{what}: its collision geometry is not one closed surface; using its convex hull",
                      stacklevel=4)
    return triangle_mesh(surface["vertices"], surface["faces"]), np.eye(4)


def triangle_mesh(vertices, faces, resolution: int = MESH_RESOLUTION) -> TriangleMesh:
    """``TriangleMesh(vertices, faces, resolution)`` with its signed-distance grid in the geometry cache
    (``femcontact.geometry_cache``, keyed by the mesh's content), so a robot's second load skips the
    sampling; a grid not in the cache is sampled by background threads while the caller goes on (the
    Simulator's contact tables wait for it)."""
    v = np.ascontiguousarray(vertices, float)
    f = np.ascontiguousarray(faces, np.int64)
    key = geometry_cache.content_key(SDF_VERSION, resolution, v, f)
    names = ["origin", "spacing", "dims", "grid"]
    data = geometry_cache.load("sdf", key, names)
    if data is not None and data["grid"].shape == tuple(data["dims"]):
        mesh = TriangleMesh.__new__(TriangleMesh)
        mesh.vertices, mesh.faces = v, f
        mesh.origin, mesh.spacing = data["origin"], float(data["spacing"])
        mesh.dims, mesh.grid = data["dims"], data["grid"]
        return mesh
    mesh = TriangleMesh(v, f, resolution=resolution, sample=False)

    def sample_and_cache() -> np.ndarray:
        grid = mesh.sample_grid()
        geometry_cache.store("sdf", key, dict(origin=mesh.origin, spacing=mesh.spacing, dims=mesh.dims, grid=grid))
        return grid

    mesh.defer(_sampler().submit(sample_and_cache))     # sampled while the scene and Simulator are built
    return mesh


_SAMPLER: list = []


def _sampler() -> ThreadPoolExecutor:
    """The threads that sample robot meshes' SDF grids in the background (one per core; numpy
    releases the GIL in its loops)."""
    if not _SAMPLER:
        _SAMPLER.append(ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="femcontact-sdf"))
    return _SAMPLER[0]


def _gains(value: Gains, joints: list[str], default: dict, what: str) -> dict:
    if value is None:
        return dict(default)
    if isinstance(value, Mapping):
        unknown = set(value) - set(joints)
        if unknown:
            raise ParameterError(f"{what}: unknown joints {sorted(unknown)} (driven joints: {joints})")
        return {j: float(value.get(j, default[j])) for j in joints}
    arr = np.asarray(value, float).reshape(-1)
    if len(arr) == 1:
        arr = np.repeat(arr, len(joints))
    if len(arr) != len(joints) or not np.isfinite(arr).all() or (arr < 0).any():
        raise ParameterError(f"{what}: expected one non-negative number or {len(joints)} (one per driven joint "
                             f"{joints}), got {value!r}")
    return dict(zip(joints, arr.tolist()))


def load_robot(scene, source: Union[str, os.PathLike], *, base_pose=None, joint_positions=None,
               fixed_base: bool = True, name: Optional[str] = None, kp: Gains = None, kd: Gains = None,
               drive_time_constant: float = 0.05, gravity_compensation: bool = True,
               package_dirs: Sequence[str] = (), end_effector: Union[str, Sequence[str], None] = None) -> Robot:
    """Add the robot of URDF file ``source`` (or a ``KNOWN_ROBOTS`` name) to ``scene`` (module
    docstring); ``Scene.add_robot`` documents the arguments."""
    source_name = str(source)
    path = robot_urdf_path(source_name) if source_name in KNOWN_ROBOTS else Path(source_name)
    if not path.is_file():
        raise ParameterError(f"URDF file {str(path)!r} not found (or give a robot name: {sorted(KNOWN_ROBOTS)})")
    rob = read_urdf(path)           # parsed by yourdfpy, or read back from the geometry cache
    rname = name or rob.name or path.stem
    what = f"robot {rname!r} ({path.name})"
    if joint_positions is None and source_name == "panda":
        joint_positions = PANDA_READY
    resolve = _package_resolver(path, package_dirs)
    links = {link.name: link for link in rob.links}
    joints = list(rob.joints)
    for j in joints:
        if j.type not in JOINT_TYPES:
            raise ParameterError(f"{what}: joint {j.name!r} has type {j.type!r}, which is not supported "
                                 f"(supported: {', '.join(JOINT_TYPES)})")
        for role, link in (("parent", j.parent), ("child", j.child)):
            if link not in links:
                raise ParameterError(f"{what}: joint {j.name!r}: its {role} link {link!r} does not exist")
    children = {j.child for j in joints}
    roots = [n for n in links if n not in children]
    if len(roots) != 1:
        raise ParameterError(f"{what}: expected one base link (a link that is no joint's child), found {roots}")
    base = roots[0]
    tree: dict = {}
    rjoints: dict[str, RobotJoint] = {}
    by_name = {j.name: j for j in joints}
    for j in joints:
        origin = np.eye(4) if j.origin is None else np.asarray(j.origin, float)
        tree.setdefault(j.parent, []).append((j.name if j.type != "fixed" else None, origin, j.child))
        if j.type == "fixed":
            continue
        axis = np.asarray(j.axis if j.axis is not None else (1.0, 0, 0), float)
        if not np.isfinite(axis).all() or np.linalg.norm(axis) == 0:
            raise ParameterError(f"{what}: joint {j.name!r} has a zero or invalid axis {axis.tolist()}")
        limits = None
        if j.type != "continuous" and j.limit is not None and j.limit.lower is not None and j.limit.upper is not None:
            limits = (float(j.limit.lower), float(j.limit.upper))
        effort = float(j.limit.effort) if j.limit is not None and j.limit.effort else None
        mimic = None
        if j.mimic is not None:
            if j.mimic.joint not in by_name or by_name[j.mimic.joint].type == "fixed":
                raise ParameterError(f"{what}: joint {j.name!r} mimics {j.mimic.joint!r}, which is not a moving "
                                     "joint of this URDF")
            mimic = (j.mimic.joint, float(j.mimic.multiplier if j.mimic.multiplier is not None else 1.0),
                     float(j.mimic.offset or 0.0))
        rjoints[j.name] = RobotJoint(j.name, f"{rname}.{j.name}", j.type, j.parent, j.child, origin,
                                     axis / np.linalg.norm(axis), limits, effort, mimic)
    for j in rjoints.values():
        if j.mimic is not None and rjoints[j.mimic[0]].mimic is not None:
            raise ParameterError(f"{what}: joint {j.urdf_name!r} mimics {j.mimic[0]!r}, itself a mimic joint")
    actuated = [j.urdf_name for j in rjoints.values() if j.mimic is None]

    # build pose
    if base_pose is None:
        T_base = np.eye(4)
    elif isinstance(base_pose, (tuple, list)) and len(base_pose) == 2:
        pos, rot = base_pose
        T_base = _transform(as_rotation_matrix(rot), vec3(pos, f"{what}: base_pose position"))
    else:
        T_base = np.asarray(base_pose, float)
        if T_base.shape != (4, 4) or not np.isfinite(T_base).all():
            raise ParameterError(f"{what}: base_pose must be (position, rotation) or a 4x4 pose")
        T_base = _transform(as_rotation_matrix(T_base[:3, :3]), T_base[:3, 3])
    robot = Robot(rname, path, base, T_base, actuated, rjoints, {}, tree, {}, resolve=resolve)
    q0 = {}
    if isinstance(joint_positions, Mapping):
        for k in joint_positions:
            if k not in rjoints or rjoints[k].mimic is not None:
                raise ParameterError(f"{what}: joint_positions names {k!r}, not an actuated joint ({actuated})")
    elif joint_positions is not None and len(np.asarray(joint_positions, float).reshape(-1)) != len(actuated):
        raise ParameterError(f"{what}: joint_positions needs {len(actuated)} values ({actuated}), "
                             f"got {len(np.asarray(joint_positions).reshape(-1))}")
    for jn, j in rjoints.items():        # default: 0, or the limit nearest to it
        lo, hi = j.limits if j.limits is not None else (-np.inf, np.inf)
        q0[jn] = float(np.clip(0.0, lo, hi))
    robot.q0 = q0
    robot.q0 = robot.positions(joint_positions)     # mimics follow their leaders
    for jn, j in rjoints.items():
        if j.limits is not None and not (j.limits[0] - 1e-9 <= robot.q0[jn] <= j.limits[1] + 1e-9):
            raise ParameterError(f"{what}: joint {jn!r} starts at {robot.q0[jn]:.6g}, outside its limits {j.limits}")
    world = robot.forward_kinematics()

    # groups of links welded by fixed joints: each becomes one rigid body, framed by its top link
    group = {base: base}
    order = [base]
    for link in order:
        for jname, _, child in tree.get(link, []):
            group[child] = group[link] if jname is None else child
            order.append(child)
    tops = [link for link in order if group[link] == link]
    names = {top: f"{rname}.{top}" for top in tops}
    body_names = {b.name: "rigid" for b in scene.rigid_bodies}
    body_names.update({b.name: "fem" for b in scene.fem_bodies})
    body_names.update({b.name: "rod" for b in scene.rods})
    for n in names.values():
        if n in body_names or n in {o.name for o in scene.obstacles}:
            raise ParameterError(f"{what}: a body named {n!r} already exists; give the robot another name=")
    def group_shape(top: str):
        """The collision shape of the links welded to ``top`` (their pieces in its frame)."""
        T_top_inv = np.linalg.inv(world[top])
        pieces = [(col.geometry, T_top_inv @ world[link] @ (np.eye(4) if col.origin is None
                                                             else np.asarray(col.origin, float)))
                  for link in order if group[link] == top for col in links[link].collisions]
        return _collision_shape(pieces, resolve, f"{what}: link {top!r}")

    shapes = {top: group_shape(top) for top in tops}        # new SDF grids sample in the background
    specs: dict[str, RigidBodySpec] = {}
    for top in tops:
        members = [link for link in order if group[link] == top]
        T_top_inv = np.linalg.inv(world[top])
        m_tot, first, second = 0.0, np.zeros(3), []
        for link in members:
            T = T_top_inv @ world[link]
            L = links[link]
            inert = L.inertial
            m = 0.0 if inert is None or inert.mass is None else float(inert.mass)
            I = np.zeros((3, 3)) if inert is None or inert.inertia is None else np.asarray(inert.inertia, float)
            if m < 0 or not np.isfinite(m):
                raise ParameterError(f"{what}: link {link!r} has mass {m!r}: a mass must be non-negative")
            if m > 0:
                check_inertia(I, f"{what}: link {link!r}")
            elif np.any(I != 0):
                raise ParameterError(f"{what}: link {link!r} has zero mass but non-zero inertia")
            T_in = T @ (np.eye(4) if inert is None or inert.origin is None else np.asarray(inert.origin, float))
            m_tot += m
            first += m * T_in[:3, 3]
            second.append((m, T_in[:3, 3], T_in[:3, :3] @ I @ T_in[:3, :3].T))
            robot.geometry[link] = tuple([(p.geometry, np.eye(4) if p.origin is None else np.asarray(p.origin, float))
                                          for p in group_ if p.geometry is not None]
                                         for group_ in (L.visuals, L.collisions))
        kinematic = fixed_base and top == base
        if m_tot <= 0 and not kinematic:
            raise ParameterError(f"{what}: link {top!r} has zero mass and inertia; a moving link needs a positive "
                                 "mass and a positive-definite inertia (or a fixed joint to a link that has them)")
        com = first / m_tot if m_tot > 0 else np.zeros(3)
        I_top = sum((Ii + mi * ((ci - com) @ (ci - com) * np.eye(3) - np.outer(ci - com, ci - com))
                     for mi, ci, Ii in second), np.zeros((3, 3)))
        if not kinematic:
            I_top = check_inertia(0.5 * (I_top + I_top.T), f"{what}: link {top!r} (with the links fixed to it)")
        shape = shapes[top]
        if shape is None:
            r = 0.5 * np.sqrt(2.5 * np.linalg.eigvalsh(I_top)[0] / m_tot) if m_tot > 0 else 0.01
            warnings.warn(f"{what}: link {top!r} has no collision geometry; it collides as a sphere of radius "
                          f"{r:.3g} m at its centre of mass", stacklevel=3)
            shape = (Sphere(r), _transform(p=com))
        shape, T_bs = shape                       # body frame = the shape's frame, in the top link's frame
        T_world_body = world[top] @ T_bs
        R_tb = T_bs[:3, :3]
        com_body = (np.linalg.inv(T_bs) @ np.r_[com, 1.0])[:3]
        if kinematic:
            m_body, I_body = max(m_tot, 1.0), np.eye(3) * 1e-3
        else:
            m_body, I_body = m_tot, R_tb.T @ I_top @ R_tb
        pos, R = T_world_body[:3, 3].copy(), T_world_body[:3, :3].copy()
        motion = (lambda t, p=pos, r=R: (p, r)) if kinematic else None
        spec = RigidBodySpec(names[top], shape, float(m_body), I_body, com_body, pos, R, np.zeros(3), np.zeros(3),
                             motion)
        specs[top] = spec
        robot.com_local[spec.name] = com_body
        for link in members:
            robot.link_body[link] = (spec.name, np.linalg.inv(T_world_body) @ world[link])
    robot.bodies = [specs[t].name for t in tops]
    if end_effector is None:
        end_effector = KNOWN_END_EFFECTORS.get(source_name)
    if end_effector is not None:
        ee = [end_effector] if isinstance(end_effector, str) else list(end_effector)
        unknown = [link for link in ee if link not in robot.link_body]
        if unknown or not ee:
            raise ParameterError(f"{what}: end_effector names {unknown or ee!r}, not links of the robot "
                                 f"(links: {sorted(robot.link_body)})")
        robot.end_effector = ee
    for spec in specs.values():
        scene.rigid_bodies.append(spec)
        body_names[spec.name] = "rigid"

    # joints: what each carries (gravity compensation, stiffness), drives, mimics
    subtree: dict[str, list] = {}
    for link in reversed(order):
        below = [group[link]] + [x for _, _, c in tree.get(link, []) for x in subtree[c]]
        subtree[link] = list(dict.fromkeys(below))
    kp_default, kd_default = {}, {}
    tau = positive(drive_time_constant, f"{what}: drive_time_constant")
    made = {}
    for jn, j in rjoints.items():
        T_j = world[j.parent] @ j.origin @ _joint_motion(j.kind, j.axis, robot.q0[jn])
        anchor, axis = T_j[:3, 3], T_j[:3, :3] @ j.axis
        carried = [specs[t] for t in subtree[j.child]]
        mass = sum(s.mass for s in carried)
        inertia = np.zeros((3, 3))
        for s in carried:
            d = s.com - anchor
            inertia += s.rotation @ s.inertia @ s.rotation.T + s.mass * (d @ d * np.eye(3) - np.outer(d, d))
        about_axis = float(axis @ inertia @ axis) if j.kind != "prismatic" else mass
        kp_default[jn] = about_axis / tau**2
        kd_default[jn] = 2 * about_axis / tau
        kind = "prismatic" if j.kind == "prismatic" else "hinge"
        if group[j.parent] == group[j.child]:
            raise ParameterError(f"{what}: joint {jn!r} closes a loop of fixed joints")
        spec = make_joint(kind, names[group[j.parent]], names[group[j.child]], anchor, axis, j.limits, None, None,
                          j.name, body_names)
        spec.position0 = robot.q0[jn]
        spec.ref_mass = mass
        spec.ref_inertia = float(np.linalg.eigvalsh(inertia)[-1])
        spec.subtree = tuple(s.name for s in carried)
        spec.gravity_compensation = bool(gravity_compensation)
        if j.mimic is not None:
            spec.mimic = Mimic(rjoints[j.mimic[0]].name, j.mimic[1], j.mimic[2])
        made[jn] = spec
    for jn, j in rjoints.items():       # a leader also moves its mimics: m² times their inertia
        if j.mimic is not None:
            kp_default[j.mimic[0]] += j.mimic[1] ** 2 * kp_default[jn]
            kd_default[j.mimic[0]] += j.mimic[1] ** 2 * kd_default[jn]
    kp_v = _gains(kp, actuated, kp_default, f"{what}: kp")
    kd_v = _gains(kd, actuated, kd_default, f"{what}: kd")
    for jn in actuated:
        made[jn].drive = Drive(kp_v[jn], kd_v[jn], robot.q0[jn], 0.0, rjoints[jn].effort)
    scene.joints.extend(made.values())
    for a in range(len(robot.bodies)):
        for b in range(a + 1, len(robot.bodies)):
            scene.set_contact(robot.bodies[a], robot.bodies[b], enabled=False)
    return robot
