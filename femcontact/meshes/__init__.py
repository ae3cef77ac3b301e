"""Meshes: containers, primitives, import, validation."""
from .primitives import box
from .types import TetMesh

__all__ = ["TetMesh", "box"]
