"""Regenerate the small meshes shipped in this folder: python meshes/make_meshes.py

Units are metres. Each file is loaded by femcontact.meshes.load / data_file.
"""
from pathlib import Path

import numpy as np

from femcontact.meshes import box, finger, plate, save, sphere

HERE = Path(__file__).resolve().parent


def torus_surface(R=0.04, r=0.015, n_major=48, n_minor=24):
    """Closed, outward-oriented triangle surface of a torus about z (vertices, faces)."""
    u = np.linspace(0, 2 * np.pi, n_major, endpoint=False)
    v = np.linspace(0, 2 * np.pi, n_minor, endpoint=False)
    U, V = np.meshgrid(u, v, indexing="ij")
    pts = np.stack([(R + r * np.cos(V)) * np.cos(U), (R + r * np.cos(V)) * np.sin(U), r * np.sin(V)], -1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(n_major), np.arange(n_minor), indexing="ij")
    a = i * n_minor + j
    b = ((i + 1) % n_major) * n_minor + j
    c = ((i + 1) % n_major) * n_minor + (j + 1) % n_minor
    d = i * n_minor + (j + 1) % n_minor
    faces = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3), np.stack([a, c, d], -1).reshape(-1, 3)])
    return pts, faces


def main():
    save(box((0.1, 0.1, 0.1), 6), HERE / "cube.vtu")
    save(sphere(0.05, 8), HERE / "soft_ball.vtu")
    save(plate((0.3, 0.3, 0.01), 16, n_thickness=2), HERE / "mat.vtu")
    save(finger(0.08, 0.01, 6, tip="round"), HERE / "finger.vtu")
    import meshio

    pts, faces = torus_surface()
    meshio.write(HERE / "torus.obj", meshio.Mesh(pts, [("triangle", faces)]))


if __name__ == "__main__":
    main()
