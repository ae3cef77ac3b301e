"""TriangleMesh's sampled SDF grid (issue 17, cold robot start: its sampling vectorized and pruned, the same
values bit for bit) against brute force: the distance to every triangle and the inside test of the solid."""
import numpy as np
import pytest

import femcontact as fc
from femcontact.contact.shapes import closest_point_on_triangles


def _brute_force(mesh):
    xs, ys, zs = (mesh.origin[i] + mesh.spacing * np.arange(mesh.dims[i]) for i in range(3))
    P = np.stack(np.meshgrid(xs, ys, zs, indexing="ij"), -1).reshape(-1, 3)
    tri = mesh.vertices[mesh.faces]
    best = np.full(len(P), np.inf)
    for a, b, c in tri:
        q, _ = closest_point_on_triangles(P, *(np.broadcast_to(x, P.shape) for x in (a, b, c)))
        best = np.minimum(best, np.linalg.norm(P - q, axis=1))
    return P, best


@pytest.mark.parametrize("shape", [
    fc.shapes.Sphere(0.3), fc.shapes.Box((0.3, 0.1, 0.06)),
    pytest.param(fc.shapes.Capsule(0.05, 0.2), marks=pytest.mark.xfail(
        strict=True, reason="known limit: the distance is taken over the 24 triangles with the nearest centroids, "
                            "which can miss the nearest of long, thin triangles (here up to 41 mm off at 13% of "
                            "the nodes; the Panda's link meshes up to 8-33 mm at 2-6%)"))])
def test_mesh_grid_is_the_distance_to_the_nearest_triangle_signed_by_the_inside(shape):
    v, f = shape.surface()
    mesh = fc.shapes.TriangleMesh(v, f, resolution=12)
    P, dist = _brute_force(mesh)
    grid = mesh.grid.reshape(-1)
    np.testing.assert_allclose(np.abs(grid), dist, rtol=0, atol=1e-12)
    inside = shape.sdf(P)[0] < 0
    near = np.abs(shape.sdf(P)[0]) < 0.01        # nodes within the polygonal surface's chord error: either sign
    assert ((grid < 0) == inside)[~near].all()
