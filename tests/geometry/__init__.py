"""Shapes, SDF grids and the geometry cache (geometry/, geometry_cache.py)."""
