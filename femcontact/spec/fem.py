"""FEM bodies as the user describes them: the host side of ``Scene.add_fem_body``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..errors import MeshError, ParameterError
from ..meshes.types import TetMesh
from ..meshes.validate import check_coordinates
from .drive import NodeDrive, PositionDrive, VelocityDrive
from .force import nodal_force
from .material import Material
from .selection import NodeSelector, require_nodes, select_nodes
from .validation import as_rotation_matrix, check_drive, check_drive_output, vec3


def check_tet_mesh(mesh: TetMesh, name: str, rel_tol: float = 1e-12) -> None:
    """Refuse empty meshes, NaN or huge coordinates, bad indices, vertices in no tet, duplicate
    points, inverted and zero-volume tets, naming them and saying how to repair them."""
    if mesh.n_tets == 0:
        raise MeshError(f"mesh of body {name!r} has no tetrahedra; give a volume mesh "
                        "(femcontact.meshes.box/sphere/..., or femcontact.meshes.load of a tet or surface file)")
    check_coordinates(mesh.vertices, f"mesh of body {name!r}")
    if mesh.tets.min() < 0 or mesh.tets.max() >= mesh.n_vertices:
        e = int(np.flatnonzero((mesh.tets < 0).any(1) | (mesh.tets >= mesh.n_vertices).any(1))[0])
        raise MeshError(f"tet {e} of body {name!r} refers to a vertex outside 0..{mesh.n_vertices - 1}; "
                        "tets index rows of the vertex array, from 0")
    used = np.zeros(mesh.n_vertices, bool)
    used[mesh.tets.ravel()] = True
    if not used.all():
        free = np.flatnonzero(~used)
        raise MeshError(f"vertex {int(free[0])} of body {name!r} belongs to no tet ({free.size} such vertices, "
                        f"indices {free[:10].tolist()}): it would have no mass; remove them with "
                        "femcontact.meshes.validate(mesh)")
    _, inverse, counts = np.unique(mesh.vertices, axis=0, return_inverse=True, return_counts=True)
    if (counts > 1).any():
        dup = np.flatnonzero(counts[inverse.reshape(-1)] > 1)
        a = int(dup[0])
        b = int(dup[(inverse.reshape(-1)[dup] == inverse.reshape(-1)[a]) & (dup != a)][0])
        raise MeshError(f"vertices {a} and {b} of body {name!r} are duplicate points at {mesh.vertices[a].tolist()} "
                        f"({int((counts - 1).sum())} duplicates): the mesh falls apart along them; merge them with "
                        "femcontact.meshes.validate(mesh)")
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
    self_contact: bool = False     # contact between parts of its own surface far apart at rest

    @property
    def n_nodes(self) -> int:
        return len(self.positions)

    def select(self, nodes: NodeSelector) -> np.ndarray:
        """Body-local indices picked by ``nodes`` (see ``femcontact.spec.selection.select_nodes``)."""
        return select_nodes(nodes, self.positions, self.name)

    def pin(self, nodes: NodeSelector) -> np.ndarray:
        """Hold the selected nodes fixed in place. Returns their indices."""
        idx = require_nodes(self.select(nodes), nodes, self.positions, f"pin on {self.name!r}")
        self.drives.append(NodeDrive(idx, velocity=lambda t: np.zeros(3)))
        return idx

    def drive(self, nodes: NodeSelector, *, position: Optional[PositionDrive] = None,
              velocity: Optional[VelocityDrive] = None) -> np.ndarray:
        """Prescribe the motion of the selected nodes.

        position(t, x0) -> (k, 3) world positions at time t given their placed positions x0;
        or velocity(t) -> (3,) or (k, 3) in m/s. Exactly one of the two.
        """
        what = f"drive on {self.name!r}"
        check_drive(what, position, velocity)
        idx = require_nodes(self.select(nodes), nodes, self.positions, what)
        check_drive_output(what, position, velocity, self.positions[idx])
        self.drives.append(NodeDrive(idx, position=position, velocity=velocity))
        return idx

    def add_force(self, force, nodes: NodeSelector = None, mode: str = "total") -> np.ndarray:
        """Apply an external force (3,) N, or a function t -> (3,), to the selected nodes.

        mode "total": the force is the resultant, split over the nodes by lumped mass;
        "per_node": every selected node gets the full force.
        """
        idx = require_nodes(self.select(nodes), nodes, self.positions, f"force on {self.name!r}")
        self.forces.append(nodal_force(idx, force, mode, f"force on {self.name!r}"))
        return idx


def make_fem_body(name: str, mesh, material, position, rotation, velocity, self_contact: bool = False) -> FemBodySpec:
    """Validate ``Scene.add_fem_body``'s arguments and place the mesh (rotate, then move)."""
    if not isinstance(mesh, TetMesh):
        raise MeshError(f"body {name!r}: expected a femcontact.meshes.TetMesh, got {type(mesh).__name__}")
    if not isinstance(material, Material):
        raise ParameterError(f"body {name!r}: expected a femcontact.Material, got {type(material).__name__}")
    check_tet_mesh(mesh, name)
    R = as_rotation_matrix(rotation)
    x = mesh.vertices @ R.T + vec3(position, f"position of {name!r}")
    check_coordinates(x, f"body {name!r} placed at position {np.asarray(position).tolist()}")
    v = np.tile(vec3(velocity, f"velocity of {name!r}"), (len(x), 1))
    if not isinstance(self_contact, (bool, np.bool_)):
        raise ParameterError(f"body {name!r}: self_contact must be True or False, got {self_contact!r}")
    return FemBodySpec(name, mesh, material, x, v, self_contact=bool(self_contact))
