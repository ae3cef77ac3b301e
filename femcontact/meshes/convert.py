"""Conforming conversion of linear/quadratic volume cells into linear tetrahedra.

Every quadrilateral face is split along the diagonal through its lowest global
vertex index, and each cell is coned from its own lowest vertex to the face
triangles that do not contain it (Dompierre et al. 1999). Two cells sharing a
quad face therefore split it the same way: the result is conforming, adds no
vertices, and has exactly the cell volume when faces are planar.
"""
from __future__ import annotations

import numpy as np

# Corner-node faces in VTK/meshio local numbering.
_CELL_FACES = {
    "hexahedron": [(0, 3, 2, 1), (4, 5, 6, 7), (0, 1, 5, 4), (1, 2, 6, 5), (2, 3, 7, 6), (3, 0, 4, 7)],
    "wedge": [(0, 2, 1), (3, 4, 5), (0, 1, 4, 3), (1, 2, 5, 4), (2, 0, 3, 5)],
    "pyramid": [(0, 3, 2, 1), (0, 1, 4), (1, 2, 4), (2, 3, 4), (3, 0, 4)],
}
_N_CORNERS = {"tetra": 4, "hexahedron": 8, "wedge": 6, "pyramid": 5}

#: meshio cell type -> linear type whose corners are its first nodes.
LINEAR_OF = {
    "tetra": "tetra", "tetra10": "tetra", "tetra4": "tetra",
    "hexahedron": "hexahedron", "hexahedron20": "hexahedron", "hexahedron24": "hexahedron",
    "hexahedron27": "hexahedron",
    "wedge": "wedge", "wedge12": "wedge", "wedge15": "wedge", "wedge18": "wedge",
    "pyramid": "pyramid", "pyramid13": "pyramid", "pyramid14": "pyramid",
}
SURFACE_TYPES = {"triangle", "triangle6", "triangle7", "quad", "quad8", "quad9"}
IGNORED_TYPES = SURFACE_TYPES | {"vertex", "line", "line3", "polygon"}


def cells_to_tets(cell_type: str, cells: np.ndarray):
    """Return (tets (k,4) int64, owner (k,) index of the source cell) for one cell block."""
    lin = LINEAR_OF[cell_type]
    c = np.asarray(cells, dtype=np.int64)[:, : _N_CORNERS[lin]]
    if lin == "tetra":
        return c, np.arange(len(c))
    n = len(c)
    apex = c.min(axis=1)
    tets, owners = [], []
    for face in _CELL_FACES[lin]:
        f = c[:, face]
        if len(face) == 3:
            tris = [f]
        else:
            # rotate each quad so its lowest vertex comes first, split through it
            r = np.argmin(f, axis=1)
            idx = (r[:, None] + np.arange(4)[None, :]) % 4
            g = np.take_along_axis(f, idx, axis=1)
            tris = [g[:, [0, 1, 2]], g[:, [0, 2, 3]]]
        for t in tris:
            keep = ~(t == apex[:, None]).any(axis=1)
            # faces listed outward -> (t0, t2, t1, apex) is positively oriented for convex cells
            tets.append(np.column_stack([t[keep, 0], t[keep, 2], t[keep, 1], apex[keep]]))
            owners.append(np.flatnonzero(keep))
    tets = np.concatenate(tets)
    owners = np.concatenate(owners)
    order = np.argsort(owners, kind="stable")
    assert len(tets) > 0 or n == 0
    return tets[order], owners[order]
