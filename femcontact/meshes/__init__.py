"""Meshes: containers, primitives, import/export, validation, quality, surfaces, rods."""
from .io import data_file, load, save
from .primitives import box, cylinder, finger, plate, sphere
from .quality import QualityReport, quality_report
from .rods import rod_arc, rod_helix, rod_straight
from .surface import boundary_faces, surface_area, surface_vertices
from .tetrahedralize import tetrahedralize_surface
from .types import TetMesh
from .validate import MeshWarning, ValidationLog, validate

__all__ = [
    "TetMesh", "box", "cylinder", "sphere", "plate", "finger",
    "load", "save", "data_file", "tetrahedralize_surface",
    "validate", "ValidationLog", "MeshWarning", "quality_report", "QualityReport",
    "boundary_faces", "surface_vertices", "surface_area",
    "rod_straight", "rod_arc", "rod_helix",
]
